"""What `-o`, `push`, `history`, `check --baseline`, `compare` and `publish` accept as a
results store: a directory, `sftp://[user@]host[:port]/path` or `s3://bucket[/prefix]`
(docs/stores.md). A URL never holds a secret: one with a password (`user:pw@`) or a
query is refused, and the refusal does not repeat the password."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from napilab.harness.errors import InputError

FORMS = "a directory, sftp://[user@]host[:port]/path or s3://bucket[/prefix]"
SCHEMES = ("sftp", "s3")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# an S3 bucket name (the rules of S3's own, path-style addressing included)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class StoreUrl:
    scheme: str  # file | sftp | s3
    path: str  # the directory (file, sftp: absolute or relative to the login's home)
    host: str = ""  # sftp
    user: str | None = None  # sftp
    port: int | None = None  # sftp
    bucket: str = ""  # s3; `path` is then the key prefix, no leading or trailing /

    def __str__(self) -> str:
        if self.scheme == "file":
            return self.path
        if self.scheme == "s3":
            return f"s3://{self.bucket}" + (f"/{self.path}" if self.path else "")
        who = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"sftp://{who}{self.host}{port}/{self.path.removeprefix('/')}" \
            if not self.path.startswith("/") else f"sftp://{who}{self.host}{port}{self.path}"

    @property
    def remote(self) -> bool:
        return self.scheme != "file"

    def join(self, *parts: str) -> StoreUrl:
        """The URL of a run (or a profile) under this store."""
        tail = "/".join(p.strip("/") for p in parts if p)
        if self.scheme == "file":
            return StoreUrl("file", f"{self.path.rstrip('/')}/{tail}")
        path = f"{self.path.rstrip('/')}/{tail}" if self.path else tail
        return StoreUrl(self.scheme, path, self.host, self.user, self.port, self.bucket)


def is_url(text: str) -> bool:
    return bool(_URL.match(text))


def _shown(text: str) -> str:
    """The URL as it may be printed: a password replaced by ***."""
    return re.sub(r"^([A-Za-z0-9+.-]+://[^/@:]*):[^/@]*@", r"\1:***@", text)


def parse(text: str) -> StoreUrl:
    """A store URL, or a directory (`file`); an InputError (exit 2) that names the
    allowed forms."""
    if not is_url(text):
        if not text:
            raise InputError(f"an empty results store: expected {FORMS}")
        return StoreUrl("file", text)
    shown = _shown(text)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InputError(f"{shown}: a file URL names this machine only", hint=FORMS)
        return StoreUrl("file", parts.path)
    if scheme not in SCHEMES:
        raise InputError(f"{shown}: unknown store scheme {scheme!r}; expected {FORMS}")
    if parts.password is not None:
        raise InputError(f"{shown}: a store URL holds no password",
                         hint="sftp uses your SSH keys (~/.ssh/config, ssh-agent); s3 the "
                              "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY environment or "
                              "~/.aws/credentials")
    if parts.query or parts.fragment:
        raise InputError(f"{shown}: a store URL has no ?query or #fragment", hint=FORMS)
    return _s3(shown, parts) if scheme == "s3" else _sftp(shown, parts)


def _s3(shown: str, parts: SplitResult) -> StoreUrl:
    path = parts.path
    if parts.username is not None or parts.port is not None:
        raise InputError(f"{shown}: an s3 URL is s3://bucket[/prefix] (the endpoint "
                         "comes from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL)",
                         hint=FORMS)
    bucket = parts.hostname or ""
    if not _BUCKET.fullmatch(bucket):
        raise InputError(f"{shown}: {bucket!r} is not an S3 bucket name (3-63 of "
                         "a-z, 0-9, '.' and '-')", hint=FORMS)
    prefix = path.strip("/")
    if any(p in ("", ".", "..") for p in prefix.split("/")) and prefix:
        raise InputError(f"{shown}: the prefix has an empty, '.' or '..' part", hint=FORMS)
    return StoreUrl("s3", prefix, bucket=bucket)


def _sftp(shown: str, parts: SplitResult) -> StoreUrl:
    path = parts.path
    host = parts.hostname or ""
    if not host:
        raise InputError(f"{shown}: no host; expected sftp://[user@]host[:port]/path")
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"{shown}: the port is not a number from 1 to 65535") from None
    if not path or path == "/":
        raise InputError(f"{shown}: no directory; expected sftp://[user@]host[:port]/path "
                         "(a path under the login's home: sftp://host/~/results)")
    if path.startswith("/~/"):
        path = path[3:]  # relative to the login's home
    return StoreUrl("sftp", path, host=host, user=parts.username, port=port)
