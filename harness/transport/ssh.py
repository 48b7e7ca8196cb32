"""The SSH transport: paramiko, key auth, known_hosts verification, one connection per
host reused for every command of a run, reconnect with backoff when it drops.

A host that does not answer is waited for `connect_timeout` seconds (the inventory's,
else ssh_config's ConnectTimeout, else 10): to connect (TCP, banner, authentication), to
open a channel, and on an open connection for what was sent to be acknowledged: a
keepalive goes out at least every 5 s and the socket's TCP_USER_TIMEOUT ends a
connection whose data stays unacknowledged that long, so a host whose link went down is
found dead then, not at a command's timeout (TCP alone retries for minutes)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import paramiko

from napilab.harness.errors import HostError
from napilab.harness.inventory.inventory import Host
from napilab.harness.redact import brief, shown_argv
from napilab.harness.transport import ssh_config as sshconfig
from napilab.harness.transport.known_hosts import (
    KnownHosts,
    RevokedHostKey,
    UnknownHostKey,
    key_name,
)
from napilab.harness.transport.ssh_shell import PersistentShell
from napilab.harness.transport.transport import CommandResult, command_line

BUILTIN_WRITE = 512  # bytes written by sh's printf at most (write_file)
# Starts a server so that its PID is known before it runs: the constant script prints
# the shell's PID and execs the real argv, passed as positional parameters (never
# interpolated into the script).
_PID_WRAPPER = ["sh", "-c", 'echo "napilab-pid $$" >&2 && exec "$@"', "napilab-server"]


class _Reader:
    """Drains one stream of a channel in a thread (stdout and stderr separately, so a
    chatty stderr never blocks stdout). `recv` blocks until data or EOF (b"")."""

    def __init__(self, channel: paramiko.Channel, *, stderr: bool) -> None:
        self.chunks: list[bytes] = []
        self.more = threading.Event()  # set on each chunk and at EOF; cleared by a waiter
        self._recv = channel.recv_stderr if stderr else channel.recv
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            while data := self._recv(65536):
                self.chunks.append(data)
                self.more.set()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        self.more.set()

    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")


def _readers(channel: paramiko.Channel) -> tuple[_Reader, _Reader]:
    return _Reader(channel, stderr=False), _Reader(channel, stderr=True)


class SSHProcess:
    def __init__(self, transport: SSHTransport, argv: tuple[str, ...],
                 channel: paramiko.Channel) -> None:
        self.argv = argv
        self._transport = transport
        self._channel = channel
        self._start = time.time()
        self._out, self._err = _readers(channel)
        self.pid = self._read_pid()

    def _read_pid(self) -> int | None:
        """The wrapper's PID line, woken by each chunk of stderr (polling every 5 ms
        cost 5 ms a start)."""
        deadline = time.monotonic() + 10
        while (left := deadline - time.monotonic()) > 0:
            self._err.more.clear()
            first, sep, _ = self._err.text().partition("\n")
            if sep and first.startswith("napilab-pid "):
                return int(first.split()[1])
            if self._channel.exit_status_ready() or not self._err.thread.is_alive():
                break
            self._err.more.wait(min(left, 0.1))
        return None

    def poll(self) -> int | None:
        if self._channel.exit_status_ready():
            return self._channel.recv_exit_status()
        return None

    def output(self) -> tuple[str, str]:
        err = self._err.text()
        if err.startswith("napilab-pid "):
            err = err.partition("\n")[2]
        return self._out.text(), err

    def signal(self, name: str) -> None:
        if self.pid is None or self.poll() is not None:
            return
        self._transport.run(["kill", "-s", name, str(self.pid)], check=False, timeout=15)

    def wait(self, timeout: float) -> CommandResult:
        if not self._channel.status_event.wait(timeout):
            raise HostError(f"{self._transport.host.name}: {self.argv[-1]!r} still running after "
                            f"{timeout:.0f}s")
        code = self._channel.recv_exit_status()
        self._out.thread.join(5)
        self._err.thread.join(5)
        self._channel.close()
        out, err = self.output()
        return CommandResult(self._transport.host.name, self.argv, code, out, err, self._start,
                             time.time() - self._start)


def shell_line(final: Sequence[str]) -> str:
    """`final` as a line for napilab's own `sh` (harness.transport.ssh_shell): a leading
    `env K=V ...` becomes the shell's `K=V ...` assignments, which set the same
    environment for the command without exec'ing env first (0.75 ms a command here,
    a dozen commands a trial). Anything else (`sudo -n -- env ...`, where sudo clears
    the environment) is joined as it is."""
    if not final or final[0] != "env":
        return shlex.join(final)
    count = 1
    while count < len(final) and _ASSIGNMENT.fullmatch(final[count]):
        count += 1
    if count == len(final) or final[count].startswith("-") or final[count] in _SH_BUILTINS:
        # nothing to run, an env option, or a name sh would run itself (its echo is not
        # /bin/echo; assignments before `exec` or `cd` would stay in the shell): env
        return shlex.join(final)
    pairs = [a.partition("=") for a in final[1:count]]
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, _, v in pairs),
                     shlex.join(final[count:])])


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
# dash's and bash's builtins and keywords: a command by one of these names goes via env
_SH_BUILTINS = frozenset({
    ".", ":", "[", "alias", "bg", "break", "builtin", "case", "cd", "command", "continue",
    "do", "done", "echo", "elif", "else", "eval", "exec", "exit", "export", "false", "fc",
    "fg", "for", "getopts", "hash", "if", "jobs", "kill", "let", "local", "printf", "pwd",
    "read", "readonly", "return", "set", "shift", "test", "then", "times", "trap", "true",
    "type", "ulimit", "umask", "unalias", "unset", "until", "wait", "while", "{", "}", "!",
    "[[", "]]",
})


class _ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, except that the command's exit ends the connection at
    once with its exit status and stderr (paramiko's reads an exited command's empty
    output until the banner timeout), and close() reaps the process."""

    def recv(self, size: int) -> bytes:
        stdout = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], self.timeout)
        if not ready:
            raise TimeoutError(f"ProxyCommand: nothing within {self.timeout}s")
        data = os.read(stdout.fileno(), size)
        if not data:
            try:
                code = self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            err = self.process.stderr.read().decode(errors="replace").strip() \
                if code is not None and self.process.stderr else ""
            raise paramiko.ProxyCommandFailure(shlex.join(self.cmd),
                                               f"closed its output (exit {code}): {err}")
        return data

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def _tcp(hostname: str, port: int, timeout: float) -> socket.socket:
    """The TCP connection to a host's sshd, with TCP_NODELAY (as OpenSSH's client sets
    it): paramiko's own socket has Nagle's algorithm on, and the handshake's second of
    two small writes waited for the server's delayed ACK. Connecting and a first
    command took 72 ms instead of 115 ms here (medians of 8, netns testbed)."""
    sock = socket.create_connection((hostname, port), timeout=timeout)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class SSHTransport:
    """One paramiko connection to `host`, opened on first use and kept for the run."""

    def __init__(self, host: Host, *, reconnect_attempts: int = 5) -> None:
        self.host = host
        # how long a host that does not answer is waited for: the resolved endpoint's,
        # set at each connect (inventory, else ssh_config's ConnectTimeout, else 10 s)
        self.connect_timeout = sshconfig.CONNECT_TIMEOUT
        self.reconnect_attempts = reconnect_attempts
        self._client: paramiko.SSHClient | None = None
        self._jumps: list[paramiko.SSHClient] = []
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._sh: PersistentShell | None = None

    # -- connection ------------------------------------------------------------------

    def _connect_once(self) -> paramiko.SSHClient:
        endpoint = sshconfig.resolve(self.host, sshconfig.load_config(self.host.ssh_config))
        self.connect_timeout = endpoint.connect_timeout
        return self._open(endpoint)

    def _proxy(self, endpoint: sshconfig.Endpoint) -> Any:
        """The socket the connection to `endpoint` goes through: a direct-tcpip channel
        from its last ProxyJump hop, a ProxyCommand's pipes, or None (TCP)."""
        host = self.host
        sock: Any = None
        if endpoint.jump is not None:
            jump = self._open(endpoint.jump)
            self._jumps.append(jump)
            jump_transport = jump.get_transport()
            assert jump_transport is not None
            try:
                sock = jump_transport.open_channel("direct-tcpip", (endpoint.hostname,
                                                                    endpoint.port), ("", 0),
                                                   timeout=endpoint.jump.connect_timeout)
            except (paramiko.SSHException, OSError) as exc:
                raise HostError(f"{host.name}: jump host {endpoint.jump.describe()} cannot "
                                f"reach {endpoint.hostname}:{endpoint.port}: {exc}") from None
        elif endpoint.proxy_command:
            try:
                sock = _ProxyCommand(endpoint.proxy_command)
            except (paramiko.SSHException, OSError) as exc:
                raise HostError(f"{host.name}: ProxyCommand {endpoint.proxy_command!r} "
                                f"failed: {exc}") from None
        return sock

    def _open(self, endpoint: sshconfig.Endpoint) -> paramiko.SSHClient:
        """A client connected to `endpoint`, through its ProxyJump hops (the jump
        connections are kept open for as long as the target's) or its ProxyCommand.
        Host keys: see harness.transport.known_hosts."""
        known = KnownHosts(self.host.known_hosts,
                           accept_new=self.host.host_key_policy == "accept-new")
        name = key_name(endpoint.hostname, endpoint.port)
        prefer: paramiko.PKey | None = None
        for attempt in (1, 2):
            try:
                return self._open_once(endpoint, known, name, prefer)
            except paramiko.BadHostKeyException as exc:
                # paramiko checks one known key per type: a host with two of one type
                # (a key being rotated) presented the other one.
                if attempt == 2 or exc.key not in known.known(name):
                    raise self._bad_key(known, name, exc) from None
                prefer = exc.key
        raise AssertionError("unreachable")

    def _bad_key(self, known: KnownHosts, name: str,
                 exc: paramiko.BadHostKeyException) -> HostError:
        if known.revoked(exc.key, name):
            return HostError(f"{self.host.name}: the host key of {name} is revoked in "
                             "known_hosts", hint="the host's key was withdrawn: check the "
                             "host before trusting it again")
        return HostError(f"{self.host.name}: host key of {exc.hostname} does not match "
                         "known_hosts", hint="someone may be intercepting the connection, "
                         "or the host was reinstalled; check and update known_hosts")

    def _open_once(self, endpoint: sshconfig.Endpoint, known: KnownHosts, name: str,
                   prefer: paramiko.PKey | None = None) -> paramiko.SSHClient:
        sock = self._proxy(endpoint)
        client = paramiko.SSHClient()
        known.prepare(client, name, prefer)
        keys: Any = list(endpoint.key_files) or None  # paramiko takes a str or a list
        timeout = endpoint.connect_timeout
        try:
            if sock is None:
                sock = _tcp(endpoint.hostname, endpoint.port, timeout)
            client.connect(
                hostname=endpoint.hostname, port=endpoint.port, username=endpoint.user,
                key_filename=keys, look_for_keys=keys is None, allow_agent=keys is None,
                timeout=timeout, banner_timeout=timeout, auth_timeout=timeout, sock=sock,
            )
        except BaseException as exc:
            # a failed attempt leaves no ProxyCommand process or jump channel behind
            # (reconnects make new ones)
            client.close()
            if sock is not None:
                sock.close()
            if isinstance(exc, paramiko.BadHostKeyException | KeyboardInterrupt):
                raise
            raise self._connect_error(exc, endpoint) from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(max(1, min(5, int(timeout))))
            if isinstance(transport.sock, socket.socket) and hasattr(socket, "TCP_USER_TIMEOUT"):
                transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                                          int(timeout * 1000))
        return client

    def _connect_error(self, exc: BaseException, endpoint: sshconfig.Endpoint) -> BaseException:
        name = self.host.name
        if isinstance(exc, RevokedHostKey):
            return HostError(f"{name}: {exc}", hint="the host's key was withdrawn: check the "
                             "host before trusting it again")
        if isinstance(exc, paramiko.AuthenticationException):
            return HostError(f"{name}: SSH authentication as {endpoint.user} failed: {exc}",
                             hint="check `user` and `key` in the inventory (or ssh_config)")
        if isinstance(exc, UnknownHostKey):
            return HostError(f"{name}: unknown host key ({exc})",
                             hint="add it to known_hosts, or set host_key_policy: "
                             "accept-new in the inventory")
        if isinstance(exc, paramiko.SSHException | EOFError):
            # EOFError: the host closed the connection during the handshake (a host going
            # down as napilab connects: paramiko's packetizer raises it as it is)
            return HostError(f"{name}: SSH failed: {exc or 'connection closed by the host'}")
        if isinstance(exc, TimeoutError | OSError):
            return HostError(f"{name}: cannot connect to {endpoint.describe()}: {exc}")
        return exc

    def _session(self) -> paramiko.SSHClient:
        """The live connection, reconnecting with backoff if it dropped."""
        with self._lock:
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    return self._client
                self._client.close()
                self._client = None
            delay = 0.2
            for attempt in range(self.reconnect_attempts):
                try:
                    self._client = self._connect_once()
                    return self._client
                except HostError:
                    if attempt == self.reconnect_attempts - 1:
                        raise
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
            raise AssertionError("unreachable")

    def _channel(self, final: Sequence[str] | str) -> paramiko.Channel:
        command = final if isinstance(final, str) else shlex.join(final)
        for attempt in (1, 2):
            client = self._session()
            try:
                transport = client.get_transport()
                assert transport is not None
                channel = transport.open_session(timeout=self.connect_timeout)
                channel.exec_command(command)
                return channel
            except (paramiko.SSHException, EOFError, OSError) as exc:
                if attempt == 2:
                    raise HostError(f"{self.host.name}: SSH channel failed: {exc}") from None
                with self._lock:  # the connection is dead: force a reconnect
                    if self._client is not None:
                        self._client.close()
                        self._client = None
        raise AssertionError("unreachable")

    # -- Transport protocol -------------------------------------------------------------

    def _shell(self) -> PersistentShell:
        if self._sh is None or self._sh.broken or self._sh.channel.closed or not self._alive():
            if self._sh is not None:
                self._sh.close()
            self._sh = PersistentShell(self._channel("exec /bin/sh"), self.host.name)
        return self._sh

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        final = tuple(command_line(self.host, argv, env, transport="ssh"))
        result = self._on_shell(shell_line(final), shown_argv(final, env), stdin, timeout)
        return result.check() if check else result

    def _on_shell(self, line: str, shown: tuple[str, ...], stdin: str | None,
                  timeout: float) -> CommandResult:
        """`line` run by the host's persistent shell; `shown`: the command as results and
        messages name it."""
        start = time.time()
        with self._run_lock:  # one command at a time on the host's shell
            code, out, err = self._shell().run(line, stdin, timeout, shown=brief(shown))
        return CommandResult(self.host.name, shown, code, out, err, start,
                             time.time() - start)

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> SSHProcess:
        final = tuple(command_line(self.host, argv, env, transport="ssh"))
        if final[:3] == ("sudo", "-n", "--"):
            wrapped = (*final[:3], *_PID_WRAPPER, *final[3:])
        else:
            wrapped = (*_PID_WRAPPER, *final)
        channel = self._channel(wrapped)
        if not stdin_open:  # else sshd closes it when the connection ends, however it ends
            channel.shutdown_write()
        return SSHProcess(self, shown_argv(final, env), channel)

    def read_file(self, path: str) -> str:
        return self.run(["cat", "--", path]).stdout

    def write_file(self, path: str, data: str) -> None:
        """`data` written to `path` by the shell's own printf: one write(2) and no exec
        (in a TCG guest a `tee` exec costs 53-102 ms, and a trial writes each knob twice).
        Where it fails, `tee` writes again, for the kernel's reason (dash's printf says
        only "I/O error"). Through `tee` alone under sudo (a redirection would not be
        root's) and past BUILTIN_WRITE bytes (a builtin may write in pieces)."""
        if self.host.become == "sudo" or len(data.encode()) > BUILTIN_WRITE:
            self.run(["tee", "--", path], stdin=data)
            return
        quoted = shlex.quote(path)
        line = f"{{ printf %s {shlex.quote(data)} >{quoted}; }} 2>/dev/null || tee -- {quoted}"
        self._on_shell(line, ("tee", "--", path), data, 60.0).check()

    def _alive(self) -> bool:
        client = self._client
        transport = client.get_transport() if client is not None else None
        return transport is not None and transport.is_active()

    def open_sftp(self) -> paramiko.SFTPClient:
        """An SFTP session on this host's connection (a results store over sftp://,
        harness.stores.sftp), connecting first if needed."""
        return self._session().open_sftp()

    def close(self) -> None:
        if self._sh is not None:
            self._sh.close()
            self._sh = None
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            for jump in self._jumps:
                jump.close()
            self._jumps = []
