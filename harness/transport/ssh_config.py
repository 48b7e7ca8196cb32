"""Where SSH really connects: the inventory's values, completed from ssh_config
(Host aliases, HostName, Port, User, IdentityFile, ProxyJump) through paramiko's own
SSHConfig parser. Values written in the inventory win, as command-line options win
over ssh_config in OpenSSH."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path

import paramiko

from harness.errors import InputError
from harness.profile.inventory import Host

DEFAULT_CONFIG = "~/.ssh/config"


@dataclass(frozen=True)
class Endpoint:
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    jump: Endpoint | None = None

    def describe(self) -> str:
        via = f" via {self.jump.describe()}" if self.jump else ""
        return f"{self.user}@{self.hostname}:{self.port}{via}"


def load_config(path: str | None) -> paramiko.SSHConfig:
    config_path = Path(path or DEFAULT_CONFIG).expanduser()
    if not config_path.exists():
        if path is not None:
            raise InputError(f"ssh_config {path}: no such file")
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(str(config_path))
    except (OSError, paramiko.ConfigParseError) as exc:
        raise InputError(f"ssh_config {config_path}: {exc}") from None


def resolve(host: Host, config: paramiko.SSHConfig, *, depth: int = 0) -> Endpoint:
    alias = host.address or host.name
    entry = config.lookup(alias)
    user = host.user or entry.get("user") or getpass.getuser()
    port = host.port if host.port_set else int(entry.get("port", host.port))
    keys = (host.key,) if host.key else tuple(entry.get("identityfile", ()))
    jump = None
    if entry.get("proxyjump") and entry["proxyjump"].lower() != "none":
        if depth > 4:
            raise InputError(f"{host.name}: ProxyJump chain too long (loop?)")
        first_hop = entry["proxyjump"].split(",")[0].strip()
        jump = resolve(_jump_host(first_hop), config, depth=depth + 1)
    return Endpoint(entry.get("hostname", alias), port, user, keys, jump)


def _jump_host(spec: str) -> Host:
    """`[user@]host[:port]` of a ProxyJump entry as an inventory-less host."""
    user, _, rest = spec.rpartition("@")
    name, _, port = rest.partition(":")
    return Host(name=name, address=name, user=user or None,
                port=int(port) if port.isdigit() else 22, port_set=bool(port))
