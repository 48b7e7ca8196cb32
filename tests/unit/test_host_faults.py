"""Second faults on a shared host, on a scripted host (tests/fakes.py) where the fault
needs control: a restore that fails, a resumed run over a dead one, two killed runs,
corrupt and foreign journals and locks, PIDs after a reboot. Each test names the fault,
the end state of every knob, journal and lock, and the exit code (of the error's class:
1 for HostError) that `napilab run` or `napilab restore` would give.

Issue 14 items 1-6 and 8 (the lock side of an unreachable host)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from napilab.harness.errors import ExitCode, HostError
from napilab.harness.hosts import identity, lock
from napilab.harness.hosts.journal_replay import replay
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import Host
from napilab.harness.knobs.kind import Setting
from tests.fakes import FakeHost, FakeTransport

X = "/sys/class/net/eth0/gro_flush_timeout"
DIR = "/var/tmp/napilab"


def gro(value: str) -> list[Setting]:
    return [Setting("receiver", "netdev", "eth0/gro_flush_timeout", value)]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def journals(fake: FakeHost) -> list[str]:
    return sorted(p for p in fake.files if p.startswith(f"{DIR}/journal-"))


def locks(fake: FakeHost) -> list[str]:
    return sorted(p for p in fake.files if p.startswith(f"{DIR}/lock-"))


def killed(transport: FakeTransport) -> None:
    """The run that holds the lock and wrote the journals was SIGKILLed."""
    pid = dead_pid()
    for path in locks(transport.fake) + journals(transport.fake):
        doc = json.loads(transport.fake.files[path])
        doc["pid"] = pid
        transport.fake.files[path] = json.dumps(doc)


def restore(*transports: FakeTransport, break_lock: bool = False) -> tuple[list[str], int]:
    """`napilab restore` over these hosts: its lines and exit code."""
    by_name = {t.host.name: t for t in transports}
    lines: list[str] = []
    try:
        for line in replay([Host(name=n, transport="local") for n in by_name],
                           break_lock=break_lock, connect=lambda h: by_name[h.name]):
            lines.append(line)
    except HostError as exc:
        lines.append(str(exc))
        return lines, int(exc.exit_code)
    return lines, int(ExitCode.OK)


def journal(run_id: str, host: str, original: str, requested: str, created: float,
            **extra: object) -> str:
    """A journal as napilab 0.1 (schema 2, no machine key) wrote it."""
    return json.dumps({
        "schema": 2, "run_id": run_id, "host": host, "controller": "ctl", "pid": dead_pid(),
        "created": created, "entries": [{
            "role": "receiver", "kind": "netdev", "target": "eth0/gro_flush_timeout",
            "path": X, "original": original, "requested": requested,
            "effective": requested, "backend": "file"}], **extra})


# -- item 1 ------------------------------------------------------------------------------


def test_incomplete_restore_keeps_the_lock_and_the_true_original() -> None:
    """Fault: writing the original back fails (EIO). Expected: the run's lock and journal
    stay; the next run is refused (exit 1) and changes nothing; `napilab restore` writes
    the true original (0) and clears the lock (exit 0)."""
    fake = FakeHost({X: "0\n"})
    host = FakeTransport(fake, "b")
    lock.acquire(host, "aaaa0001")
    settings = HostSettings(HostSession(host), "aaaa0001")
    settings.apply(gro("50"))
    fake.refuse[X] = "Input/output error"
    with pytest.raises(HostError, match="restore incomplete"):
        settings.restore()
    kept = lock.release_all([host], "aaaa0001")
    assert len(kept) == 1 and "lock kept" in kept[0] and "napilab restore" in kept[0]
    assert len(locks(fake)) == 1 and len(journals(fake)) == 1 and fake.files[X] == "50\n"
    killed(host)
    del fake.refuse[X]
    with pytest.raises(HostError, match="no longer running") as refused:
        lock.acquire(host, "bbbb0002")
    assert refused.value.exit_code == ExitCode.ERROR and "napilab restore" in refused.value.hint
    assert fake.files[X] == "50\n"
    lines, code = restore(host)
    assert code == 0, lines
    assert lines[0] == "b: restored 1 setting(s) of run aaaa0001: eth0/gro_flush_timeout=0"
    assert "removed the stale lock of run aaaa0001" in lines[1]
    assert fake.files[X] == "0\n" and not locks(fake) and not journals(fake)


# -- item 2 ------------------------------------------------------------------------------


def test_resume_with_break_lock_never_overwrites_a_journal() -> None:
    """Fault: run A is SIGKILLed with X changed (0 -> 50); `--resume --break-lock` starts
    A again (same run id). Expected: refused (exit 1) naming the journal and `napilab
    restore`, the journal still holds 0; even a HostSettings that skips the lock cannot
    overwrite it; `napilab restore` brings X to 0."""
    fake = FakeHost({X: "0\n"})
    host = FakeTransport(fake, "b")
    lock.acquire(host, "aaaa0001")
    HostSettings(HostSession(host), "aaaa0001").apply(gro("50"))
    killed(host)
    with pytest.raises(HostError, match=r"journal-aaaa0001-b\.json of run aaaa0001 is still "
                       "on the host") as refused:
        lock.acquire(host, "aaaa0001", break_lock=True)
    assert "napilab restore" in refused.value.hint
    assert not locks(fake)  # broken, and not taken: the refused run holds nothing
    resumed = HostSettings(HostSession(host), "aaaa0001")
    with pytest.raises(HostError, match=r"cannot write the journal .*File exists"):
        resumed.apply(gro("50"))
    assert resumed.changes == []
    path = journals(fake)[0]
    assert json.loads(fake.files[path])["entries"][0]["original"] == "0"
    lines, code = restore(host)
    assert code == 0 and fake.files[X] == "0\n" and not journals(fake), lines


# -- item 3 ------------------------------------------------------------------------------


def test_two_killed_runs_are_replayed_newest_first() -> None:
    """Fault: run 00000000 (older) changed X 0 -> 50 and was killed; run ffffffff (newer,
    started with --break-lock by an older napilab) changed 50 -> 70 and was killed.
    Expected: the newer journal is replayed first, so X ends at the true original 0
    (in run-id order it ended at 50); both journals gone; exit 0."""
    fake = FakeHost({X: "70\n"})
    host = FakeTransport(fake, "b")
    older, newer = f"{DIR}/journal-00000000-b.json", f"{DIR}/journal-ffffffff-b.json"
    fake.files[older] = journal("00000000", "b", "0", "50", 1000.0)
    fake.files[newer] = journal("ffffffff", "b", "50", "70", 2000.0)
    lines, code = restore(host)
    assert code == 0
    assert [line.split(" of run ")[1][:8] for line in lines] == ["ffffffff", "00000000"]
    assert fake.files[X] == "0\n" and not journals(fake)


def test_journal_without_created_is_ordered_by_its_file_time() -> None:
    fake = FakeHost({X: "70\n"})
    older, newer = f"{DIR}/journal-00000000-b.json", f"{DIR}/journal-ffffffff-b.json"
    for path, run, orig, req in ((older, "00000000", "0", "50"), (newer, "ffffffff", "50", "70")):
        doc = json.loads(journal(run, "b", orig, req, 0.0))
        del doc["created"]
        fake.files[path] = json.dumps(doc)
    fake.mtimes = {older: 1000.0, newer: 2000.0}
    assert restore(FakeTransport(fake, "b"))[1] == 0 and fake.files[X] == "0\n"


def test_a_failing_newer_journal_holds_back_the_older_ones() -> None:
    """Fault: the newer journal cannot be restored (EIO). Expected: the older journal is
    not replayed either (it would be overwritten by the newer one's "original" on the
    next replay); both stay, the lock stays; exit 1 naming both files."""
    fake = FakeHost({X: "70\n"})
    host = FakeTransport(fake, "b")
    fake.files[f"{DIR}/journal-00000000-b.json"] = journal("00000000", "b", "0", "50", 1000.0)
    fake.files[f"{DIR}/journal-ffffffff-b.json"] = journal("ffffffff", "b", "50", "70", 2000.0)
    fake.refuse[X] = "Input/output error"
    lines, code = restore(host)
    assert code == 1 and "1 older journal(s) left" in lines[-1] and "00000000" in lines[-1]
    assert fake.files[X] == "70\n" and len(journals(fake)) == 2
    del fake.refuse[X]
    assert restore(host)[1] == 0 and fake.files[X] == "0\n"


# -- item 4 ------------------------------------------------------------------------------


def test_unreadable_journal_keeps_the_lock_and_names_the_file() -> None:
    """Fault: a journal cut short (not JSON) and the stale lock of its run. Expected: no
    "no journal" line; exit 1 naming the file and what to do; the journal and the lock
    stay; X untouched (50)."""
    fake = FakeHost({X: "50\n"})
    host = FakeTransport(fake, "b")
    lock.acquire(host, "cccc0003")
    killed(host)
    path = f"{DIR}/journal-cccc0003-b.json"
    fake.files[path] = '{"run_id": "cccc0003", "entr'
    lines, code = restore(host)
    assert code == 1
    assert not any("no journal" in line for line in lines)
    assert f"the journal {path} cannot be read: not valid JSON" in lines[-1]
    assert "restore the values it lists by hand" in lines[-1]
    assert "stays: a journal of this host is left" in lines[0]
    assert locks(fake) and journals(fake) == [path] and fake.files[X] == "50\n"
    with pytest.raises(HostError, match=r"cannot be read|still on the host"):
        lock.acquire(host, "dddd0004", break_lock=True)


def test_journal_of_the_wrong_shape_does_not_stop_the_other_hosts() -> None:
    """Fault: host a's journal has `entries: "oops"`; host b has a good journal.
    Expected: b restored to 0 and unlocked; a's journal named and left; exit 1."""
    fa, fb = FakeHost({X: "50\n"}), FakeHost({X: "50\n"}, machine_id="e" * 32)
    a, b = FakeTransport(fa, "a"), FakeTransport(fb, "b")
    fa.files[f"{DIR}/journal-dddd0004-a.json"] = json.dumps(
        {"run_id": "dddd0004", "host": "a", "entries": "oops"})
    fb.files[f"{DIR}/journal-dddd0004-b.json"] = journal("dddd0004", "b", "0", "50", 1.0)
    lines, code = restore(a, b)
    assert code == 1
    assert "b: restored 1 setting(s) of run dddd0004" in lines[0]
    assert "journal-dddd0004-a.json is not a journal napilab can replay (no list of " \
        "entries)" in lines[-1]
    assert fb.files[X] == "0\n" and not journals(fb)
    assert fa.files[X] == "50\n" and journals(fa)


