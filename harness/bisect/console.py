"""Each boot's console, kept for a bisect step. A VM testbed guest's serial console is
a file of the testbed (harness.lab.vmbed: STATE/GUEST/console.log) that does not keep
every boot (here it held about 34 KB of the latest: its start was cut off, and a new
boot's output replaced the last), so the tap reads it before every boot the step's run
announces and once at the end, and keeps what is new since its last reading (all of it
when the file's first bytes changed or it shrank). A lab host's console is what
`--console-command` prints (conserver's log, `ipmitool sol`), run after the step."""

from __future__ import annotations

import subprocess
from pathlib import Path

HEAD = 256  # bytes compared to tell a restarted console from a grown one


class ConsoleTap:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.parts: list[bytes] = []
        self.restarts = 0
        self.offset, self.head = 0, b""
        if path is not None and path.exists():
            data = path.read_bytes()
            self.offset, self.head = len(data), data[:HEAD]

    def take(self) -> None:
        """What the console printed since the last reading."""
        if self.path is None or not self.path.exists():
            return
        data = self.path.read_bytes()
        if len(data) < self.offset or data[:len(self.head)] != self.head:
            self.restarts += 1
            start = 0
        else:
            start = self.offset
        if len(data) > start:
            self.parts.append(data[start:])
        self.offset, self.head = len(data), data[:HEAD]

    def text(self) -> bytes:
        return b"".join(self.parts)


def command_output(command: str, host: str, step: int) -> bytes:
    """A lab host's console, as the user's command prints it (empty when it fails)."""
    try:
        return subprocess.run(["sh", "-c", command], capture_output=True, check=False,
                              env={"NAPILAB_HOST": host, "NAPILAB_STEP": str(step),
                                   "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}).stdout
    except OSError:
        return b""
