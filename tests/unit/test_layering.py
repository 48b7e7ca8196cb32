"""The layering of docs/design.md, read from the imports of every module (packages are
walked recursively, see tests/import_graph.py):

- harness.profile (YAML in, frozen Plan out), harness.inventory (hosts and how to reach
  them), harness.authoring (the editors' JSON Schema, `napilab init`'s files) and
  harness.knobs (the knob kinds a profile reads) never import the transport, the hosts
  layer, the engine, the store or the CLI at run time;
- reports never import runners, harness.transport, harness.hosts, harness.engine,
  harness.cli or paramiko;
- runners never import reports;
- parsers (runners) and harness.stats do no I/O;
- the CLI (harness/cli/) is the one place that wires reports in."""

from __future__ import annotations

import ast

from tests.import_graph import ROOT, imports, modules, within

IO_MODULES = {"subprocess", "socket", "paramiko", "os", "shutil", "pathlib", "urllib",
              "requests", "http"}
IO_CALLS = {"open", "print", "input"}


def test_every_module_is_found() -> None:
    """The walk is recursive and every directory of modules is a package (so the
    distribution ships it): the rules below then cover every module."""
    counts = {top: len(modules(top)) for top in ("harness", "runners", "reports")}
    assert counts["harness"] >= 50 and counts["runners"] >= 20 and counts["reports"] >= 29, counts
    for path in modules().values():
        assert (path.parent / "__init__.py").exists(), f"{path.parent} is not a package"
    for package in ("harness.cli", "harness.grammar", "harness.profile", "harness.inventory",
                    "harness.authoring",
                    "harness.knobs", "harness.knobs.kinds",
                    "harness.transport", "harness.hosts",
                    "harness.engine", "harness.store", "harness.stats", "runners.collectors",
                    "runners.workloads", "reports.ab", "reports.plots", "reports.formats",
                    "reports.nightly"):
        assert len(modules(package)) >= 2, package


# what the grammar side (profile, inventory, authoring, knob kinds) never imports: a host,
# a connection, the engine, the store, the CLI or a report
HOST_SIDE = ("harness.transport", "harness.hosts", "harness.engine", "harness.store",
             "harness.cli", "reports", "paramiko")


def test_profile_never_imports_hosts_or_transport() -> None:
    found = {**modules("harness.profile"), **modules("harness.inventory"),
             **modules("harness.authoring")}
    assert len(found) >= 15
    for name, path in found.items():
        bad = {n for n in imports(path, runtime=True) if within(n, *HOST_SIDE)}
        assert not bad, f"{name} imports {bad}"


def test_knob_kinds_never_import_hosts_or_transport() -> None:
    """The profile reads the knob registry: a kind gets its host as an argument."""
    kinds = modules("harness.knobs")
    assert len(kinds) >= 10
    for name, path in kinds.items():
        bad = {n for n in imports(path, runtime=True) if within(n, *HOST_SIDE)}
        assert not bad, f"{name} imports {bad}"


def test_the_grammar_imports_only_errors_and_redact() -> None:
    """harness.grammar sits below profile, inventory, knobs and authoring: nothing of
    napilab but harness.errors, harness.redact and itself."""
    found = modules("harness.grammar")
    assert len(found) == 7  # the package and its six modules
    allowed = ("harness.errors", "harness.redact", "harness.grammar")
    for name, path in found.items():
        bad = {n for n in imports(path) if within(n, "harness", "runners", "reports")
               and not within(n, *allowed)}
        assert not bad, f"{name} imports {bad}"


# reports.trace reads the trace collector's stored snapshots (raw/TRIAL/HOST/
# snapshot-after.out: the stages a kernel lacks, the histograms) with the collector's
# own pure parser: stored data still, and one parser rather than a copy
READS_RAW = {"reports.trace": ("runners.base", "runners.collectors.collector",
                               "runners.collectors.trace")}


def test_reports_never_import_runners_hosts_or_paramiko() -> None:
    banned = ("runners", "harness.transport", "harness.hosts", "harness.engine",
              "harness.cli", "paramiko")
    for name, path in modules("reports").items():
        allowed = next((a for p, a in READS_RAW.items() if within(name, p)), ())
        bad = {n for n in imports(path) if within(n, *banned) and not within(n, *allowed)}
        assert not bad, f"{name} imports {bad}"


def test_runners_never_import_reports() -> None:
    for name, path in modules("runners").items():
        bad = {n for n in imports(path) if within(n, "reports")}
        assert not bad, f"{name} imports {bad}"


def test_only_cli_wires_in_reports() -> None:
    for name, path in modules("harness").items():
        if within(name, "harness.cli"):
            continue
        bad = {n for n in imports(path) if within(n, "reports")}
        assert not bad, f"{name} imports {bad}"


def test_parsers_and_stats_do_no_io() -> None:
    pure = {**modules("runners"), **modules("harness.stats")}
    assert len(pure) >= 20
    for name, path in pure.items():
        bad = {n for n in imports(path) if n.split(".")[0] in IO_MODULES}
        assert not bad, f"{name} imports {bad}"
        tree = ast.parse(path.read_text())
        calls = {n.func.id for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & IO_CALLS, f"{name} calls {calls & IO_CALLS}"


def test_layering_rules_see_real_imports() -> None:
    """The checks above would pass vacuously if `imports` read nothing."""
    found = imports(ROOT / "harness" / "cli" / "main.py")
    assert {"harness.cli.analysis", "harness.cli.execute", "click"} <= found


MAX_MODULES = 12  # issue 37: a package that grows past this is split by what it holds


def test_no_package_holds_more_than_twelve_modules() -> None:
    counts: dict[str, int] = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            package = name.rsplit(".", 1)[0]
            counts[package] = counts.get(package, 0) + 1
    assert len(counts) >= 20
    assert {p: n for p, n in counts.items() if n > MAX_MODULES} == {}


# Every package in one layer, lowest first: a module imports (at run time) only its own
# package and packages of lower layers. docs/design.md, "The layering", says the same.
LAYERS = (
    ("harness", "reports", "harness.errors"),
    ("harness.records",),
    ("harness.redact", "harness.interrupts", "harness.stats", "harness.lab",
     "runners.base"),
    ("harness.grammar", "runners.collectors", "runners.workloads"),
    ("runners.registry", "runners"),
    ("harness.inventory", "harness.knobs"),
    ("harness.transport", "harness.profile"),
    ("harness.authoring", "harness.store"),
    ("harness.hosts", "harness.tune", "harness.stores", "harness.bisect"),
    ("harness.engine",),
    ("reports.ab", "reports.ci"),
    ("reports.load", "reports.fleet", "reports.trace"),
    ("reports.plots",),
    ("reports.formats",),
    ("reports.nightly", "reports.tune"),
    ("reports.bisect",),
    ("harness.cli",),
)


def layer_package(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "harness" and len(parts) > 1 and parts[1] in ("errors", "redact",
                                                                 "interrupts"):
        return f"harness.{parts[1]}"
    return ".".join(parts[:2])


def test_every_import_goes_down_the_layers() -> None:
    rank = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    found = modules()
    unplaced = sorted({layer_package(n) for n in found} - set(rank))
    assert unplaced == [], "place each package in LAYERS (and in docs/design.md)"
    up = []
    for name, path in found.items():
        mine = layer_package(name)
        for target in imports(path, runtime=True):
            theirs = layer_package(target)
            if target in found and theirs != mine and rank[theirs] >= rank[mine]:
                up.append(f"{name} -> {target}")
    assert up == []