@pytest.mark.parametrize("entries", [[{"path": X}], [{"role": "r", "kind": "netdev",
                                                      "target": "t", "path": X,
                                                      "original": "0", "requested": "1",
                                                      "backend": "rm -rf"}], ["x"]])
def test_every_wrong_shape_is_a_message(entries: object) -> None:
    fake = FakeHost({X: "50\n"})
    fake.files[f"{DIR}/journal-dddd0004-b.json"] = json.dumps(
        {"run_id": "dddd0004", "host": "b", "entries": entries})
    lines, code = restore(FakeTransport(fake, "b"))
    assert code == 1 and "is not a journal napilab can replay" in lines[-1]
    assert fake.files[X] == "50\n"


def test_live_run_of_another_controller_is_left_alone() -> None:
    """Fault: `napilab restore` while a run of another controller holds the host (lock
    and journal: X is 50 for that run). Expected: journal and lock left alone, X stays
    50, exit 1 naming the journal and `--break-lock`; with --break-lock the journal is
    replayed (X 0) and the lock removed (exit 0)."""
    fake = FakeHost({X: "50\n"})
    host = FakeTransport(fake, "b")
    lock.acquire(host, "eeee0005")
    foreign = {"controller": "lab-ctl", "controller_machine_id": "0" * 32, "pid": 1}
    for path in locks(fake):
        fake.files[path] = json.dumps({**json.loads(fake.files[path]), **foreign})
    fake.files[f"{DIR}/journal-eeee0005-b.json"] = journal("eeee0005", "b", "0", "50", 1.0,
                                                           **foreign)
    lines, code = restore(host)
    assert code == 1 and "may still be running (on controller lab-ctl" in lines[-1]
    assert "napilab restore --break-lock" in lines[-1]
    assert fake.files[X] == "50\n" and locks(fake) and journals(fake)
    lines, code = restore(host, break_lock=True)
    assert code == 0 and fake.files[X] == "0\n" and not locks(fake) and not journals(fake)
    assert "removed the live (--break-lock) lock of run eeee0005" in lines[-1]


