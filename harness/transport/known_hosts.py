"""Host keys as OpenSSH checks them, `host_key_policy: accept-new` as OpenSSH's
`StrictHostKeyChecking=accept-new`.

known_hosts files are read by napilab itself (paramiko's loader stops at the first
`@cert-authority` or `@revoked` line with an uncaught InvalidHostKey): blank lines and
comments are skipped, lines whose key napilab cannot read are skipped (OpenSSH skips
them too), host patterns match as OpenSSH's do (comma lists, `*` and `?`, `!negation`,
hashed `|1|` names, `[host]:port` for ports other than 22).

- A key marked `@revoked` is refused, whatever else the files say.
- `@cert-authority` lines vouch for host certificates, which paramiko does not verify:
  they are never taken as a host's own key.
- A host's plain keys are handed to paramiko, which prefers the known key types and
  refuses a key that differs (BadHostKeyException).
- A host with no key at all is refused under `reject`; under `accept-new` its key is
  appended to the known_hosts file: under an exclusive lock on the file (flock, so
  runs and threads connecting at once all record theirs), after reading it again (a
  key another process recorded meanwhile is checked, not added twice), with one
  write() of one line to the end of the file. Nothing else in the file is rewritten:
  comments, markers and other hosts' lines stay as they are. A write cut short (full
  disk) is truncated away.

The file is the inventory's `known_hosts`, else ~/.ssh/known_hosts (created 0600 in a
0700 ~/.ssh when absent, as OpenSSH does); /etc/ssh/ssh_known_hosts is read too then.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import fcntl
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from pathlib import Path

import paramiko

GLOBAL_FILE = Path("/etc/ssh/ssh_known_hosts")


class RevokedHostKey(paramiko.SSHException):
    """The server presented a key a known_hosts file marks @revoked."""


@dataclass(frozen=True)
class Entry:
    marker: str  # "" | "@cert-authority" | "@revoked"
    patterns: str
    key: paramiko.PKey
    where: str  # FILE:LINE


def key_name(hostname: str, port: int) -> str:
    """How known_hosts names a host: `host`, or `[host]:port` off port 22."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def parse(text: str, source: str) -> list[Entry]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else ""
        if len(fields) < 3 or marker not in ("", "@cert-authority", "@revoked"):
            continue
        try:
            key = paramiko.PKey.from_type_string(fields[1], base64.b64decode(fields[2]))
        except (binascii.Error, ValueError, paramiko.SSHException):
            continue  # a key type paramiko cannot read, or a damaged line
        entries.append(Entry(marker, fields[0], key, f"{source}:{number}"))
    return entries


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern.lower()))


def _hashed(pattern: str, name: str) -> bool:
    parts = pattern.split("|")
    if len(parts) != 4:
        return False
    try:
        salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except binascii.Error:
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)


def matches(patterns: str, name: str) -> bool:
    """OpenSSH's match_hostname: any pattern matches and no negated one does."""
    found = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        if pattern.startswith("|1|"):
            hit = _hashed(pattern, name)
        else:
            hit = _glob(pattern).fullmatch(name.lower()) is not None
        if hit and negated:
            return False
        found = found or hit
    return found


class KnownHosts:
    """The known_hosts files of one inventory host and the policy to check them."""

    def __init__(self, known_hosts: str | None, *, accept_new: bool) -> None:
        self.file = Path(known_hosts) if known_hosts else Path.home() / ".ssh" / "known_hosts"
        self.files = [self.file] + ([] if known_hosts else [GLOBAL_FILE])
        self.accept_new = accept_new

    def entries(self, name: str) -> list[Entry]:
        out = []
        for path in self.files:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                out += [e for e in parse(path.read_text(errors="replace"), str(path))
                        if matches(e.patterns, name)]
        return out

    def revoked(self, key: paramiko.PKey, name: str) -> Entry | None:
        return next((e for e in self.entries(name)
                     if e.marker == "@revoked" and e.key == key), None)

    def known(self, name: str) -> list[paramiko.PKey]:
        """The host's plain keys, revoked ones left out."""
        entries = self.entries(name)
        revoked = [e.key for e in entries if e.marker == "@revoked"]
        return [e.key for e in entries if not e.marker and e.key not in revoked]

    def prepare(self, client: paramiko.SSHClient, name: str,
                prefer: paramiko.PKey | None = None) -> None:
        """Give `client` the host's known keys (one per type: paramiko keeps one; `prefer`
        first) and this policy for a host it has none for."""
        host_keys = client.get_host_keys()
        types: set[str] = set()
        for key in ([prefer] if prefer is not None else []) + self.known(name):
            if key.get_name() not in types:
                types.add(key.get_name())
                host_keys.add(name, key.get_name(), key)
        client.set_missing_host_key_policy(_Policy(self))

    def missing(self, name: str, key: paramiko.PKey) -> None:
        entry = self.revoked(key, name)
        if entry is not None:
            raise RevokedHostKey(f"the {key.get_name()} host key of {name} is revoked "
                                 f"(@revoked at {entry.where})")
        if not self.accept_new:
            ca = any(e.marker == "@cert-authority" for e in self.entries(name))
            raise paramiko.SSHException(
                f"Server {name!r} not found in known_hosts ({', '.join(map(str, self.files))})"
                + ("; a @cert-authority line matches it, but napilab (paramiko) does not "
                   "verify host certificates" if ca else ""))
        self.append(name, key)

    def append(self, name: str, key: paramiko.PKey) -> None:
        """Record `key` for `name` (see the module docstring)."""
        if not self.file.parent.exists():
            self.file.parent.mkdir(mode=0o700, parents=True)
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with open(fd, "rb", closefd=False) as handle:
                text = handle.read()
            recorded = [e.key for e in parse(text.decode(errors="replace"), str(self.file))
                        if not e.marker and matches(e.patterns, name)
                        and e.key.get_name() == key.get_name()]
            if recorded:
                if key in recorded:
                    return  # another run recorded it meanwhile
                raise paramiko.BadHostKeyException(name, key, recorded[0])
            line = f"{name} {key.get_name()} {key.get_base64()}\n".encode()
            data = (b"\n" if text and not text.endswith(b"\n") else b"") + line
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, len(text))  # no half line left behind
                raise
        finally:
            os.close(fd)  # and the lock with it


class _Policy(paramiko.MissingHostKeyPolicy):
    def __init__(self, known: KnownHosts) -> None:
        self.known = known

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        self.known.missing(hostname, key)
