"""The shape of every document napilab writes: the `Record` base and the one codec
(msgspec, chosen by benchmarks/records.py) that encodes, parses, validates, migrates and
publishes them as JSON Schemas. Record types live with what they describe (the manifest
in harness.store.manifest, check.json in reports.nightly.check_record, ...) and are
listed in harness.records.published; this package imports nothing of napilab but
harness.errors."""
