"""Progress reporters, and the end-of-run check that a host did not reboot or change
kernel during the run."""

from __future__ import annotations

import io
import json

import pytest

from napilab.harness.engine.fan_out import IDENTITY, HostOps
from napilab.harness.engine.progress import JsonProgress, Progress, QuietProgress, TerminalProgress
from napilab.harness.hosts import facts
from tests.fakes import FakeHost, FakeTransport


def drive(progress: Progress) -> None:
    progress.run_start("abcd1234", "/tmp/run", 2, 3.0)
    progress.trial_start(1, "rps-off", 1)
    progress.phase("applying settings")
    progress.phase("ping", "a", "5s")
    progress.trial_end(1, "ok")
    progress.trial_start(2, "rps-remote", 1)
    progress.trial_end(2, "failed", "ping failed: no reply")
    progress.run_end("partial")


def test_plain_lines() -> None:
    out = io.StringIO()
    drive(Progress(out))
    lines = out.getvalue().splitlines()
    assert lines[0] == "napilab: run abcd1234: 2 trials -> /tmp/run"
    assert "trial 1/2: rps-off rep 1" in lines and "  a: ping 5s" in lines
    assert lines[-1] == "trial 2/2: FAILED: ping failed: no reply"


def test_json_events() -> None:
    out = io.StringIO()
    drive(JsonProgress(out))
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["run", "trial", "phase", "phase", "trial_end",
                                           "trial", "trial_end", "run_end"]
    assert events[1]["eta"] == 6.0  # 2 trials x the plan's 3 s before any finished
    assert events[6] == {**events[6], "status": "failed", "error": "ping failed: no reply"}


def test_quiet_prints_failures_only() -> None:
    out = io.StringIO()
    drive(QuietProgress(out))
    assert out.getvalue() == "trial 2/2: FAILED: ping failed: no reply\n"


def test_terminal_rewrites_one_line() -> None:
    out = io.StringIO()
    drive(TerminalProgress(out))
    text = out.getvalue()
    assert "\r\x1b[2K" in text and "trial 1/2 rps-off rep 1 | a: ping" in text
    assert "trial 2/2: FAILED: ping failed: no reply\n" in text


def test_the_status_line_fits_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A status line wider than the terminal wraps and is not rewritten in place: it is
    cut to the terminal's width less one (COLUMNS here)."""
    monkeypatch.setenv("COLUMNS", "40")
    out = io.StringIO()
    drive(TerminalProgress(out))
    statuses = [part for part in out.getvalue().split("\r\x1b[2K") if part and
                "\n" not in part]
    assert statuses and max(len(s) for s in statuses) <= 39


def test_a_rebooted_host_is_flagged() -> None:
    files = {facts.FILES[k]: f"{k}-1\n" for k in IDENTITY}
    host = FakeHost(files)
    transport = FakeTransport(host, "sut")
    start = {"sut": facts.identity(transport)}
    ops = HostOps(plan=None, store=None, transports={"sut": transport})  # type: ignore[arg-type]
    assert ops.changed_hosts(start) == ({}, {})
    host.files[facts.FILES["boot_id"]] = "boot_id-2\n"
    assert ops.changed_hosts(start) == ({"sut": ["boot_id"]}, {})


def test_a_host_unreachable_at_the_end_is_unknown_not_an_error() -> None:
    """The end-of-run check reads every host again; one that cannot be reached is said
    (its change is unknown) and the run's own outcome (a failed trial, a restore that
    could not finish) stays the error that ends it."""
    files = {facts.FILES[k]: f"{k}-1\n" for k in IDENTITY}
    up, down = FakeHost(files), FakeHost(dict(files))
    transports = {"a": FakeTransport(down, "a"), "b": FakeTransport(up, "b")}
    start = {name: facts.identity(t) for name, t in transports.items()}
    down.unreachable = True
    up.files[facts.FILES["kernel_release"]] = "kernel_release-2\n"
    ops = HostOps(plan=None, store=None, transports=transports)  # type: ignore[arg-type]
    changed, unread = ops.changed_hosts(start)
    assert changed == {"b": ["kernel_release"]}
    assert list(unread) == ["a"] and "connection dropped" in unread["a"]
