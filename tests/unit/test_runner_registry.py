"""The registry of workload tools and collectors (runners.registry): a throw-away tool and
a throw-away collector, each one class added there alone, are validated by the profile
and its JSON Schema, planned, run on this machine (transport: local), parsed by
`napilab parse`, recorded with their headline metrics in the manifest, and shown and
judged by the report as napilab's own tools and collectors are."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.authoring.json_schema import profile_schema
from napilab.harness.errors import InputError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.design import primary_lines
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.store.manifest import Manifest
from napilab.runners import registry
from napilab.runners.base import COUNT, ParseError, Value, parse_int
from napilab.runners.collectors.collector import HostInfo
from napilab.runners.workloads.workload import (
    ArgSpec,
    ArgValue,
    Context,
    Parser,
    ToolCommands,
    ToolOutput,
    ToolResult,
)
from tests.cli import run_cli


def toy_values(text: str) -> list[Value]:
    """`name=value` lines: the toy tool's whole output format."""
    out = []
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if not sep:
            raise ParseError("toy", "expected name=value", line)
        out.append(Value(name, float(value), "us" if name.endswith("_us") else "1/s"))
    return out


class ToyTool:
    """A throw-away tool: the client prints two metrics through `sh`."""

    name = "toy"
    headline: tuple[str, ...] = ("latency_us",)
    metrics: tuple[str, ...] = ("latency_us", "rate")
    operations: Mapping[str, tuple[str, ...]] = {}
    parsers: Mapping[str, Parser] = {"toy": toy_values}
    versions: Mapping[str, tuple[str, ...] | None] = {"sh": None}
    client_args: Mapping[str, ArgSpec] = {"latency": ArgSpec((int, float), "what to print")}
    server_args: Mapping[str, ArgSpec] = {}

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        latency = client_args.get("latency", 10)
        return ToolCommands(client=["sh", "-c", f"echo latency_us={latency}; echo rate=100"])

    def parse(self, output: ToolOutput) -> ToolResult:
        return ToolResult(client=toy_values(output.client.stdout))

    def programs(self, side: str) -> tuple[str, ...]:
        return ("sh",) if side == "client" else ()


@dataclass(frozen=True)
class ToySnapshot:
    running: int
    processes: int


class ToyCollector:
    """A throw-away collector: a file (/proc/loadavg's running tasks) and a section of
    its own (the number of processes), both gauges, kept by `names`."""

    name = "toy_load"
    paths: tuple[str, ...] = ("/proc/loadavg", "@toy_processes")
    options: Mapping[str, str] = {"names": "names"}
    headline: tuple[str, ...] = ("processes",)
    metrics: tuple[str, ...] = ("running", "processes")
    sections: Mapping[str, str] = {
        "@toy_processes": 'echo "==> @toy_processes <=="; ls -d /proc/[0-9]* | wc -l'}
    parsers: Mapping[str, Parser] = {"toy_load": lambda text: [
        Value("running", float(text.split()[3].split("/")[0]), COUNT)]}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> ToySnapshot:
        return ToySnapshot(parse_int("toy_load", files["/proc/loadavg"].split()[3].split("/")[0]),
                           parse_int("toy_load", files["@toy_processes"].strip()))

    def delta(self, before: ToySnapshot, after: ToySnapshot, options: Mapping[str, Any],
              host: HostInfo) -> list[Value]:
        values = [Value("running", after.running, COUNT),
                  Value("processes", after.processes, COUNT)]
        names = options.get("names")
        return [v for v in values if names is None or v.metric in names]


PROFILE = """\
name: toys
hosts:
  a: {host: a}
workload:
  tool: toy
  duration: 1
  client: {role: a, args: {latency: 10}}
collect:
  toy_load: {names: [processes, running]}
variants:
  slow: {}
  fast: {workload: {client: {args: {latency: 5}}}}
repeat: 3
"""


