"""The documents napilab writes are typed records (harness.records): every record round
trips with every field set, keys of a newer napilab survive a rewrite, the published
JSON Schemas are current and accept what napilab writes, older versions read, and no
module parses napilab's JSON but the codec (an AST scan of every module)."""

from __future__ import annotations

import ast
import importlib
import json
import types
import typing
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from napilab.harness.cli.setup import RECORDS, record_schema_text
from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.records.codec import RECORDS as BASES
from napilab.harness.records.codec import Document
from napilab.harness.tune.record import TuneStudy
from napilab.reports.nightly.check_record import CheckRecord, read_check
from tests.import_graph import ROOT, imports, modules, within

GOLDEN = ROOT / "tests" / "golden" / "records"

# Modules that parse JSON which is not a napilab record: a tool's or the kernel's output,
# or a script that runs on a lab host (no napilab there). Each with why.
OTHERS_JSON = {
    "harness.knobs.kinds.napi": "`ynl --family netdev` output (the kernel's netlink)",
    "harness.knobs.kinds.kernel": "a knob value's text and `kernel-install`/bootloader "
                                  "listings",
    "harness.lab.netns": "`ip -j route` output",
    "runners.workloads.command": "a user command's own JSON output",
    "runners.collectors.qstats": "`ynl` qstats output",
    "runners.collectors.trace.trace": "`bpftrace -f json` output",
}
CODEC = "harness.records.codec"
PARSERS = {("json", "load"), ("json", "loads"), ("msgspec.json", "decode"),
           ("msgspec", "convert")}


# modules of records that are napilab's own state, not published (`napilab schema`)
INTERNAL = ("napilab.harness.lab.vmbed", "napilab.harness.lab.tools",
            "napilab.harness.hosts.host_records")


