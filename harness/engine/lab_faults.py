"""A VM testbed guest that drops in the middle of a trial is a lab fault, not a result.

Under TCG a guest sometimes stops answering (its SSH connection drops, or its QEMU dies)
while a trial runs or restores. That says nothing about the variant being measured, so
the trial is not failed for it: the guest's console is kept beside the trial's raw
files (raw/TRIAL.lab-fault-K/HOST/console.log; the trial's own start over), a guest
that does not answer is booted again on the kernel the testbed started it with, the
trial's settings are restored (a fresh boot has the defaults back; the restore reads
that and drops the journal), and the trial runs again,
RETRIES times at most, each fault recorded in the manifest (`lab_faults`) and said. A
host that is not a VM testbed guest, or an error that is not a dropped connection, fails
the trial as before."""

from __future__ import annotations

from napilab.harness.errors import NapilabError
from napilab.harness.hosts.session import HostSession

RETRIES = 1  # runs of a trial again after a lab fault
CONSOLE_TAIL = 256 * 1024  # bytes of a guest's console kept with the trial
# how the transports word a connection that is gone (harness.transport.ssh, ssh_shell)
DROPPED = (": connection dropped", ": SSH failed", ": cannot connect to",
           ": SSH channel failed")
ANSWER_TIMEOUT = 30.0  # seconds a guest has to run `true` before it is booted again


def raw_dir(trial: str, k: int) -> str:
    """The raw directory of the K-th lab fault of `trial` (kept when the trial runs again)."""
    return f"{trial}.lab-fault-{k}"


def guest(session: HostSession) -> tuple[str, str] | None:
    """(testbed state directory, guest name) of a VM testbed guest, else None."""
    boot = session.transport.host.boot
    if boot is None or boot.method != "vm" or not boot.testbed or not boot.guest:
        return None
    return boot.testbed, boot.guest


def dropped(exc: NapilabError, sessions: dict[str, HostSession]) -> list[str]:
    """The VM testbed guests whose connection `exc` says dropped."""
    text = str(exc)
    return [name for name, session in sessions.items()
            if guest(session) and any(f"{name}{how}" in text for how in DROPPED)]


def console(session: HostSession) -> str:
    """The last CONSOLE_TAIL bytes of the guest's console (every boot of it)."""
    from napilab.harness.lab.vmbed import VmTestbed

    found = guest(session)
    assert found is not None
    path = VmTestbed(state_dir=found[0]).console(found[1])
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - CONSOLE_TAIL))
            data = f.read()
    except OSError as exc:
        return f"napilab: cannot read {path}: {exc.strerror or exc}\n"
    if size > CONSOLE_TAIL:  # from the first whole line
        data = data[data.find(b"\n") + 1:]
    return data.decode(errors="replace")


def answers(session: HostSession) -> bool:
    try:
        session.transport.run(["true"], timeout=ANSWER_TIMEOUT)
    except NapilabError:
        return False
    return True


def boot_again(session: HostSession) -> float:
    """Restart the guest on the kernel the testbed started it with; seconds it took."""
    from napilab.harness.lab.vmbed import VmTestbed

    found = guest(session)
    boot = session.transport.host.boot
    assert found is not None and boot is not None
    return VmTestbed(state_dir=found[0]).boot(found[1], None, (), timeout=boot.timeout)
