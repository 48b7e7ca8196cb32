"""A grammar that never misreads a profile (issue 36, item 4): names are the text the
user wrote, metric names are checked against what the tool and collectors produce,
a matrix over tools compares like with like, and every refusal names the user's line
once, exit 2, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from napilab.harness.profile.profile import Profile, load_profile
from tests.cli import run_cli


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[str]:
    """The problems `napilab validate` prints for TEXT (exit 2, no traceback), each
    `file:line:col: ...` with the file's name taken out."""
    path = _write(tmp_path, text)
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line.removeprefix("napilab: error: ").strip() for line in err.splitlines()]
    return [line.replace(f"{path}:", "") for line in lines
            if re.match(r"\S+:\d+:\d+: ", line)]


def _line(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def _load(tmp_path: Path, text: str) -> Profile:
    return load_profile(_write(tmp_path, text))


BOOLEAN_VARIANTS = """\
name: bools
hosts: {sender: a, receiver: b}
workload:
  tool: ping
  client: {role: sender, args: {size: "${size}"}}
setup:
  receiver: {netdev: {"${iface}": {gro_flush_timeout: "${gro}"}}}
variants:
  off: {}
  on: {group: yes}
  1.10: {group: yes}
baseline: off-gro0-s56
matrix:
  parameters: {gro: [0, 1000], size: [56, 1400]}
  name: "${variant}-gro${gro}-s${size}"
  variants: [off, on]
  exclude:
    - {variant: off, gro: 1000}
    - {variant: on, size: 1400, gro: 0}
    - {variant: on, size: 56, gro: 0}
"""


def test_yaml_11_booleans_and_numbers_stay_the_names_written(tmp_path: Path) -> None:
    """`off:`, `on:` and `1.10:` name variants off, on and 1.10 (not False, True, 1.1),
    so the matrix's `exclude` matches them: 2 + 2 combinations and 1.10, not 8 + 1."""
    profile = _load(tmp_path, BOOLEAN_VARIANTS)
    assert [v.name for v in profile.variants] == [
        "off-gro0-s56", "off-gro0-s1400", "on-gro1000-s56", "on-gro1000-s1400", "1.10"]
    assert {v.group for v in profile.variants} == {None, "yes"}
    assert profile.comparisons == (("off-gro0-s56", "off-gro0-s1400"),
                                   ("on-gro1000-s56", "on-gro1000-s1400"),
                                   ("on-gro1000-s56", "1.10"))


def test_a_misspelt_boolean_name_is_refused_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BOOLEAN_VARIANTS.replace("    - {variant: off, gro: 1000}",
                                    "    - {variant: of, gro: 1000}")
    text = text.replace("  variants: [off, on]", "  variants: [off, onn]")
    found = _refused(tmp_path, capsys, text)
    line = _line(text, "variants: [off, onn]")
    assert found == [
        f"{line}:13: matrix.variants: no variant 'onn'; did you mean 'on'?",
        f"{line + 2}:17: matrix.exclude[0].variant: no variant 'of'; did you mean 'off'?"]


def test_an_exclude_that_matches_no_value_is_refused_at_its_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, an exclude naming a value no parameter has dropped nothing, silently."""
    text = BOOLEAN_VARIANTS.replace("{variant: on, size: 1400, gro: 0}",
                                    "{variant: on, size: 1500, gro: 0}")
    found = _refused(tmp_path, capsys, text)
    line = _line(text, "size: 1500")
    column = text.splitlines()[line - 1].index("1500") + 1
    assert found == [f"{line}:{column}: matrix.exclude[1].size: '1500' is not one of size's "
                     "values ['56', '1400']; did you mean '1400'?"]


def test_a_host_yaml_reads_as_a_boolean_is_refused_with_quote_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BOOLEAN_VARIANTS.replace("receiver: b}", "receiver: off}")
    found = _refused(tmp_path, capsys, text)
    line = _line(text, "receiver: off")
    column = text.splitlines()[line - 1].index("off") + 1
    assert found[0] == (f"{line}:{column}: hosts.receiver: off is read as a boolean False, "
                        'not a host name: quote it ("off")')


PING = """\
name: names
hosts: {sender: a, receiver: b}
workload:
  tool: ping
  client: {role: sender}
collect:
  softnet_stat: {roles: [receiver]}
  proc_stat: {roles: [receiver]}
variants:
  a: {}
  b: {setup: {receiver: {sysctl: {net.core.busy_read: 50}}}}
metrics:
  rtt_avg: {direction: lower}
  softnet_stat.processed: {direction: higher, primary: false}
  cpu.busy_cores: {max_regression: 10}
report:
  table:
    - {source: ping, metric: rtt_avg}
    - {source: softnet_stat, metric: time_squeeze}
"""


def test_metric_names_the_tool_and_collectors_produce_are_accepted(tmp_path: Path) -> None:
    assert set(_load(tmp_path, PING).metrics) == {
        "rtt_avg", "softnet_stat.processed", "cpu.busy_cores"}


@pytest.mark.parametrize("old,new,fragment,message", [
    ("  rtt_avg: {direction", "  rtt_avgg: {direction", "rtt_avgg",
     "metrics.rtt_avgg: no tool or collector of this profile (ping, proc_stat, "
     "softnet_stat) produces 'rtt_avgg'; did you mean 'rtt_avg'?"),
    ("  softnet_stat.processed:", "  softnet_stat.procesed:", "softnet_stat.procesed",
     "metrics.softnet_stat.procesed: softnet_stat produces no 'procesed'; did you mean "
     "'processed'?"),
    ("  cpu.busy_cores:", "  neper.throughput:", "neper.throughput",
     "metrics.neper.throughput: neper is not a tool or collector of this profile (it has "
     "ping, proc_stat, softnet_stat)"),
    ("metric: time_squeeze}", "metric: time_sqeeze}", "time_sqeeze",
     "report.table[1].metric: softnet_stat produces no 'time_sqeeze'; did you mean "
     "'time_squeeze'?"),
    ("{source: ping, metric", "{source: pnig, metric", "pnig",
     "report.table[0].source: 'pnig' is not a tool or collector of this profile; expected "
     "one of ['ping', 'proc_stat', 'softnet_stat', 'cpu', 'pooled']; did you "
     "mean 'ping'?"),
])
def test_a_metric_name_nothing_produces_is_refused_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str,
        fragment: str, message: str) -> None:
    assert old in PING
    text = PING.replace(old, new)
    line = _line(text, fragment)
    column = text.splitlines()[line - 1].index(fragment) + 1
    assert _refused(tmp_path, capsys, text) == [f"{line}:{column}: {message}"]


def test_a_tune_goal_names_a_metric_the_tool_produces(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).parents[2] / "profiles" / "tune-veth.yaml").read_text()
    goal = re.search(r"minimise: (\w+)", text)
    assert goal is not None
    text = text.replace(goal[0], "minimise: latncy_p99", 1)
    found = _refused(tmp_path, capsys, text)
    assert len(found) == 1 and "tune.goal.minimise: no tool or collector" in found[0], found
    assert "did you mean" in found[0], found


def test_the_cpu_cost_names_a_bare_metric_may_use_are_the_reports() -> None:
    """harness.profile never imports reports: its copy of the CPU cost's names matches
    every name reports.ab.cpu_cost documents (`cpu_us_per_<op>` as cpu_us_per_x)."""
    from fnmatch import fnmatchcase

    from napilab.harness.profile.metric_names import CPU_COST
    from napilab.reports.ab import cpu_cost

    documented = set(re.findall(r"`([a-z_]+(?:<[a-z]+>)?)`", cpu_cost.__doc__ or ""))
    names = {re.sub(r"<[a-z]+>", "x", n) for n in documented
             if n.startswith(("busy_", "cores_", "napi_thread", "cpu_us", "ipc", "cycles_"))}
    assert len(names) >= 8, names
    assert all(any(fnmatchcase(n, p) for p in CPU_COST) for n in names), names


def test_a_baseline_naming_a_variant_the_matrix_crosses_lists_its_variants(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BOOLEAN_VARIANTS.replace("baseline: off-gro0-s56", "baseline: off")
    line = _line(text, "baseline: off")
    assert _refused(tmp_path, capsys, text) == [
        f"{line}:11: baseline: 'off' is crossed by the matrix: name one of the variants "
        "made of it, ['off-gro0-s56', 'off-gro0-s1400']"]


GROUPS = """\
name: groups
hosts: {sender: a, receiver: b}
workload:
  tool: ping
  client: {role: sender, args: {size: "${size}"}}
variants:
  base: {group: "${variant}-${size}"}
  busy: {group: "base-${size}", setup: {receiver: {sysctl: {net.core.busy_read: 50}}}}
matrix:
  parameters: {size: [56, 1400]}
  name: "${variant}-${size}"
"""


def test_a_group_takes_the_placeholders_a_variant_name_does(tmp_path: Path) -> None:
    profile = _load(tmp_path, GROUPS)
    assert [(v.name, v.group) for v in profile.variants] == [
        ("base-56", "base-56"), ("base-1400", "base-1400"), ("busy-56", "base-56"),
        ("busy-1400", "base-1400")]
    assert profile.comparisons == (("base-56", "busy-56"), ("base-1400", "busy-1400"))


@pytest.mark.parametrize("group,message", [
    ("base-${sise}", "unknown placeholder in 'base-${sise}'; a group takes ${variant} and "
                     "the matrix parameters ['size']"),
    ("base ${size}", "group name 'base ${size}': use letters, digits and . _ = + -"),
])
def test_a_bad_group_is_one_error_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], group: str, message: str) -> None:
    text = GROUPS.replace('group: "base-${size}"', f'group: "{group}"')
    line = _line(text, group)
    column = text.splitlines()[line - 1].index(group)
    assert _refused(tmp_path, capsys, text) == [
        f"{line}:{column}: variants.busy.group: {message}"]


TOOLS_MIXED = """\
name: mixed
hosts: {client: a, server: b}
workload:
  tool: netperf.TCP_RR
  client: {role: client}
  server: {role: server}
variants:
  tcp: {}
  udp:
    workload: {tool: netperf.UDP_RR, client: {role: client}, server: {role: server}}
"""


def test_variants_of_another_tool_are_not_compared_with_the_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _line(TOOLS_MIXED, "tool: netperf.UDP_RR")
    column = TOOLS_MIXED.splitlines()[line - 1].index("netperf.UDP_RR") + 1
    assert _refused(tmp_path, capsys, TOOLS_MIXED) == [
        f"{line}:{column}: variants.udp: runs netperf.UDP_RR and would be compared with "
        "tcp, which runs netperf.TCP_RR: give the variants of each tool their own "
        "`group:` (e.g. group: netperf-UDP_RR)"]
    grouped = TOOLS_MIXED.replace("  udp:\n", "  udp:\n    group: udp\n")
    assert _load(tmp_path, grouped).comparisons == ()


def test_a_tool_error_names_the_tool_once(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The command tool's errors start `command: `; binding prefixed the tool again."""
    text = ("name: cmd\nhosts: {sender: sender, receiver: receiver}\nworkload:\n"
            "  tool: command\n  client:\n    role: sender\n    args: {exit_codes: [0]}\n")
    path = _write(tmp_path, text)
    inventory = Path(__file__).parents[2] / "profiles" / "inventory.example.yaml"
    code, _, err = run_cli(capsys, "validate", str(path), "-i", str(inventory))
    assert code == 2 and "Traceback" not in err
    line = _line(text, "args:")
    assert f"{path}:{line}:11: workload.client.args: command: client `argv` is required" \
        in err, err
    assert "command: command:" not in err
