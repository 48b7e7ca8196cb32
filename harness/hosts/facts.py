"""Host facts recorded in the manifest: what a comparison must know to be honest
(kernel, command line, CPUs, NIC driver and firmware, irqbalance, USER_HZ, and the
version of every tool the run uses on the host)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from napilab.harness.grammar import cpus
from napilab.harness.knobs.backend import read_present
from napilab.harness.store.manifest import TCG
from napilab.harness.transport.transport import Transport
from napilab.runners import registry
from napilab.runners.collectors.collector import HostInfo

FILES = {
    "boot_id": "/proc/sys/kernel/random/boot_id",
    "kernel_release": "/proc/sys/kernel/osrelease",
    "kernel_version": "/proc/sys/kernel/version",
    "cmdline": "/proc/cmdline",
    "online_cpus": "/sys/devices/system/cpu/online",
    "cpuinfo": "/proc/cpuinfo",
    "sys_vendor": "/sys/class/dmi/id/sys_vendor",
    "clocksources": "/sys/devices/system/clocksource/clocksource0/available_clocksource",
    "protocols": "/proc/net/protocols",
}


def version_argv() -> dict[str, tuple[str, ...] | None]:
    """program -> the argv whose first line is its version (iperf 3.12 (cJSON 1.7.15);
    sockperf, version 3.7-no.git; Netperf version 2.7.0; ping from iputils 20221126;
    ethtool version 6.1): each tool's class says how to ask (runners.registry); ethtool
    is napilab's own."""
    return {**registry.version_argv(), "ethtool": ("ethtool", "--version")}


# A program with no version flag (neper): the binary on PATH and its sha256 stand for it.
_SHA256 = ["sh", "-c", 'p=$(command -v "$1") || exit 127; sha256sum -- "$p"', "napilab-sha"]
# The programs no tool knows (a `command` argv's): each one's path, then one `dpkg -S` for
# all of them (it reads every package's file list: 5-7 s a call in a TCG guest), their
# packages' versions, and the sha256 of the ones no package owns. Sections for packaged().
_PACKAGED = ["sh", "-c", r"""n=$#
for b do
  if p=$(command -v "$b"); then
    r=$(readlink -f "$p"); printf '%s\t%s\t%s\n' "$b" "$p" "$r"; set -- "$@" "$r"
  else printf '%s\n' "$b"; fi
done
shift "$n"
[ "$#" -gt 0 ] || exit 0
owners=$(dpkg -S "$@" 2>/dev/null)
echo "== owners"; printf '%s\n' "$owners"
pkgs=$(printf '%s\n' "$owners" | grep -v '^diversion by ' |
  sed -n 's/^\([^:, ]\{1,\}\).*: .*/\1/p' | sort -u)
echo "== versions"; [ -z "$pkgs" ] || dpkg-query -W -f='${Package}\t${Version}\n' $pkgs 2>/dev/null
echo "== sha256"
for r do
  case "$owners" in *": $r"|*": $r
"*) ;; *) printf '%s\t%s\n' "$(sha256sum -- "$r" | cut -d' ' -f1)" "$r" ;; esac
done""", "napilab-version"]


def packaged(output: str) -> dict[str, str]:
    """{program: version line} from _PACKAGED's output: `PACKAGE VERSION PATH` for a
    program a Debian package owns, `PATH sha256:HEX` for one none does, `absent`."""
    sections: dict[str, list[str]] = {"which": []}
    current = sections["which"]
    for line in output.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        elif line:
            current.append(line)
    owner: dict[str, str] = {}
    for line in sections.get("owners", []):
        names, _, path = line.partition(": ")
        if path and not line.startswith("diversion by "):
            owner.setdefault(path, names.split(", ")[0].split(":")[0])
    version: dict[str, str] = {}
    for line in sections.get("versions", []):
        name, _, ver = line.partition("\t")
        version.setdefault(name, ver)
    digest = {path: hexed for hexed, _, path in
              (line.partition("\t") for line in sections.get("sha256", []))}
    out = {}
    for line in sections["which"]:
        program, _, rest = line.partition("\t")
        path, _, real = rest.partition("\t")
        if not path:
            out[program] = "absent"
        elif real in owner:
            out[program] = f"{owner[real]} {version.get(owner[real], '')} {path}"
        else:
            out[program] = f"{path} sha256:{digest.get(real, '?')}"
    return out


