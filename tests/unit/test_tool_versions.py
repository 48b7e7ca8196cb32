"""Tool versions in the host facts: which programs a run uses on each host, what their
version commands print (real first lines, from this machine's Debian packages and
netperf 2.7.0's `-V`), neper's path and sha256, a missing program, and the Markdown
hosts table that shows them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from napilab.harness.hosts import facts
from napilab.harness.inventory.inventory import Host
from napilab.harness.store.manifest import Manifest
from napilab.harness.transport.transport import CommandResult
from napilab.reports.formats import run_facts

OUTPUTS = {
    "iperf3": "iperf 3.12 (cJSON 1.7.15)\nLinux vm 6.18.44-fc-v657 #1 SMP x86_64\n",
    "sockperf": "sockperf, version 3.7-no.git\n   compiled 2021-08-23 12:14:23\n",
    "ping": "ping from iputils 20221126\nlibcap: yes, IDN: yes\n",
    "ethtool": "ethtool version 6.1\n",
    "netperf": "Netperf version 2.7.0\n",
}
SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


class VersionHost:
    """Answers the version commands only; anything else fails the test."""

    def __init__(self, installed: Mapping[str, str]) -> None:
        self.host = Host(name="h", transport="local")
        self.installed = installed
        self.log: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        self.log.append(tuple(argv))
        if argv[:1] == ["sh"] and argv[3] == "napilab-sha":
            binary = argv[4]
            code, out = (0, f"{SHA}  /usr/local/bin/{binary}\n") if binary in \
                self.installed else (127, "")
        else:
            assert tuple(argv) == facts.version_argv()[argv[0]], argv
            code, out = (0, self.installed[argv[0]]) if argv[0] in self.installed else (127, "")
        return CommandResult("h", tuple(argv), code, out, "" if code == 0 else
                             f"sh: {argv[0]}: not found", time.time(), 0.0)


def test_each_side_records_what_it_runs() -> None:
    assert facts.workload_binaries("neper.tcp_rr", "server") == ("tcp_rr",)
    assert facts.workload_binaries("netperf.UDP_RR", "client") == ("netperf",)
    assert facts.workload_binaries("netperf.UDP_RR", "server") == ("netserver",)
    assert facts.workload_binaries("sockperf.ping-pong", "server") == ("sockperf",)
    assert facts.workload_binaries("ping", "client") == ("ping",)
    assert facts.workload_binaries("ping", "server") == ()
    assert facts.workload_binaries("command", "client") == ()


def test_versions_first_lines_neper_sha256_and_absent() -> None:
    host = VersionHost({**OUTPUTS, "tcp_rr": ""})
    got = facts.tool_versions(host, ["iperf3", "sockperf", "ping", "netperf", "tcp_rr",
                                      "netserver"])  # type: ignore[arg-type]
    assert got == {
        "ethtool": "ethtool version 6.1",
        "iperf3": "iperf 3.12 (cJSON 1.7.15)",
        "netperf": "Netperf version 2.7.0",
        "netserver": "absent",
        "ping": "ping from iputils 20221126",
        "sockperf": "sockperf, version 3.7-no.git",
        "tcp_rr": f"/usr/local/bin/tcp_rr sha256:{SHA}",
    }


def test_hosts_rows_carry_the_versions() -> None:
    manifest = Manifest.from_json({"host_facts": {"a": {
        "kernel_release": "6.18", "tool_versions": {
            "ethtool": "ethtool version 6.1", "ping": "ping from iputils 20221126"}}}})
    (row,) = run_facts.hosts(manifest)
    assert row.tools == (("ethtool", "ethtool version 6.1"),
                         ("ping", "ping from iputils 20221126"))


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (a Debian host)")
def test_programs_no_tool_knows_in_one_dpkg_search(tmp_path: Path) -> None:
    """The script itself, on this machine: coreutils' timeout by its package, a program
    no package owns by its sha256 (through a symlink: the path stays the one on PATH),
    a missing one absent; one command for all of them."""
    script = tmp_path / "real-tool"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "my-tool").symlink_to(script)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run([*facts._PACKAGED, "timeout", "my-tool", "no-such-tool-napilab"],
                          capture_output=True, text=True, env=env, check=True)
    got = facts.packaged(done.stdout)
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "coreutils"],
                             capture_output=True, text=True, check=True).stdout
    timeout = shutil.which("timeout")
    assert got["timeout"] == f"coreutils {version} {timeout}"
    digest = subprocess.run(["sha256sum", str(script)], capture_output=True, text=True,
                            check=True).stdout.split()[0]
    assert got["my-tool"] == f"{tmp_path / 'bin' / 'my-tool'} sha256:{digest}"
    assert got["no-such-tool-napilab"] == "absent"
    assert list(got) == ["timeout", "my-tool", "no-such-tool-napilab"]


def test_a_diverted_or_shared_file_names_its_first_package() -> None:
    """dpkg -S's other line shapes: several owners, an architecture, a diversion."""
    output = "\n".join([
        "a\t/usr/bin/a\t/usr/bin/a", "b\t/usr/bin/b\t/usr/lib/b.real", "gone",
        "== owners", "diversion by dash from: /usr/bin/a", "pkg-one, pkg-two: /usr/bin/a",
        "libthing:amd64: /usr/lib/b.real",
        "== versions", "pkg-one\t1.0-1", "libthing\t2.3", "== sha256", ""])
    assert facts.packaged(output) == {"a": "pkg-one 1.0-1 /usr/bin/a",
                                      "b": "libthing 2.3 /usr/bin/b", "gone": "absent"}
