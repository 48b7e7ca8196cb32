"""How long napilab waits for a VM guest's sshd (harness.lab.guest Guest.wait_ssh,
harness.lab.vmbed _up): a boot whose console keeps printing is waited for until the
deadline, one whose console is silent for the stall time is started again (a slow
machine's boots took more than the fixed 240 s attempt they once had, and each was
thrown away nearly done). A real process stands in for QEMU; its port has no sshd."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from napilab.harness.lab import vmbed
from napilab.harness.lab.guest import Guest, GuestSpec, GuestStalled


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture()
def booting(tmp_path: Path) -> Iterator[Guest]:
    """A guest whose 'QEMU' is a sleeping process (its pidfile), no sshd on its port."""
    spec = GuestSpec(name="b", image=Path("/boot/vmlinuz"), append=(), cpus=1, memory="1G",
                     queues=1, accel="tcg", ssh_port=closed_port(), tap="napilabu-vb",
                     data_address="192.0.2.2/24", mac_index=1, state=tmp_path)
    # its command line names the guest's directory, as vng's does (Guest.pid checks it)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             str(tmp_path)])
    (tmp_path / "vng.pid").write_text(str(proc.pid))
    spec.console.write_text("[    0.000000] Linux version 7.2\n")
    try:
        yield Guest(spec)
    finally:
        proc.kill()
        proc.wait()


def printing(console: Path, every: float, stop: threading.Event) -> threading.Thread:
    def write() -> None:
        n = 0
        while not stop.wait(every):
            n += 1
            with console.open("a") as f:
                f.write(f"[ {n:10.6f}] still booting\n")

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_silent_console_is_a_stalled_boot(booting: Guest) -> None:
    start = time.time()
    with pytest.raises(GuestStalled, match=r"nothing on its console for 1s: .*Linux version"):
        booting.wait_ssh(start + 30, stall=1.0)
    assert time.time() - start < 5


def test_a_printing_console_is_waited_for_until_the_deadline(booting: Guest) -> None:
    stop = threading.Event()
    thread = printing(booting.spec.console, 0.2, stop)
    start = time.time()
    try:
        with pytest.raises(HostError, match=r"no SSH within 3s: .*still booting") as err:
            booting.wait_ssh(start + 3, stall=1.0)
    finally:
        stop.set()
        thread.join()
    assert not isinstance(err.value, GuestStalled)
    assert time.time() - start >= 3


def test_a_stalled_boot_is_started_again_and_a_slow_one_is_not(
        booting: Guest, monkeypatch: pytest.MonkeyPatch) -> None:
    """_up restarts only a guest that stalled (or died), twice at most."""
    starts: list[float] = []
    monkeypatch.setattr(vmbed, "STALL", 1.0)
    monkeypatch.setattr(Guest, "stop", lambda self, timeout=10: None)
    monkeypatch.setattr(Guest, "start", lambda self: starts.append(time.time()))
    with pytest.raises(GuestStalled):
        vmbed._up(booting, time.time() + 30)
    assert len(starts) == 2  # three attempts

    starts.clear()
    stop = threading.Event()
    thread = printing(booting.spec.console, 0.2, stop)
    try:
        with pytest.raises(HostError, match="no SSH within"):
            vmbed._up(booting, time.time() + 3)
    finally:
        stop.set()
        thread.join()
    assert starts == []