def test_renamed_host_finds_its_journal_by_machine() -> None:
    """Fault: run on host `b` killed; the inventory now calls the machine `sut`.
    Expected: `napilab restore` on `sut` replays b's journal (X 0), clears the lock,
    exit 0. A journal of an older napilab (no machine key) for a name the inventory no
    longer has is named, not silently ignored."""
    fake = FakeHost({X: "0\n"})
    old = FakeTransport(fake, "b")
    lock.acquire(old, "ffff0006")
    HostSettings(HostSession(old), "ffff0006").apply(gro("50"))
    killed(old)
    fake.files[f"{DIR}/journal-01010101-gone.json"] = journal("01010101", "gone", "1", "2", 1.0)
    lines, code = restore(FakeTransport(fake, "sut"))
    assert code == 0
    assert lines[0] == ("sut: restored 1 setting(s) of run ffff0006 (journalled as host b): "
                        "eth0/gro_flush_timeout=0")
    assert "journal-01010101-gone.json (host gone, run 01010101) belongs to no host" in lines[-1]
    assert fake.files[X] == "0\n" and not locks(fake)


def test_namespaces_sharing_var_tmp_keep_their_own_journals() -> None:
    """Two hosts that are network namespaces of one machine share /var/tmp/napilab: each
    replays only its own journal."""
    files = {X: "50\n"}
    a = FakeTransport(FakeHost(files, netns="net:[1]"), "a")
    b = FakeTransport(FakeHost(files, netns="net:[2]"), "b")
    HostSettings(HostSession(b), "abcd0001").apply(gro("60"))
    killed(b)
    lines, code = restore(a)
    assert code == 0 and lines[0] == "a: no journal, nothing to restore"
    assert files[X] == "60\n"
    assert restore(b)[1] == 0 and files[X] == "50\n"


