"""A store on an SFTP server (`sftp://[user@]host[:port]/path`), reached as napilab
reaches hosts (harness.transport.ssh): ~/.ssh/config (aliases, HostName, Port, User,
IdentityFile, ProxyJump), keys or ssh-agent, and host keys checked against known_hosts
(an unknown key is refused). A file is written under a hidden name and renamed into
place (posix-rename), so a reader never sees half of one. Reads go over a few SFTP
channels of the one connection at once."""

from __future__ import annotations

import contextlib
import errno
import posixpath
import stat
import threading
from typing import TYPE_CHECKING

from napilab.harness.errors import NapilabError, StorageError
from napilab.harness.inventory.inventory import Host
from napilab.harness.stores.url import StoreUrl
from napilab.harness.transport.ssh import SSHTransport

if TYPE_CHECKING:
    import paramiko

CHANNELS = 4  # SFTP sessions read in parallel (sshd's MaxSessions is 10 by default)


class SftpBackend:
    parallel = CHANNELS

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        self.host = Host(name=url.host, address=url.host, port=url.port or 22,
                         user=url.user, port_set=url.port is not None)
        self.transport = SSHTransport(self.host, reconnect_attempts=2)
        self._local = threading.local()
        self._clients: list[paramiko.SFTPClient] = []
        self._lock = threading.Lock()
        self.root = url.path.rstrip("/") or "/"

    def describe(self) -> str:
        return str(self.url)

    def _sftp(self) -> paramiko.SFTPClient:
        client = getattr(self._local, "sftp", None)
        if client is None:
            try:
                client = self.transport.open_sftp()
            except NapilabError as exc:
                raise StorageError(f"{self.url}: {exc.message}", hint=exc.hint) from None
            except OSError as exc:  # the server has no sftp subsystem, ...
                raise StorageError(f"{self.url}: no SFTP session: {exc}") from None
            self._local.sftp = client
            with self._lock:
                self._clients.append(client)
        return client

    def _path(self, key: str) -> str:
        return posixpath.join(self.root, key) if key else self.root

    def _error(self, what: str, key: str, exc: OSError) -> StorageError:
        return StorageError(f"{self.url}: cannot {what} {self._path(key)}: "
                            f"{exc.strerror or exc}")

    def list_dirs(self, prefix: str) -> list[str]:
        try:
            entries = self._sftp().listdir_attr(self._path(prefix))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._error("list", prefix, exc) from None
        return sorted(e.filename for e in entries if not e.filename.startswith(".")
                      and e.st_mode is not None and stat.S_ISDIR(e.st_mode))

    def list_files(self, prefix: str) -> dict[str, int]:
        out: dict[str, int] = {}
        todo = [prefix.rstrip("/")]
        sftp = self._sftp()
        while todo:
            key = todo.pop()
            try:
                entries = sftp.listdir_attr(self._path(key))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise self._error("list", key, exc) from None
            for e in entries:
                if e.filename.startswith("."):
                    continue
                child = f"{key}/{e.filename}" if key else e.filename
                if e.st_mode is not None and stat.S_ISDIR(e.st_mode):
                    todo.append(child)
                else:
                    out[child] = e.st_size or 0
        return out

    def read(self, key: str) -> bytes | None:
        try:
            with self._sftp().open(self._path(key), "rb") as handle:
                handle.prefetch()
                return bytes(handle.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error("read", key, exc) from None

    def _makedirs(self, directory: str) -> None:
        sftp = self._sftp()
        missing = []
        while directory not in ("", "/"):
            try:
                sftp.stat(directory)
                break
            except FileNotFoundError:
                missing.append(directory)
                directory = posixpath.dirname(directory)
        for path in reversed(missing):
            try:
                sftp.mkdir(path)
            except OSError as exc:  # made by another writer meanwhile: fine
                if exc.errno not in (None, errno.EEXIST) and not _is_dir(sftp, path):
                    raise self._error("make", path, exc) from None

    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        tmp = posixpath.join(posixpath.dirname(path),
                             f".{posixpath.basename(path)}.{threading.get_ident()}.tmp")
        sftp = self._sftp()
        try:
            self._makedirs(posixpath.dirname(path))
            with sftp.open(tmp, "wb") as handle:
                handle.set_pipelined(True)
                handle.write(data)
            sftp.posix_rename(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                sftp.remove(tmp)
            raise self._error("write", key, exc) from None

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients = []
        self.transport.close()


def _is_dir(sftp: paramiko.SFTPClient, path: str) -> bool:
    try:
        mode = sftp.stat(path).st_mode
    except OSError:
        return False
    return mode is not None and stat.S_ISDIR(mode)
