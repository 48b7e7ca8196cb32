"""Where SSH really connects: the inventory's values, completed from ssh_config
(Host aliases, HostName, Port, User, IdentityFile, ProxyJump, ProxyCommand,
ConnectTimeout) through
paramiko's own SSHConfig parser. Values written in the inventory win, as command-line
options win over ssh_config in OpenSSH.

ProxyJump `a,b` is a chain, as in OpenSSH: connect to a (with a's own ssh_config,
its own ProxyJump or ProxyCommand included), from a to b, from b to the target.
ProxyCommand (tokens %h %p %r expanded by paramiko) runs locally and carries the
connection on its stdin/stdout, as OpenSSH runs it; when an entry has both, ProxyJump
is used."""

from __future__ import annotations

import getpass
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko

from napilab.harness.errors import InputError
from napilab.harness.inventory.inventory import Host

DEFAULT_CONFIG = "~/.ssh/config"
CONNECT_TIMEOUT = 10.0  # seconds, when neither the inventory nor ssh_config says


@dataclass(frozen=True)
class Endpoint:
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    jump: Endpoint | None = None  # the last hop before this endpoint
    proxy_command: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT

    def describe(self) -> str:
        via = f" via {self.jump.describe()}" if self.jump else ""
        if self.proxy_command:
            via = f" via ProxyCommand {self.proxy_command!r}"
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


def resolve(host: Host, config: paramiko.SSHConfig, *, depth: int = 0,
            proxies: bool = True) -> Endpoint:
    """`proxies=False`: a later hop of a ProxyJump chain, reached through the hop before
    it whatever its own entry says."""
    alias = host.address or host.name
    entry = config.lookup(alias)
    user = host.user or entry.get("user") or getpass.getuser()
    port = host.port if host.port_set else int(entry.get("port", host.port))
    keys = (host.key,) if host.key else tuple(entry.get("identityfile", ()))
    jump, command = None, None
    timeout = host.connect_timeout if host.connect_timeout is not None else \
        _seconds(alias, entry.get("connecttimeout"))
    if depth > 8:
        raise InputError(f"{host.name}: ProxyJump chain too long (a loop in ssh_config?)")
    if proxies and _set(entry.get("proxyjump")):
        for i, hop in enumerate(h.strip() for h in entry["proxyjump"].split(",")):
            endpoint = resolve(_jump_host(hop), config, depth=depth + 1, proxies=i == 0)
            jump = endpoint if jump is None else replace(endpoint, jump=jump)
    elif proxies and _set(entry.get("proxycommand")):
        command = entry["proxycommand"]
    return Endpoint(entry.get("hostname", alias), port, user, keys, jump, command, timeout)


def _seconds(alias: str, value: str | None) -> float:
    """ssh_config's ConnectTimeout (whole seconds; 0 or none: the default)."""
    if value is None or str(value).lower() == "none":
        return CONNECT_TIMEOUT
    try:
        seconds = int(value)
    except ValueError:
        raise InputError(f"ssh_config Host {alias}: ConnectTimeout {value!r} is not a "
                         "number of seconds") from None
    return float(seconds) if seconds > 0 else CONNECT_TIMEOUT


def _set(value: str | None) -> bool:
    return bool(value) and str(value).lower() != "none"


def hops(endpoint: Endpoint) -> list[Endpoint]:
    """The endpoints a connection goes through, first hop first, the target last."""
    chain = [endpoint]
    while chain[0].jump is not None:
        chain.insert(0, chain[0].jump)
    return chain


def _jump_host(spec: str) -> Host:
    """`[user@]host[:port]` of a ProxyJump entry as an inventory-less host."""
    user, _, rest = spec.rpartition("@")
    name, _, port = rest.partition(":")
    return Host(name=name, address=name, user=user or None,
                port=int(port) if port.isdigit() else 22, port_set=bool(port))
