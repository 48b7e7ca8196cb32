"""Every captured output under tests/data against its `.expected.json` (schema in
tests/data/README.md): the registry's parser, and for cases with a `tool` section the
workload tool's parse(), failures included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from napilab.runners.base import ParseError, ToolFailed
from napilab.runners.registry import PARSERS, TOOLS, metrics_json
from napilab.runners.workloads.workload import Context, ProcessOutput, ToolOutput

DATA = Path(__file__).parents[1] / "data"
CTX = Context(target="192.0.2.2", bind="192.0.2.1", duration=10, workdir="/tmp/napilab",
              trial="t001")


def expected_path(path: Path) -> Path:
    return path.with_name(path.name[: -len(path.suffix)] + ".expected.json")


def _files() -> list[Path]:
    return sorted(p for p in DATA.rglob("*") if p.is_file() and p.name != "README.md"
                  and not p.name.endswith(".expected.json"))


FILES = _files()
TOOL_CASES = [p for p in FILES if "tool" in json.loads(expected_path(p).read_text())]


def _id(path: Path) -> str:
    return str(path.relative_to(DATA))


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # byte-exact: no newline translation


def _check(expected: dict[str, Any], parser: str, text: str) -> None:
    if "error" in expected:
        assert expected["error"] == "ParseError"
        with pytest.raises(ParseError) as info:
            PARSERS[parser](text)
        assert expected["error_contains"] in info.value.reason
        return
    doc = metrics_json(parser, PARSERS[parser](text))
    assert doc["units"] == expected["units"]
    assert doc["metrics"] == pytest.approx(expected["metrics"], rel=1e-9, abs=1e-12)


def test_every_data_file_has_an_expected_file_and_back() -> None:
    assert len(FILES) > 90
    for path in FILES:
        assert expected_path(path).exists(), f"{path} has no .expected.json"
    for expected in DATA.rglob("*.expected.json"):
        stem = expected.name.removesuffix(".expected.json")
        assert [p for p in expected.parent.iterdir() if p.name.startswith(stem + ".")
                and p.name[len(stem) + 1:].count(".") == 0
                and not p.name.endswith(".expected.json")], f"{expected} has no data file"


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_parser(path: Path) -> None:
    expected = json.loads(expected_path(path).read_text())
    assert expected["source"]
    parser = expected["parser"]
    if parser is None:
        assert expected["why"]  # a reference listing no parser reads; kept for the record
        return
    assert parser in PARSERS
    _check(expected, parser, _text(path))
    if "json_records" in expected:  # output saved as a JSON list of stdout lines
        records = json.loads(_text(path))
        assert len(records) == len(expected["json_records"])
        for lines, record in zip(records, expected["json_records"], strict=True):
            _check(record, parser, "\n".join(lines))


def _output(path: Path, spec: dict[str, Any]) -> ToolOutput:
    def read(name: str | None) -> str:
        return _text(path.parent / name) if name else ""

    stdout = read(spec["stdout_file"]) if "stdout_file" in spec else _text(path)
    files = {key: read(name) for key, name in spec.get("client_files", {}).items()}
    own = ProcessOutput(spec["exit_code"], stdout, read(spec.get("stderr_file")), files)
    if spec.get("role", "client") == "server":
        return ToolOutput(ProcessOutput(0, read(spec["client_file"]), ""), own)
    server = ProcessOutput(0, read(spec["server_file"]), "") if "server_file" in spec else None
    return ToolOutput(own, server)


@pytest.mark.parametrize("path", TOOL_CASES, ids=_id)
def test_tool(path: Path) -> None:
    expected = json.loads(expected_path(path).read_text())
    spec = expected["tool"]
    tool = TOOLS[spec["name"]]
    if "client_args" in spec:  # the command tool learns its metrics from commands()
        tool.commands(spec["client_args"], {}, CTX)
    output = _output(path, spec)
    if "error" in spec:
        assert spec["error"] == "ToolFailed"
        with pytest.raises(ToolFailed) as info:
            tool.parse(output)
        for text in spec["message_contains"]:
            assert text in str(info.value)
        return
    result = tool.parse(output)
    assert metrics_json(spec["name"], result.client)["metrics"] == pytest.approx(
        expected["metrics"], rel=1e-9, abs=1e-12)
    if "server_file" in spec:
        server_expected = json.loads(expected_path(path.parent / spec["server_file"]).read_text())
        assert metrics_json(spec["name"], result.server)["metrics"] == pytest.approx(
            server_expected["metrics"], rel=1e-9, abs=1e-12)
    if "latencies" in spec:
        assert isinstance(result.latencies_us, np.ndarray)
        assert result.latencies_us.dtype == np.float64
        assert len(result.latencies_us) == spec["latencies"]
    else:
        assert result.latencies_us is None