# -- item 5 ------------------------------------------------------------------------------


SCHED = {"role": "receiver", "kind": "napi_threads", "target": "napi/data0-8193/cpus",
         "path": "4242/cpus", "original": "0-1", "requested": "1", "effective": "1",
         "backend": "sched"}


def thread_host(comm: str, boot_id: str) -> FakeHost:
    fake = FakeHost({X: "50\n", "/proc/4242/comm": f"{comm}\n", "/proc/4242/affinity": "1",
                     "/proc/4242/policy": "other:0"},
                    boot_id="11111111-0000-0000-0000-000000000000")
    doc = json.loads(journal("abab0007", "b", "0", "50", 1.0, boot_id=boot_id))
    doc["entries"].append(SCHED)
    fake.files[f"{DIR}/journal-abab0007-b.json"] = json.dumps(doc)
    return fake


def test_entries_after_a_reboot_are_skipped() -> None:
    """Fault: the host rebooted after the run was killed; PID 4242 now belongs to
    `sleep`, and X holds what the new boot set (50). Expected: both entries are skipped
    with a message (the thread's names another object, the file's value went with the
    boot: journal entries of one boot are never replayed into another), `sleep` keeps
    its affinity (1), X keeps 50, the journal is removed, exit 0."""
    fake = thread_host("sleep", boot_id="22222222-0000-0000-0000-000000000000")
    lines, code = restore(FakeTransport(fake, "b"))
    assert code == 0
    assert ("b: skipped napi/data0-8193/cpus (was 0-1): the host rebooted since run abab0007, "
            "so 4242 names another object now") in lines
    assert ("b: skipped eth0/gro_flush_timeout (was 0): the host rebooted since run abab0007, "
            "which took the value that run set with it") in lines
    assert fake.files["/proc/4242/affinity"] == "1" and fake.files[X] == "50\n"
    assert not journals(fake)


