"""The local testbed: two network namespaces joined by a veth pair, reachable from the
root namespace over management veths, optionally with an sshd in each.

    root ns  --napilab-a-m (198.51.100.1/30) == mgmt0 (198.51.100.2/30)--  napilab-a
             --napilab-b-m (198.51.100.5/30) == mgmt0 (198.51.100.6/30)--  napilab-b
    napilab-a: data0 192.0.2.1/24  <== veth, GRO on ==>  napilab-b: data0 192.0.2.2/24

The management addresses are one /29 of 198.51.100.0/24 (`block`, default 0): a second
testbed (the test suite's, next to a `napilab testbed up`) takes another /29 and its
own prefix. The data range lives only inside the namespaces.

GRO on a veth gives it NAPI instances, so `threaded`, `napi_defer_hard_irqs`,
`gro_flush_timeout` and `queues/rx-0/rps_cpus` are real and writable. Addresses come
from the documentation ranges and never leave the namespaces: the root namespace holds
an `unreachable` route for the management /29, so while a management link is down (a
test's fault) its address fails at once instead of following the default route out of
the machine. Nothing of the
machine's own ssh setup is used or touched: keys, config, known_hosts and pid files
live in the state directory, which `down` removes with everything else. The sessions'
shell reads no ~/.bashrc (sshd runs in a mount namespace where it is empty): a
developer machine's (pyenv's init, 236 ms here) is not a lab host's.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from napilab.harness.errors import HostError, NapilabError

DATA_IFACE = "data0"
MGMT_IFACE = "mgmt0"
SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class Node:
    name: str  # inventory host name: "a" or "b"
    netns: str
    data_address: str
    mgmt_root: str  # root-namespace end of the management veth
    mgmt_root_address: str
    mgmt_address: str


class Testbed:
    def __init__(self, prefix: str = "napilab", state_dir: str | Path | None = None,
                 block: int = 0) -> None:
        if len(prefix) > 11:
            raise NapilabError(f"testbed prefix {prefix!r} too long (interface names are "
                               "limited to 15 characters)")
        if block % 8 or not 0 <= block < 256:
            raise NapilabError(f"testbed block {block}: a multiple of 8 below 256")
        self.prefix = prefix
        self.state = Path(state_dir or f"/run/{prefix}-testbed")
        self.network = ipaddress.ip_network(f"198.51.100.{block}/29")
        m = [str(self.network[i]) for i in range(8)]
        self.nodes = (
            Node("a", f"{prefix}-a", "192.0.2.1", f"{prefix}-a-m", m[1], m[2]),
            Node("b", f"{prefix}-b", "192.0.2.2", f"{prefix}-b-m", m[5], m[6]),
        )

    @property
    def inventory_path(self) -> Path:
        return self.state / "inventory.yaml"

    # -- up --------------------------------------------------------------------------

    def up(self, *, ssh: bool = False) -> Path:
        if os.geteuid() != 0:
            raise NapilabError("the testbed needs root (network namespaces, veth, sysfs)")
        if self.exists():
            raise NapilabError(f"a testbed named {self.prefix!r} is already up",
                               hint=f"`napilab testbed down` first (state: {self.state})")
        self._check_addresses_free()
        try:
            self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._links()
            if ssh:
                self._sshd()
            self._write_inventory(ssh)
        except BaseException:
            self.down()
            raise
        return self.inventory_path

    def addresses_in_use(self) -> str | None:
        """The root namespace's route that overlaps this testbed's management /29, if
        any. Only the management range reaches the root namespace; the data range
        lives inside the two namespaces (the root namespace may use 192.0.2.0/24)."""
        for route in json.loads(run_here(["ip", "-j", "-4", "route", "show"]).stdout or "[]"):
            try:
                network = ipaddress.ip_network(route.get("dst", ""), strict=False)
            except ValueError:
                continue  # "default"
            if network.overlaps(self.network):
                return " ".join([*([route["type"]] if "type" in route else []), route["dst"],
                                 *(["dev", route["dev"]] if "dev" in route else [])])
        return None

    def _check_addresses_free(self) -> None:
        route = self.addresses_in_use()
        if route:
            raise NapilabError(f"the root namespace already routes {self.network} "
                               f"({route})", hint="another testbed or a lab network uses "
                               "that documentation range; take it down first")

    def _links(self) -> None:
        a, b = self.nodes
        # less specific than each link's /30: used only while a management link is down
        run_here(["ip", "route", "add", "unreachable", str(self.network)])
        for node in self.nodes:
            run_here(["ip", "netns", "add", node.netns])
        run_here(["ip", "link", "add", DATA_IFACE, "netns", a.netns, "type", "veth",
              "peer", "name", DATA_IFACE, "netns", b.netns])
        for node in self.nodes:
            ns = ["ip", "-n", node.netns]
            run_here([*ns, "link", "set", "lo", "up"])
            run_here([*ns, "addr", "add", f"{node.data_address}/24", "dev", DATA_IFACE])
            run_here([*ns, "link", "set", DATA_IFACE, "up"])
            run_here(["ip", "netns", "exec", node.netns, "ethtool", "-K", DATA_IFACE, "gro", "on"])
            run_here(["ip", "link", "add", node.mgmt_root, "type", "veth", "peer", "name",
                  MGMT_IFACE, "netns", node.netns])
            run_here(["ip", "addr", "add", f"{node.mgmt_root_address}/30", "dev", node.mgmt_root])
            run_here(["ip", "link", "set", node.mgmt_root, "up"])
            run_here([*ns, "addr", "add", f"{node.mgmt_address}/30", "dev", MGMT_IFACE])
            run_here([*ns, "link", "set", MGMT_IFACE, "up"])

    def _sshd(self) -> None:
        if not Path(SSHD).exists():
            raise NapilabError(f"{SSHD} not found", hint="apt-get install openssh-server")
        user_key = self.state / "id_ed25519"
        run_here(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "napilab-testbed",
              "-f", str(user_key)])
        (self.state / "authorized_keys").write_text(
            user_key.with_suffix(".pub").read_text())
        known: list[str] = []
        for node in self.nodes:
            home = self.state / node.name
            home.mkdir(mode=0o700)
            host_key = home / "ssh_host_ed25519_key"
            run_here(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node.netns,
                  "-f", str(host_key)])
            config = home / "sshd_config"
            config.write_text("\n".join([
                # The data address too, so that ProxyJump through the peer is testable.
                f"ListenAddress {node.mgmt_address}", f"ListenAddress {node.data_address}",
                "Port 22", f"HostKey {host_key}",
                f"PidFile {home / 'sshd.pid'}",
                f"AuthorizedKeysFile {self.state / 'authorized_keys'}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "PrintMotd no", "MaxSessions 64", "MaxStartups 64:30:128", "LogLevel ERROR",
                # a results store over SFTP (harness.stores.sftp) on a testbed host
                "Subsystem sftp internal-sftp",
            ]) + "\n")
            pub = host_key.with_suffix(".pub").read_text().split()
            known.append(f"{node.mgmt_address},{node.data_address} {pub[0]} {pub[1]}")
        (self.state / "known_hosts").write_text("\n".join(known) + "\n")
        with _privsep_lock():
            priv_sep = Path("/run/sshd")
            if not priv_sep.exists():
                priv_sep.mkdir(mode=0o755)
                (self.state / "created-run-sshd").touch()
            for node in self.nodes:
                home = self.state / node.name
                run_here(["ip", "netns", "exec", node.netns,
                          *self._own_mounts([SSHD, "-f", str(home / "sshd_config"), "-E",
                                             str(home / "sshd.log")])])
            self._wait_for_sshd()

    def _own_mounts(self, argv: list[str]) -> list[str]:
        """sshd started in a mount namespace of its own where root's ~/.bashrc is an
        empty file: bash, run by sshd for every session and every command channel,
        reads it (Debian's SSH_SOURCE_BASHRC), and this machine's (pyenv's init) took
        236 ms each time, which the testbed's hosts would otherwise charge to every
        trial's workload. There too tracefs is mounted, as a lab host's systemd mounts
        it at boot (`ip netns exec` gives the namespace a /sys of its own, where it is
        not): the trace collector's bpftrace reads its tracepoints' formats there. The
        machine's own file and mounts are not touched; the mounts are gone with sshd."""
        steps = ["[ -d /sys/kernel/tracing/events ] || "
                 "mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true"]
        rc = Path("~root/.bashrc").expanduser()
        if rc.is_file():
            empty = self.state / "empty-bashrc"
            empty.write_text("")
            steps.append(f"mount --bind {shlex.quote(str(empty))} {shlex.quote(str(rc))}")
        script = "; ".join(steps[:1]) + "".join(f"; {step} || exit 1" for step in steps[1:]) \
            + "; exec " + shlex.join(argv)
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]

    def _wait_for_sshd(self) -> None:
        deadline = time.time() + 10
        for node in self.nodes:
            while not (self.state / node.name / "sshd.pid").exists():
                if time.time() > deadline:
                    log = (self.state / node.name / "sshd.log")
                    detail = log.read_text() if log.exists() else ""
                    raise HostError(f"sshd in {node.netns} did not start: {detail.strip()}")
                time.sleep(0.02)

    def _write_inventory(self, ssh: bool) -> None:
        hosts = {}
        for node in self.nodes:
            entry: dict[str, object] = {
                "address": node.mgmt_address, "data_address": node.data_address,
                "iface": DATA_IFACE, "netns": node.netns, "user": "root",
            }
            if ssh:
                entry["key"] = str(self.state / "id_ed25519")
                entry["known_hosts"] = str(self.state / "known_hosts")
            hosts[node.name] = entry
        doc = {"transport": "ssh" if ssh else "local", "hosts": hosts}
        header = (f"# written by `napilab testbed up` for testbed {self.prefix!r}; removed by "
                  "`napilab testbed down`.\n# Both transports work: run with --transport local "
                  "or (after `up --ssh`) --transport ssh.\n")
        self.inventory_path.write_text(header + yaml.safe_dump(doc, sort_keys=False))
        (self.state / "state.json").write_text(json.dumps({"ssh": ssh, "prefix": self.prefix}))

    # -- down / status -----------------------------------------------------------------

    def exists(self) -> bool:
        names = set(_netns_list())
        return any(n.netns in names for n in self.nodes) or self.state.exists()

    def down(self) -> None:
        """Remove everything `up` made. Idempotent; never fails on what is already gone."""
        for node in self.nodes:
            pidfile = self.state / node.name / "sshd.pid"
            _kill_pidfile(pidfile)
            if node.netns in _netns_list():
                _kill_netns_processes(node.netns)
                run_here(["ip", "netns", "del", node.netns], check=False)
            if Path(f"/sys/class/net/{node.mgmt_root}").exists():
                run_here(["ip", "link", "del", node.mgmt_root], check=False)
        run_here(["ip", "route", "del", "unreachable", str(self.network)], check=False)
        if (self.state / "created-run-sshd").exists():
            with _privsep_lock():
                other = self._other_sshd()
                if other is not None:  # still needed there: that testbed removes it
                    with contextlib.suppress(OSError):
                        (other / "created-run-sshd").touch()
                else:
                    with contextlib.suppress(OSError):
                        Path("/run/sshd").rmdir()
        shutil.rmtree(self.state, ignore_errors=True)

    def _other_sshd(self) -> Path | None:
        """The state directory of another testbed whose sshd runs (it needs /run/sshd,
        sshd's privilege-separation directory)."""
        for pidfile in sorted(Path("/run").glob("*-testbed/*/sshd.pid")):
            state = pidfile.parent.parent
            if state != self.state and (pid := read_pid(pidfile)) and alive(pid):
                return state
        return None

    def status(self) -> dict[str, object]:
        names = set(_netns_list())
        nodes = {}
        for node in self.nodes:
            pidfile = self.state / node.name / "sshd.pid"
            pid = read_pid(pidfile)
            nodes[node.name] = {
                "netns": node.netns, "present": node.netns in names,
                "data_address": node.data_address, "mgmt_address": node.mgmt_address,
                "sshd_pid": pid if pid and alive(pid) else None,
            }
        return {"up": all(n["present"] for n in nodes.values()),
                "inventory": str(self.inventory_path) if self.inventory_path.exists() else None,
                "nodes": nodes}


MAX_PAIRS = 8  # /29 blocks a `testbed up --pairs N` takes, from its first one


def pair_testbeds(count: int, prefix: str = "napilab", block: int = 0) -> list[Testbed]:
    """`testbed up --pairs N`: N testbeds side by side, PREFIX, PREFIX2, ... on the
    management /29s from `block` on."""
    if not 1 <= count <= MAX_PAIRS:
        raise NapilabError(f"--pairs {count}: 1 to {MAX_PAIRS}")
    return [Testbed(prefix if i == 0 else f"{prefix}{i + 1}", block=block + 8 * i)
            for i in range(count)]


def up_pairs(beds: list[Testbed], *, ssh: bool) -> Path:
    """Bring every pair up (all of them down again if one fails) and write one inventory,
    the first pair's, that holds every pair's hosts (a, b; a2, b2; ...) and binds them
    as replicas pair1, pair2, ... of the host names a and b."""
    try:
        for bed in beds:
            bed.up(ssh=ssh)
        if len(beds) == 1:
            return beds[0].inventory_path
        hosts: dict[str, object] = {}
        replicas: dict[str, dict[str, str]] = {}
        for i, bed in enumerate(beds, 1):
            doc = yaml.safe_load(bed.inventory_path.read_text())
            suffix = "" if i == 1 else str(i)
            replicas[f"pair{i}"] = {}
            for name, entry in doc["hosts"].items():
                hosts[name + suffix] = entry
                replicas[f"pair{i}"][name] = name + suffix
        doc = {"transport": "ssh" if ssh else "local", "hosts": hosts, "replicas": replicas}
        header = (f"# written by `napilab testbed up --pairs {len(beds)}`: the hosts of "
                  f"testbeds {[b.prefix for b in beds]}, each pair a replica; removed by "
                  "`napilab testbed down`.\n")
        beds[0].inventory_path.write_text(header + yaml.safe_dump(doc, sort_keys=False))
    except BaseException:
        for bed in beds:
            bed.down()
        raise
    return beds[0].inventory_path


def run_here(argv: list[str], *, check: bool = True, what: str = "testbed",
         timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """A command of a testbed's set-up on this machine (the VM testbed's too)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=timeout)
    except FileNotFoundError:
        raise NapilabError(f"{argv[0]} not found", hint="install iproute2, ethtool and "
                           "openssh-server (make demo does it as root)") from None
    if check and proc.returncode != 0:
        raise HostError(f"{what}: `{' '.join(argv)}` exited {proc.returncode}: "
                        f"{proc.stderr.strip()}")
    return proc



def _netns_list() -> list[str]:
    proc = run_here(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    """The process runs: it exists and is not a zombie (sshd daemonizes, so its exit is
    reaped by PID 1, which in a container may take seconds to do it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not zombie(pid)


def names(pid: int, needle: str | Path) -> bool:
    """PID's command line names `needle` (a testbed's state directory): a pid read from
    a file is killed only then, since after its process died the number may be another
    process's (a pid is reused; sshd's and vng's command lines name their state)."""
    try:
        return str(needle).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def zombie(pid: int) -> bool:
    """PID has exited and waits to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].startswith("Z")


def _kill_pidfile(path: Path) -> None:
    """The process whose pid `path` holds, if it is still the one started there (its
    command line names the pidfile's directory: `names`)."""
    pid = read_pid(path)
    if pid is not None and alive(pid) and names(pid, path.parent):
        _terminate([pid])


def _kill_netns_processes(netns: str, rounds: int = 5) -> None:
    """Every process in the namespace ended, listed again until none is left: an sshd
    session forked after a listing (a connection accepted as its listener was told to
    stop) outlived its testbed once, holding the deleted namespace alive."""
    for _ in range(rounds):
        proc = run_here(["ip", "netns", "pids", netns], check=False)
        pids = [int(p) for p in proc.stdout.split() if p.isdigit()]
        if not pids:
            return
        _terminate(pids)


def _terminate(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 3
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _privsep_lock() -> Iterator[None]:
    """Held while a testbed makes /run/sshd (sshd's privilege-separation directory) and
    starts its sshds until their pid files are there, and while one that made it looks
    for another testbed's live sshd before removing it: without it, a testbed going down
    removed the directory between another's check and its sshd's start, and that sshd
    exited 255 (a clean-clone `make test`, three testbeds side by side). An flock on
    /run itself: nothing is left on the machine."""
    fd = os.open("/run", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