@pytest.fixture()
def toys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy tool and collector in the registry, and only there."""
    monkeypatch.setitem(registry.TOOLS, "toy", ToyTool())
    monkeypatch.setitem(registry.COLLECTORS, "toy_load", ToyCollector())
    for item in (ToyTool(), ToyCollector()):
        for name, parser in item.parsers.items():
            monkeypatch.setitem(registry.PARSERS, name, parser)
    yield


def files(tmp_path: Path, profile: str = PROFILE, name: str = "p") -> tuple[Path, Path]:
    (tmp_path / f"{name}.yaml").write_text(profile)
    (tmp_path / "inv.yaml").write_text("transport: local\nhosts:\n  a: {address: 127.0.0.1}\n")
    return tmp_path / f"{name}.yaml", tmp_path / "inv.yaml"


def test_the_profile_and_its_schema_know_them(toys: None, tmp_path: Path) -> None:
    profile_path, inventory = files(tmp_path)
    profile = load_profile(profile_path)
    assert profile.variants[0].workload.tool == "toy"
    assert [c.name for c in profile.variants[0].collect] == ["toy_load"]
    assert primary_lines(profile) == [("toy", "latency_us")]
    schema = json.dumps(profile_schema())  # the tool, its argument, the collector
    assert '"toy"' in schema and "what to print" in schema and '"toy_load"' in schema
    bad, _ = files(tmp_path, PROFILE.replace("names: [processes, running]", "nmaes: [x]"), "bad")
    with pytest.raises(InputError, match=r"collect\.toy_load\.nmaes.*names"):
        load_profile(bad)
    bad, _ = files(tmp_path, PROFILE.replace("latency: 10", "latncy: 10"), "bad")
    with pytest.raises(InputError, match=r"latncy.*latency"):
        load_profile(bad)
    plan = bind(load_profile(profile_path), load_inventory(inventory))
    assert plan.profile.variants[1].workload.client.args == {"latency": 5}


def test_snapshot_script_runs_the_new_section(toys: None) -> None:
    import subprocess

    argv = registry.snapshot_argv(["toy_load"])
    assert argv[:2] == ["sh", "-c"] and "@toy_processes)" in argv[2]
    assert argv[2] == registry.snapshot_script()
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    from napilab.runners.collectors.collector import split_tail

    snap = ToyCollector().parse(split_tail(out), HostInfo())
    assert snap.processes > 1 and snap.running >= 1


def test_a_run_records_judges_and_shows_them(toys: None, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    profile, inventory = files(tmp_path)
    done = run_cli(capsys, "run", str(profile), "-i", str(inventory), "-o",
                   str(tmp_path / "out"), "--format", "text,json")
    assert done.code in (0, 3), done.err
    run_dir = next((tmp_path / "out" / "toys").iterdir())
    manifest = Manifest.from_json(json.loads((run_dir / "manifest.json").read_text()))
    assert manifest.headlines is not None
    assert manifest.headlines["toy"] == ["latency_us"]
    assert manifest.headlines["toy_load"] == ["processes"]
    facts = json.loads((run_dir / "manifest.json").read_text())["host_facts"]["a"]
    assert "sha256:" in facts["tool_versions"]["sh"]
    table = json.loads((run_dir / "report.json").read_text())["table"]
    lines = {(ln["source"], ln["metric"]): ln for ln in table["lines"]}
    # the headline is judged (primary, a verdict); the tool's other metric is exploratory
    assert table["family"] == 1
    assert lines[("toy", "latency_us")]["comparisons"]["fast"]["verdict"] == "better"
    assert lines[("toy", "rate")]["comparisons"]["fast"]["verdict"] == "exploratory"
    assert ("toy_load", "processes") in lines and ("toy_load", "running") not in lines
    fast = lines[("toy", "latency_us")]["cells"]["fast"]
    assert fast["value"] == 5
    assert "latency_us" in (run_dir / "report.txt").read_text()
    parsed = run_cli(capsys, "parse", "toy", "--json",
                     str(run_dir / "raw" / "001" / "a" / "client.out"))
    assert parsed.code == 0
    assert json.loads(parsed.out)["metrics"] == {"latency_us": 10.0, "rate": 100.0}


DATA = Path(__file__).parents[1] / "data"


def test_every_metric_a_parser_produced_is_one_its_class_declares() -> None:
    """A tool's or collector's `metrics` (what `napilab validate` checks a profile's
    metric names against) covers every name its parser produced from the real outputs
    under tests/data."""
    from fnmatch import fnmatchcase

    checked = 0
    for expected_file in sorted(DATA.rglob("*.expected.json")):
        source = expected_file.relative_to(DATA).parts[0]
        patterns = registry.metric_patterns(source)
        if patterns is None:  # the command tool's presets; knob outputs (no metrics)
            assert source in ("testpmd", "xdpsock", "ethtool", "queues", "sysfs"), source
            continue
        expected = json.loads(expected_file.read_text())
        tool = expected.get("tool")
        sides = [tool.get(side) or {} for side in ("client", "server")] \
            if isinstance(tool, dict) else []
        for names in [expected.get("metrics", {}), *sides]:
            for name in names:
                metric = name.rsplit(".cpu", 1)[0]
                assert any(fnmatchcase(metric, p) for p in patterns), (expected_file, metric)
                checked += 1
    assert checked > 500