def test_reused_pid_in_the_same_boot_is_skipped_and_the_thread_is_restored() -> None:
    same = "11111111-0000-0000-0000-000000000000"
    fake = thread_host("sleep", boot_id=same)
    lines, _ = restore(FakeTransport(fake, "b"))
    assert "PID 4242 is now 'sleep', another thread" in lines[0]
    assert fake.files["/proc/4242/affinity"] == "1"
    fake = thread_host("napi/data0-8193", boot_id=same)
    lines, code = restore(FakeTransport(fake, "b"))
    assert code == 0 and "restored 2 setting(s)" in lines[0]
    assert fake.files["/proc/4242/affinity"] == "0-1"


def test_journal_records_boot_and_machine() -> None:
    fake = FakeHost({X: "0\n"})
    HostSettings(HostSession(FakeTransport(fake, "b")), "r1").apply(gro("50"))
    doc = json.loads(fake.files[journals(fake)[0]])
    assert doc["schema"] == 3 and doc["boot_id"] == fake.boot_id
    assert doc["machine"] == identity.HostIdentity(fake.machine_id, fake.boot_id,
                                                   fake.netns).key
    assert doc["pid"] == os.getpid() and doc["pid_start"] == identity.pid_start(os.getpid())


# -- item 6 ------------------------------------------------------------------------------


def test_one_machine_under_two_names_has_one_lock() -> None:
    """Fault: a second run reaches the locked machine under another inventory name.
    Expected: refused (exit 1), one lock file; within one run, the second name shares
    the run's lock."""
    fake = FakeHost({})
    first, alias = FakeTransport(fake, "a"), FakeTransport(fake, "a-alias")
    lock.acquire(first, "11110001")
    with pytest.raises(HostError, match="a-alias: locked by run 11110001"):
        lock.acquire(alias, "22220002")
    assert len(locks(fake)) == 1
    lock.acquire(alias, "11110001")  # the same run: the machine twice in its inventory
    assert lock.release_all([first, alias], "11110001") == [] and not locks(fake)


def test_empty_lock_is_refused_with_its_path_and_cleared_by_restore() -> None:
    """Fault: an empty lock file (what a full disk left with napilab 0.1). Expected: a
    run is refused (exit 1) naming the file and `napilab restore`; restore removes it
    (exit 0); the next run takes the host."""
    fake = FakeHost({})
    host = FakeTransport(fake, "b")
    path = lock.lock_path(host)
    fake.files[path] = ""
    expected = re.escape(f"the lock {path} is empty or corrupt")
    with pytest.raises(HostError, match=expected) as refused:
        lock.acquire(host, "44440004")
    assert "napilab restore" in refused.value.hint
    lines, code = restore(host)
    assert code == 0 and lines[-1] == f"b: removed the corrupt lock {path} ('')"
    lock.acquire(host, "55550005")
    assert json.loads(fake.files[path])["run_id"] == "55550005"


