"""dmesg, napi_threads and kprobes: deltas over a trial, and the snapshot script's
sections."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from napilab.harness.knobs.kinds.kprobe import KprobeBackend
from napilab.runners import registry
from napilab.runners.base import ParseError
from napilab.runners.collectors import collector, dmesg, kprobes, napi_threads
from tests.fakes import FakeHost, FakeTransport

LOG_BEFORE = ("[    1.000000] boot\n"
              "[  100.500000] WARNING: CPU: 1 at do_softirq_post_smp_call_flush\n")
LOG_AFTER = LOG_BEFORE + (
    "[  101.000000] WARNING: CPU: 1 PID: 7 at do_softirq_post_smp_call_flush+0x1/0x2\n"
    "[  101.000100]  do_softirq_post_smp_call_flush+0x1/0x2\n"  # stack frame: not a header
    "[  102.000000] eth0: link up\n")


def test_dmesg_counts_only_new_headers() -> None:
    patterns = {"warnings": "WARNING:.*do_softirq_post_smp_call_flush", "links": "link up"}
    values = dmesg.delta(dmesg.parse(LOG_BEFORE), dmesg.parse(LOG_AFTER), patterns)
    assert {v.metric: v.value for v in values} == {"warnings": 1, "links": 1}
    assert dmesg.delta(dmesg.parse(""), dmesg.parse(LOG_BEFORE), patterns)[0].value == 1


def test_dmesg_failure_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        dmesg.parse("dmesg: read kernel buffer failed: Operation not permitted\n")


def _stat(pid: int, comm: str, utime: int, stime: int, cpu: int, prio: int, policy: int) -> str:
    fields = ["S", "2"] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 23 + [
        str(cpu), str(prio), str(policy), "0"]
    return f"{pid} ({comm}) {' '.join(fields)}\n"


def test_napi_threads_cpu_time_per_cpu() -> None:
    before = napi_threads.parse(_stat(10, "napi/eth0-8193", 100, 50, 2, 50, 1)
                                + _stat(11, "backlog_napi/0", 5, 5, 0, 0, 0))
    after = napi_threads.parse(_stat(10, "napi/eth0-8193", 300, 150, 2, 50, 1)
                               + _stat(11, "backlog_napi/0", 5, 5, 0, 0, 0)
                               + _stat(12, "napi/eth0-8194", 9, 9, 1, 0, 0))
    values = napi_threads.delta(before, after, user_hz=100)
    per_cpu = {v.cpu: v.value for v in values if v.metric == "cpu_time"}
    assert per_cpu == {2: 3000.0, 0: 0.0}  # (200 + 100) ticks at 100 Hz; new thread left out
    counts = {v.metric: v.value for v in values if v.cpu is None}
    assert counts == {"threads": 3, "threads_realtime": 1}
    assert napi_threads.parse(_stat(5, "napi/a b-1", 1, 1, 0, 0, 0)).threads[0].comm == \
        "napi/a b-1"  # comm may contain spaces


def test_kprobes_delta_leaves_absent_functions_out() -> None:
    row = "  %-44s %15d %15d\n"
    before = kprobes.parse(row % ("napilab_skb_attempt_defer_free", 10, 0))
    after = kprobes.parse(row % ("napilab_skb_attempt_defer_free", 110, 0))
    values = kprobes.delta(before, after, ["skb_attempt_defer_free", "kick_defer_list_purge"])
    assert [(v.metric, v.value) for v in values] == [("skb_attempt_defer_free", 100)]
    assert kprobes.event_name("foo.cold") == "napilab_foo_cold"


def test_kprobe_backend_without_kprobe_events_reports_absent() -> None:
    class NoTracefs(FakeTransport):
        def run(self, argv, **kwargs):  # type: ignore[no-untyped-def, override]
            if argv[:2] == ["sh", "-c"] and argv[3] == "napilab-kprobes":
                return self._result(argv, 3)
            return super().run(argv, **kwargs)

    transport = NoTracefs(FakeHost({}))
    backend = KprobeBackend(transport)
    assert backend.read(["skb_attempt_defer_free"]) == {"skb_attempt_defer_free": "absent"}
    with pytest.raises(HostError, match="no writable kprobe_events"):
        backend.write("skb_attempt_defer_free", "present")


def test_snapshot_script_sections_split() -> None:
    argv = registry.snapshot_argv(["softnet_stat", "napi_threads", "kprobes"])
    assert argv[:2] == ["sh", "-c"]
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    files = collector.split_tail(out)
    assert "/proc/net/softnet_stat" in files and "@napi_threads" in files
    assert collector.uptime_seconds(files) > 0
    only_files = registry.snapshot_argv(["softnet_stat", "proc_stat"])
    assert only_files[:4] == ["tail", "-v", "-n", "+1"]


def test_the_snapshot_before_a_window_keeps_the_logs_last_line(tmp_path: Path) -> None:
    """The section run by sh against a `dmesg` on PATH: before the window only the last
    timestamped line (what the delta needs), after it the whole log; a log without a
    timestamped line (dmesg's error) comes whole either way."""
    fake = tmp_path / "dmesg"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    section = dmesg.DmesgCollector.sections["@dmesg"]

    def run(phase: str, log: str) -> str:
        (tmp_path / "log").write_text(log)
        fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'log'}\n")
        fake.chmod(0o755)
        done = subprocess.run(["sh", "-c", f"phase={phase}\n{section}"], capture_output=True,
                              text=True, env=env, check=True)
        return done.stdout.removeprefix("==> @dmesg <==\n")

    before = run("start", LOG_AFTER)
    assert before == "[  102.000000] eth0: link up\n"
    assert run("stop", LOG_AFTER) == LOG_AFTER
    patterns = {"links": "link up", "warnings": "WARNING:"}
    assert dmesg.delta(dmesg.parse(run("start", LOG_BEFORE)), dmesg.parse(LOG_AFTER),
                       patterns) == dmesg.delta(dmesg.parse(LOG_BEFORE),
                                                dmesg.parse(LOG_AFTER), patterns)
    failed = "dmesg: read kernel buffer failed: Operation not permitted\n"
    assert run("start", failed) == failed
    assert run("start", "") == ""
    trailing = LOG_BEFORE + "  a continuation line\n"
    assert run("start", trailing) == LOG_BEFORE.splitlines(keepends=True)[-1]
