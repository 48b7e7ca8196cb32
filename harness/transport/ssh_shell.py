"""One long-lived `sh` per SSH connection that runs napilab's short commands.

An SSH exec costs a session: sshd forks, runs the user's login shell with its rc files
(on Debian, bash sources ~/.bashrc even for `ssh host cmd`; a pyenv init there adds
~90 ms here), then the command. A trial issues a dozen short commands (read knobs,
journal, write, read back, snapshot, restore), so napilab keeps one `sh` open on its
own channel and writes each command to it, followed by a marker line carrying a random
nonce and the exit code; stdout and stderr are read up to their markers. The command
line is quoted once with shlex.join, as for an exec; its stdin is a quoted here-document
or /dev/null, never the shell's own stdin. Long-running processes (workload servers and
clients) still get their own channels.
"""

from __future__ import annotations

import secrets
import select
import time

import paramiko

from napilab.harness.errors import HostError


class PersistentShell:
    """The shell's output is read by the thread that runs the command, woken by the
    channel's own event pipe (paramiko sets it when stdout or stderr data arrives, and
    for good at EOF), not by a reader thread per stream handing each chunk on (two more
    thread wake-ups a command): `cat` of /proc/interrupts took 1.51 ms a command here
    that way, 1.76 ms with the reader threads (means of 6 x 500)."""

    def __init__(self, channel: paramiko.Channel, host: str) -> None:
        self.channel = channel
        self.host = host
        self._ready = channel.fileno()  # readable while either stream has data, or at EOF
        self._out = bytearray()
        self._err = bytearray()
        self.broken = False

    def run(self, command: str, stdin: str | None, timeout: float, *,
            shown: str | None = None) -> tuple[int, str, str]:
        """Run `command` (`shown` is how messages name it). Any exception on the way, a
        KeyboardInterrupt included, retires the shell: the command may still be running
        and its output would be read as the next command's."""
        try:
            return self._run(command, stdin, timeout, shown or command)
        except BaseException:
            self.broken = True
            raise

    def _run(self, command: str, stdin: str | None, timeout: float,
             shown: str) -> tuple[int, str, str]:
        nonce = secrets.token_hex(8)
        marker = f"__napilab_end_{nonce}".encode()
        if stdin is None:
            script = f"{command} </dev/null\n"
        else:
            body = stdin if stdin.endswith("\n") else stdin + "\n"
            script = f"{command} <<'NAPILAB_IN_{nonce}'\n{body}NAPILAB_IN_{nonce}\n"
        script += (f"printf '%s %s\\n' {marker.decode()} \"$?\"; "
                   f"printf '%s\\n' {marker.decode()} >&2\n")
        try:
            self.channel.sendall(script.encode())
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise HostError(f"{self.host}: connection dropped: {exc}") from None
        deadline = time.monotonic() + timeout
        while True:
            if not self._drain():
                raise HostError(f"{self.host}: connection dropped during `{shown}`")
            if marker in self._out and marker in self._err:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:  # the command may still run: a fresh shell is used
                raise HostError(f"{self.host}: `{shown}` timed out after {timeout:.0f}s")
            select.select([self._ready], [], [], min(remaining, 1.0))
        out, code = self._take(self._out, marker, with_code=True)
        err, _ = self._take(self._err, marker, with_code=False)
        return code, out, err

    def _drain(self) -> bool:
        """Take what both streams hold; False once the channel is closed or at EOF with
        nothing left to read."""
        took = False
        try:
            while self.channel.recv_ready():
                self._out += self.channel.recv(1 << 16)
                took = True
            while self.channel.recv_stderr_ready():
                self._err += self.channel.recv_stderr(1 << 16)
                took = True
        except (OSError, EOFError, paramiko.SSHException):
            return False
        return took or not (self.channel.closed or self.channel.eof_received)

    @staticmethod
    def _take(data: bytearray, marker: bytes, *, with_code: bool) -> tuple[str, int]:
        at = data.index(marker)
        end = data.index(b"\n", at)
        code = int(data[at + len(marker):end]) if with_code else 0
        text = bytes(data[:at]).decode(errors="replace")
        del data[:end + 1]
        return text, code

    def close(self) -> None:
        self.broken = True
        self.channel.close()