def test_full_disk_leaves_no_lock() -> None:
    fake = FakeHost({}, disk_full=True)
    with pytest.raises(HostError, match=r"cannot create .*No space left"):
        lock.acquire(FakeTransport(fake, "b"), "88880008")
    assert not locks(fake)


@pytest.mark.parametrize("change", ["pid_start", "controller_boot_id", "pid"])
def test_lock_of_a_dead_holder_is_stale(change: str) -> None:
    """Fault: the lock's PID now belongs to another live process (start time differs),
    or the controller rebooted, or the PID is gone. Expected: stale: refused with the
    `napilab restore` hint (exit 1), and restore clears it (exit 0)."""
    fake = FakeHost({})
    host = FakeTransport(fake, "b")
    lock.acquire(host, "66660006")
    path = locks(fake)[0]
    doc = json.loads(fake.files[path])
    doc[change] = {"pid_start": 1, "controller_boot_id": "rebooted", "pid": dead_pid()}[change]
    if change == "pid_start":
        doc["pid"] = os.getppid()  # alive, but not the process that took the lock
    fake.files[path] = json.dumps(doc)
    with pytest.raises(HostError, match="which is no longer running"):
        lock.acquire(host, "77770007")
    lines, code = restore(host)
    assert code == 0 and "removed the stale lock of run 66660006" in lines[-1]
    assert not locks(fake)


def test_lock_of_another_controller_is_never_judged_stale() -> None:
    fake = FakeHost({})
    host = FakeTransport(fake, "b")
    lock.acquire(host, "66660006")
    path = locks(fake)[0]
    fake.files[path] = json.dumps({**json.loads(fake.files[path]), "pid": dead_pid(),
                                   "controller": "lab-ctl", "controller_machine_id": "0" * 32})
    with pytest.raises(HostError, match="locked by run 66660006") as refused:
        lock.acquire(host, "77770007")
    assert "no longer running" not in str(refused.value)
    lines, code = restore(host)
    assert code == 0 and "stays: it is another controller's" in lines[-1] and locks(fake)


# -- item 8 (the lock side) ---------------------------------------------------------------


def test_unreachable_host_keeps_its_lock_and_the_others_are_released() -> None:
    """Fault: host a is unreachable when the run ends. Expected: b's lock released, a's
    kept and named with the `napilab restore` hint; nothing raised."""
    fa, fb = FakeHost({}), FakeHost({}, machine_id="e" * 32)
    a, b = FakeTransport(fa, "a"), FakeTransport(fb, "b")
    assert lock.acquire_all([a, b], "99990009") == [a, b]
    fa.unreachable = True
    kept = lock.release_all([a, b], "99990009")
    assert len(kept) == 1 and kept[0].startswith("a: lock kept (cannot reach the host")
    assert "napilab restore" in kept[0]
    assert locks(fa) and not locks(fb)


def test_locking_all_hosts_at_once_takes_every_host_or_none() -> None:
    """The hosts are locked at once: when one is held by another run, the locks taken on
    the others are released and that host's refusal is raised; the first host's error
    comes first when several refuse."""
    fa, fb, fc = (FakeHost({}, machine_id=c * 32) for c in "abc")
    a, b, c = FakeTransport(fa, "a"), FakeTransport(fb, "b"), FakeTransport(fc, "c")
    lock.acquire(b, "77770007")  # another run holds b
    with pytest.raises(HostError, match=r"^b: locked by"):
        lock.acquire_all([a, b, c], "88880008")
    assert not locks(fa) and not locks(fc) and len(locks(fb)) == 1
    lock.acquire(a, "77770007")
    with pytest.raises(HostError, match=r"^a: locked by"):
        lock.acquire_all([a, b, c], "88880008")
    assert not locks(fc)
    assert lock.release_all([a, b], "77770007") == [] and not locks(fa) and not locks(fb)
    assert lock.acquire_all([a, b, c], "88880008") == [a, b, c]
    assert all(locks(f) for f in (fa, fb, fc))
