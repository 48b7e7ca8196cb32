"""The YAML grammar every file napilab reads shares: the source with its locations
(yamlsrc), the Checker (schema), each kind of file's keys (keys) and CPU lists (cpus).
Below profile, inventory, knobs and authoring, which all read it; it imports nothing of
napilab but harness.errors and harness.redact."""