# argv prefixes that run another program: their options, then the program
_WRAPPERS = {"timeout": 1, "taskset": 1, "env": 0, "chrt": 1, "nice": 0, "stdbuf": 0}


def workload_binaries(tool: str, side: str,
                      args: Mapping[str, object] | None = None) -> tuple[str, ...]:
    """The programs a workload tool runs on its `side` (client or server): the tool's own,
    and the program a `command` argv (`argv`, `server_argv`) names, past `timeout`,
    `taskset` and such wrappers (its version: its Debian package's, else its sha256)."""
    named = [argv_program(args.get(key)) for key in ("argv", "server_argv")] if args else []
    return (*registry.TOOLS[tool].programs(side), *(p for p in named if p))


def af_xdp_program(args: Mapping[str, object]) -> str | None:
    """The program of a `command` argv (`argv`, `server_argv`) that opens AF_XDP sockets:
    xdpsock, or one given an AF_XDP vdev (dpdk-testpmd --vdev=net_af_xdp0,...)."""
    for key in ("argv", "server_argv"):
        words = _words(args.get(key))
        program = argv_program(words)
        if program and (program.rsplit("/", 1)[-1] == "xdpsock"
                        or any("net_af_xdp" in w for w in words)):
            return program
    return None


def _words(argv: object) -> list[str]:
    """A `command` argv as words: a list's items, or a string split on blanks."""
    if isinstance(argv, str):
        return argv.split()
    return [str(w) for w in argv] if isinstance(argv, list) else []


def argv_program(argv: object) -> str | None:
    """`dpdk-testpmd` of [timeout, -s, INT, 20, dpdk-testpmd, ...]; None if not a list."""
    words = _words(argv)
    i = 0
    while i < len(words):
        word = words[i]
        positional = _WRAPPERS.get(word.rsplit("/", 1)[-1])
        if positional is None:
            return word if "$" not in word and "=" not in word else None
        i += 1
        while i < len(words) and (words[i].startswith("-") or "=" in words[i]):
            i += 2 if words[i] in ("-s", "-k", "--signal", "--kill-after") else 1
        i += positional
    return None


def tool_versions(transport: Transport, binaries: Iterable[str]) -> dict[str, str]:
    """{binary: version line}, `absent` for a program the host does not have, and for
    neper `PATH sha256:HEX`; ethtool is always read (napilab runs it on every host)."""
    out = {}
    known = version_argv()
    wanted = sorted({*binaries, "ethtool"})
    unknown = [b for b in wanted if b not in known]
    if unknown:
        result = transport.run([*_PACKAGED, *unknown], check=False)
        found = packaged(result.stdout) if result.exit_code == 0 else {}
        out.update({b: found.get(b) or _failed(result.exit_code, result.stderr)
                    for b in unknown})
    for binary in (b for b in wanted if b in known):
        argv = known[binary]
        if argv is None:
            result = transport.run([*_SHA256, binary], check=False)
            digest, _, path = result.stdout.strip().partition("  ")
            out[binary] = (f"{path} sha256:{digest}" if result.exit_code == 0 and path
                           else _failed(result.exit_code, result.stderr))
            continue
        result = transport.run(list(argv), check=False)
        lines = [ln.strip() for ln in (result.stdout or result.stderr).splitlines()
                 if ln.strip()]
        out[binary] = lines[0][:200] if result.exit_code == 0 and lines else _failed(
            result.exit_code, result.stderr)
    return dict(sorted(out.items()))


