"""What a run waits for before its first trial (harness.hosts.waits): the load average
and CPU steal read from this machine's /proc through a local transport, the steal of two
/proc/stat reads, the quiet wait that passes at once, the one that gives up after its
maximum (saying once what it waited for), and the options' bad values (exit 2). The
lock wait runs against a second live run on the netns testbed
(tests/integration/test_waits.py)."""

from __future__ import annotations

import time

import pytest

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.hosts import waits
from napilab.harness.hosts.waits import Quiet, Reading
from napilab.harness.inventory.inventory import Host
from napilab.harness.transport.local import LocalTransport
from napilab.runners.collectors import proc_stat
from tests.cli import run_cli

STAT = ("cpu  {u} 0 {s} {i} 0 0 0 {st} 0 0\ncpu0 {u} 0 {s} {i} 0 0 0 {st} 0 0\n"
        "intr 1 0\nctxt 5\n")


def local() -> LocalTransport:
    return LocalTransport(Host(name="here", transport="local"))


def test_load_average_and_steal_are_read() -> None:
    assert waits.parse_loadavg("0.52 0.58 0.59 1/467 12345", "h") == 0.52
    with pytest.raises(HostError, match="h: /proc/loadavg reads 'x', not a load average"):
        waits.parse_loadavg("x", "h")
    before = proc_stat.parse(STAT.format(u=100, s=50, i=800, st=50))
    after = proc_stat.parse(STAT.format(u=160, s=70, i=1000, st=70))
    assert waits.steal_pct(before, after) == 6.67  # 20 of 300 ticks
    assert waits.steal_pct(before, before) == 0.0
    old = proc_stat.parse("cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 1\n")  # before 2.6.11
    assert waits.steal_pct(old, old) is None


def test_this_machines_load_average_is_read() -> None:
    found = waits.readings([local()], steal=False)["here"]
    assert found.load1 >= 0 and found.steal_pct is None


def test_quiet_hosts_pass_at_the_first_check() -> None:
    said: list[str] = []
    start = time.monotonic()
    record = waits.wait_quiet([local()], Quiet(1e6, 100.0, 60), said.append)
    assert time.monotonic() - start < waits.STEAL_WINDOW + 1
    assert said == [] and record.what == "quiet" and record.reason == ""
    assert record.seconds < waits.STEAL_WINDOW + 1 and record.max_seconds == 60
    assert record.limits == {"load1": 1e6, "steal_pct": 100.0}
    reading = (record.hosts or {})["here"]
    assert reading["load1"] >= 0 and 0 <= reading["steal_pct"] <= 100


def test_busy_hosts_fail_after_the_maximum_saying_once_what_they_wait_for() -> None:
    said: list[str] = []
    start = time.monotonic()
    # no load average is below zero: never quiet
    with pytest.raises(NapilabError, match=r"the hosts were not quiet \(1-minute load "
                       r"average <= -1\) within --wait-quiet-max 0.5 s: here: load "):
        waits.wait_quiet([local()], Quiet(-1, None, 0.5), said.append)
    assert 0.4 < time.monotonic() - start < 2
    assert len(said) == 1 and said[0].startswith("waiting up to 0.5 s for quiet hosts: "
                                                 "1-minute load average <= -1; here: load ")


def test_a_reading_says_its_numbers() -> None:
    assert Reading(1.5, 2.25).text() == "load 1.5, steal 2.2%"
    assert Reading(0.1, None).text() == "load 0.1"


@pytest.mark.parametrize(("args", "error"), [
    (["--wait-lock", "soon"], "'soon': expected a time like 600, 90s, 30m or 2h"),
    (["--wait-lock", "0"], "'0': expected a time like"),
    (["--wait-quiet", "high"], "'high': expected LOAD[,STEAL]"),
    (["--wait-quiet", "1,101"], "'1,101': expected LOAD[,STEAL]"),
    (["--wait-quiet", "1,2,3"], "'1,2,3': expected LOAD[,STEAL]"),
    (["--wait-quiet", "1", "--wait-quiet-max", "-5m"], "'-5m': expected a time like")])
def test_bad_wait_options_are_usage_errors(args: list[str], error: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    done = run_cli(capsys, "run", "profile.yaml", "-i", "inventory.yaml", *args)
    assert done.code == 2 and error in done.err