def _record_classes() -> list[type]:
    for target in (*RECORDS.values(), *INTERNAL):
        importlib.import_module(target.split(":")[0])
    found: list[type] = []
    todo = list(BASES)
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in found and sub is not Document:
                found.append(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


def _callee(node: ast.Call) -> tuple[str, str] | None:
    func = node.func
    if isinstance(func, ast.Attribute):
        return ast.unparse(func.value), func.attr
    return None


def _parsers(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _callee(node) in PARSERS]


def test_only_the_codec_parses_napilabs_json() -> None:
    found = {name: lines for name, path in modules().items() if (lines := _parsers(path))}
    assert CODEC in found  # the scan sees the codec's own msgspec calls
    unexplained = {n: lines for n, lines in found.items()
                   if n != CODEC and n not in OTHERS_JSON}
    assert unexplained == {}, "read napilab's documents through harness.records"
    stale = [n for n in OTHERS_JSON if n not in found]
    assert stale == [], "no reader left there: take it off the list"


def test_the_records_package_imports_only_errors() -> None:
    found = modules("harness.records")
    assert len(found) >= 2
    for name, path in found.items():
        bad = {n for n in imports(path) if within(n, "harness", "runners", "reports")
               and not within(n, "harness.errors", "harness.records")}
        assert not bad, f"{name} imports {bad}"


def _filled(hint: Any, name: str) -> Any:
    """A value of type `hint` unlike its default."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _filled(next(a for a in args if a is not type(None)), name)
    if origin is typing.Literal:
        return args[-1]
    if origin is list:
        return [_filled(args[0], name)]
    if origin is tuple:
        return tuple(_filled(arg, name) for arg in args)
    if origin is dict:
        return {"key": _filled(args[1], name)}
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return filled(hint)
    if hint is Any:
        return {"any": [1, "x"]}
    return {str: f"{name}-value", int: 7, float: 2.5, bool: True}[hint]


def filled(cls: type) -> Any:
    hints = typing.get_type_hints(cls)
    values = {name: _filled(hints[name], name) for name in cls.__struct_fields__
              if name not in ("extra", "schema_version")}
    return cls(**values)


@pytest.mark.parametrize("cls", _record_classes(), ids=lambda c: c.__name__)
def test_every_field_round_trips_and_reaches_the_file(cls: type) -> None:
    record = filled(cls)
    data = codec.encode(record)
    written = json.loads(data)
    missing = [n for n in cls.__struct_fields__ if n != "extra" and n not in written]
    assert missing == [], f"fields not in the file: {missing}"
    assert codec.parse(data, cls, "test") == record


@pytest.mark.parametrize("cls", _record_classes(), ids=lambda c: c.__name__)
def test_keys_of_a_newer_napilab_are_kept_at_every_level(cls: type) -> None:
    doc = json.loads(codec.encode(filled(cls)))
    for record in _record_dicts(cls, doc):
        record["from_napilab_9"] = {"n": 1}
    again = json.loads(codec.encode(codec.convert(json.loads(json.dumps(doc)), cls, "t")))
    records = _record_dicts(cls, again)
    assert records and all(r.get("from_napilab_9") == {"n": 1} for r in records)


def _record_dicts(cls: type, doc: Any) -> list[dict[str, Any]]:
    """The JSON objects of `doc` that are records of `cls` (or nested in it)."""
    out = [doc]
    hints = typing.get_type_hints(cls)
    for name in cls.__struct_fields__:
        inner = [a for a in _leaves(hints[name]) if isinstance(a, type)
                 and issubclass(a, BASES)]
        if inner and name in doc and doc[name] is not None:
            value = doc[name]
            items = value if isinstance(value, list) else (
                list(value.values()) if isinstance(value, dict) and
                typing.get_origin(_strip(hints[name])) is dict else [value])
            for item in items:
                out += _record_dicts(inner[0], item)
    return out


def _strip(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def _leaves(hint: Any) -> list[Any]:
    args = typing.get_args(hint)
    return [hint] if not args else [x for a in args for x in _leaves(a)]


@pytest.mark.parametrize("kind", sorted(RECORDS))
def test_the_published_schema_is_current_and_accepts_what_napilab_writes(kind: str) -> None:
    published = ROOT / "docs" / "records" / f"{kind}.schema.json"
    assert published.read_text() == record_schema_text(kind), \
        f"regenerate: napilab schema {kind} -o docs/records/{kind}.schema.json"
    module, name = RECORDS[kind].split(":")
    cls = getattr(importlib.import_module(module), name)
    schema = json.loads(published.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(codec.encode(filled(cls))), schema)
    bad = json.loads(codec.encode(filled(cls)))
    first = next(n for n in cls.__struct_fields__ if n != "extra")
    bad[first] = 5 if isinstance(bad[first], str) else "wrong"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_a_check_summary_napilab_wrote_before_records_reads_as_version_1(
        tmp_path: Path) -> None:
    """check.json of the napilab before this codec (no schema_version; captured from
    `napilab check` at 1e67581 on tests/golden/gate_runs/nightly): read, typed."""
    (tmp_path / "check.json").write_bytes((GOLDEN / "check-before-records.json").read_bytes())
    found = read_check(tmp_path)
    assert found is not None and found.schema_version == CheckRecord.VERSION == 1
    assert found.status == "regression" and len(found.regressions) == 4
    case = found.regressions[0]
    assert case.comparison is not None and case.comparison.p_adjusted is not None
    assert found.baseline.kind and found.candidate.run_id
    assert found.extra == {} and all(c.extra == {} for c in found.cases)
    assert read_check(tmp_path / "none") is None


@pytest.mark.parametrize(("text", "message"), [
    (b"{", "not JSON"),
    (b"[1]", "not a check summary"),
    (b'{"profile": "p", "status": 3}', r"Expected `str`, got `int` - at `\$.status`"),
    (b'{"schema_version": 7}', "schema_version 7, this napilab reads 1"),
])
def test_a_damaged_record_is_one_clear_input_error(tmp_path: Path, text: bytes,
                                                   message: str) -> None:
    (tmp_path / "check.json").write_bytes(text)
    with pytest.raises(InputError, match=message) as caught:
        read_check(tmp_path)
    assert str(tmp_path / "check.json") in str(caught.value)


def test_json_cannot_hold_nan_so_the_record_holds_null() -> None:
    """json.dumps wrote NaN (not JSON); the codec writes null and reads it back."""
    doc = json.loads(codec.plain_json({"a": float("nan"), "b": float("inf")}))
    assert doc == {"a": None, "b": None}
    assert msgspec.json.decode(codec.plain_json([1.5])) == [1.5]


def test_a_tune_study_napilab_wrote_before_records_reads_with_no_key_left_over() -> None:
    """tests/golden/tune/study/tune.json (a real study, written by hand-built dicts):
    every key it has is a field of the record (none lands in `extra`)."""
    study = codec.read(ROOT / "tests" / "golden" / "tune" / "study" / "tune.json",
                       TuneStudy)
    assert study.schema_version == 1 and study.candidates and study.confirmation
    records = [study, study.tune, study.baseline, study.confirmation, *study.candidates]
    assert all(r is not None and r.extra == {} for r in records)
    assert study.confirmation.recommended and study.candidates[0].name == "t000"


def test_the_parquet_files_have_the_column_records_columns(tmp_path: Path) -> None:
    """samples/<trial>.parquet, the merged samples.parquet and latency/<trial>.parquet
    hold exactly the columns and types of SampleRow and LatencyRow."""
    import pyarrow.parquet as pq

    from napilab.harness.store.columns import LatencyRow, SampleRow, arrow_schema, columns
    from napilab.harness.store.manifest import Manifest
    from napilab.harness.store.store import COLUMNS, Row, RunStore

    store = RunStore.create(tmp_path, "p", Manifest())
    store.add_rows([Row(1, "v", 1, "client", "a", "ping", "rtt_avg", None, 12.5, "us"),
                    Row(1, "v", 1, "client", "a", "softnet_stat", "processed", 0, 3.0,
                        "count")])
    store.write_latencies("001", [10.0, 11.5])
    per_trial = pq.read_schema(next((store.dir / "samples").glob("*.parquet")))
    assert per_trial.remove_metadata() == arrow_schema(SampleRow)
    store.merge_samples()
    merged = pq.read_schema(store.dir / "samples.parquet")
    assert merged.remove_metadata() == arrow_schema(SampleRow)
    assert tuple(merged.names) == COLUMNS == columns(SampleRow)
    latency = pq.read_schema(store.dir / "latency" / "001.parquet")
    assert latency.remove_metadata() == arrow_schema(LatencyRow)


def test_a_state_directory_without_its_record_says_what_it_is_not(tmp_path: Path) -> None:
    """tune's and bisect's directories are opened by one reader: no record is an input
    error naming the directory, what it is not and how to start one; a record that
    cannot be read says so."""
    with pytest.raises(InputError) as exc:
        codec.read_state(tmp_path, "study.json", TuneStudy, "a tune study", "start one")
    assert exc.value.message == f"{tmp_path}: not a tune study (no study.json)"
    assert exc.value.hint == "start one"
    (tmp_path / "study.json").mkdir()
    with pytest.raises(InputError, match=r"study.json: unreadable \(Is a directory\)"):
        codec.read_state(tmp_path, "study.json", TuneStudy, "a tune study", "start one")
