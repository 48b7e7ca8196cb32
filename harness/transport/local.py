"""The local transport: subprocess, inside `ip netns exec NS` for a namespaced host."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, cast

from napilab.harness.errors import HostError
from napilab.harness.inventory.inventory import Host
from napilab.harness.redact import brief, shown_argv
from napilab.harness.transport.transport import CommandResult, command_line


class LocalProcess:
    def __init__(self, host: str, argv: tuple[str, ...], shown: tuple[str, ...] | None = None,
                 *, stdin_open: bool = False) -> None:
        self.host = host
        self.argv = argv if shown is None else shown  # as recorded: secrets redacted
        self._start = time.time()
        try:
            # stdin_open: a pipe this process holds and never writes; it closes when
            # this process ends, however it ends
            stdin = subprocess.PIPE if stdin_open else subprocess.DEVNULL
            self._popen = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise HostError(f"{host}: cannot start {argv[0]}: {exc}") from None
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        assert self._popen.stdout is not None and self._popen.stderr is not None
        self._readers = [self._drain(self._popen.stdout, self._out),
                         self._drain(self._popen.stderr, self._err)]

    @staticmethod
    def _drain(stream: IO[bytes], sink: list[bytes]) -> threading.Thread:
        def pump() -> None:
            reader = cast(io.BufferedReader, stream)
            for chunk in iter(lambda: reader.read1(65536), b""):
                sink.append(chunk)

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        return thread

    def poll(self) -> int | None:
        return self._popen.poll()

    def output(self) -> tuple[str, str]:
        return (b"".join(self._out).decode(errors="replace"),
                b"".join(self._err).decode(errors="replace"))

    def signal(self, name: str) -> None:
        if self._popen.poll() is None:
            # The whole session: `ip netns exec` and `timeout` wrappers included.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, getattr(signal, f"SIG{name}"))

    def wait(self, timeout: float) -> CommandResult:
        try:
            code = self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HostError(f"{self.host}: {self.argv[-1]!r} still running after {timeout:.0f}s",
                            hint="the process was left running; it will be killed") from None
        for reader in self._readers:
            reader.join(5)
        out, err = self.output()
        return CommandResult(self.host, self.argv, code, out, err, self._start,
                             time.time() - self._start)


class LocalTransport:
    """Runs commands on this machine (in `host.netns` when set)."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        final = tuple(command_line(self.host, argv, env, transport="local"))
        start = time.time()
        try:
            proc = subprocess.run(final, input=(stdin or "").encode(), capture_output=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise HostError(f"{self.host.name}: `{brief(argv)}` timed out after "
                            f"{timeout:.0f}s") from None
        except OSError as exc:
            raise HostError(f"{self.host.name}: cannot run {final[0]}: {exc}") from None
        result = CommandResult(self.host.name, shown_argv(final, env), proc.returncode,
                               proc.stdout.decode(errors="replace"),
                               proc.stderr.decode(errors="replace"), start, time.time() - start)
        return result.check() if check else result

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> LocalProcess:
        final = tuple(command_line(self.host, argv, env, transport="local"))
        return LocalProcess(self.host.name, final, shown_argv(final, env),
                            stdin_open=stdin_open)

    def read_file(self, path: str) -> str:
        return self.run(["cat", "--", path]).stdout

    def write_file(self, path: str, data: str) -> None:
        self.run(["tee", "--", path], stdin=data)

    def close(self) -> None:
        pass