def _failed(exit_code: int, stderr: str) -> str:
    if exit_code == 127:
        return "absent"
    return f"error: exit {exit_code}: {stderr.strip()[:160]}"


def af_xdp(protocols: str) -> str:
    """`yes` when /proc/net/protocols lists XDP (AF_XDP's proto registers so), else `no`."""
    return "yes" if any(line.split()[:1] == ["XDP"] for line in protocols.splitlines()) else "no"


def gather(transport: Transport, ifaces: Iterable[str] = (),
           binaries: Iterable[str] | None = None) -> dict[str, Any]:
    files, _ = read_present(transport, list(FILES.values()))
    facts: dict[str, Any] = {}
    for name, path in FILES.items():
        if name not in ("cpuinfo", "sys_vendor", "clocksources", "protocols") and path in files:
            facts[name] = files[path].strip()
    facts["cpu_model"] = _cpu_model(files.get(FILES["cpuinfo"], ""))
    facts["virtualization"] = virtualization(
        files.get(FILES["cpuinfo"], ""), files.get(FILES["sys_vendor"], "").strip(),
        files.get(FILES["clocksources"], "").split())
    if FILES["protocols"] in files:
        facts["af_xdp"] = af_xdp(files[FILES["protocols"]])
    hz = transport.run(["getconf", "CLK_TCK"], check=False)
    facts["user_hz"] = int(hz.stdout) if hz.exit_code == 0 and hz.stdout.strip().isdigit() else 100
    irqbalance = transport.run(["pgrep", "-x", "irqbalance"], check=False)
    facts["irqbalance"] = "running" if irqbalance.exit_code == 0 else "not running"
    facts["nics"] = {iface: _driver(transport, iface) for iface in sorted(set(ifaces))}
    if binaries is not None:
        facts["tool_versions"] = tool_versions(transport, binaries)
    return facts


def identity(transport: Transport) -> dict[str, str]:
    """Boot id, kernel and command line: read again at the end of a run to flag a host
    that rebooted or changed kernel mid-run."""
    keys = ("boot_id", "kernel_release", "kernel_version", "cmdline")
    files, _ = read_present(transport, [FILES[k] for k in keys])
    return {k: files[FILES[k]].strip() for k in keys if FILES[k] in files}


def virtualization(cpuinfo: str, vendor: str, clocksources: list[str]) -> str:
    """`none` on bare metal; `KVM` (with its machine vendor) when the kvm-clock is
    there; `QEMU TCG, emulated` for a QEMU machine without KVM, whose every instruction
    is emulated (counters and settings are real, timings are not representative)."""
    flags = next((line.partition(":")[2].split() for line in cpuinfo.splitlines()
                  if line.startswith("flags")), [])
    if "hypervisor" not in flags:
        return "none"
    if "kvm-clock" in clocksources:
        return f"KVM ({vendor})" if vendor else "KVM"
    if vendor == "QEMU":
        return TCG
    return f"virtual machine ({vendor or 'unknown'})"


def _cpu_model(cpuinfo: str) -> str | None:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "CPU part"):
            return value.strip()
    return None


def _driver(transport: Transport, iface: str) -> dict[str, str]:
    result = transport.run(["ethtool", "-i", iface], check=False)
    if result.exit_code != 0:
        return {"error": (result.stderr.strip() or f"ethtool exit {result.exit_code}")[:200]}
    info = {}
    for line in result.stdout.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("driver", "version", "firmware-version", "bus-info"):
            info[key.strip()] = value.strip()
    return info


def host_info(facts: dict[str, Any]) -> HostInfo:
    online = facts.get("online_cpus")
    try:
        online_cpus = cpus.parse_list(online) if isinstance(online, str) else None
    except cpus.CpuListError:
        online_cpus = None
    return HostInfo(user_hz=int(facts.get("user_hz", 100)), online_cpus=online_cpus)
