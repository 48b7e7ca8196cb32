"""A corpus of malformed profiles and inventories. Each must exit 2 with the file, the
line marked `# <-` in the case and the key path in the message, and run nothing.

A case is the text of a profile (or an inventory: `INV:` first line) in which one line
carries the marker; the message must name that line and contain the given fragment.
One mistake is one error: the marked file is named exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.transport import connect
from tests.cli import run_cli

BASE = """\
name: corpus
hosts:
  client: {host: a}
  server: {host: b, iface: eth0}
setup:
  server:
    netdev: {eth0: {gro_flush_timeout: 1000}}
workload:
  tool: ping
  duration: 2
  client: {role: client, cpus: "0"}
  server: {role: server}
collect:
  softnet_stat: {roles: [server]}
variants:
  a: {}
  b: {setup: {server: {sysctl: {net.core.busy_read: 50}}}}
"""
INVENTORY = """\
hosts:
  a: {address: 198.51.100.2, cpus: 4}
  b: {address: 198.51.100.6, cpus: 4}
"""


def case(old: str, new: str) -> str:
    """BASE with `old` replaced by `new`; a `# <-` in `new` marks the end of the line
    it lands on (so a marker never comments out the rest of a flow mapping)."""
    assert old in BASE, old
    marked = "# <-" in new
    new = new.replace("  # <-", "")
    text = BASE.replace(old, new, 1)
    if not marked:
        return text
    start = text.index(new) + len(new)
    end = text.index("\n", start)
    return text[:end] + "  # <-" + text[end:]


CASES: dict[str, tuple[str, str]] = {
    # structure and YAML
    "yaml-tab": (case("name: corpus", "name: corpus\n\tbad: tab  # <-"), "YAML syntax error"),
    # YAML reports an unclosed mapping where it notices: the next line
    "yaml-unclosed-flow": (case('  client: {role: client, cpus: "0"}\n  server: {role: server}',
                                '  client: {role: client, cpus: "0"\n  server: {role: server}'
                                '  # <-'), "YAML syntax error"),
    "yaml-duplicate-key": (case("  duration: 2", "  duration: 2\n  duration: 3  # <-"),
                           "duplicate key"),
    "top-unknown": (case("name: corpus", "name: corpus\nrepeats: 3  # <-"), "repeats: unknown"),
    "top-not-mapping": ("- just  # <-\n- a list\n", "a profile is a YAML mapping"),
    "missing-workload": ("name: corpus  # <-\n" + BASE.split("workload:")[0].split("\n", 1)[1]
                         + "variants: {a: {}}\n", "workload: required key is missing"),
    # hosts
    "hosts-unknown-key": (case("  server: {host: b, iface: eth0}",
                               "  server: {host: b, ifname: eth0}  # <-"), "hosts.server.ifname"),
    "hosts-bad-iface": (case("iface: eth0}", "iface: 'eth0;x'}  # <-"), "hosts.server.iface"),
    "hosts-no-host": (case("  client: {host: a}", "  client: {iface: eth1}  # <-"),
                      "hosts.client.host: required"),
    "hosts-not-in-inventory": (case("  client: {host: a}", "  client: {host: zz}  # <-"),
                               "hosts.client.host: no host 'zz'"),
    # setup
    "setup-unknown-role": (BASE.replace("  server:\n    netdev", "  sever:  # <-\n    netdev"),
                           "setup.sever: no such role"),
    "setup-unknown-kind": (case("    netdev: {eth0", "    netdevs: {eth0  # <-"),
                           "setup.server.netdevs: unknown key"),
    "netdev-unknown-attr": (case("{gro_flush_timeout: 1000}", "{gro_flush_timout: 1000}  # <-"),
                            "did you mean 'gro_flush_timeout'"),
    "netdev-negative": (case("gro_flush_timeout: 1000", "gro_flush_timeout: -1  # <-"),
                        "setup.server.netdev.eth0.gro_flush_timeout: -1 is out of range"),
    "netdev-threaded-2": (case("{gro_flush_timeout: 1000}", "{threaded: 2}  # <-"),
                          "netdev.eth0.threaded: expected one of 0, 1"),
    "netdev-busy-poll-sysfs": (case("{gro_flush_timeout: 1000}", "{threaded: busy-poll}  # <-"),
                               "set per NAPI through netlink"),
    "netdev-bad-iface": (case("netdev: {eth0:", "netdev: {'eth 0':  # <-"),
                         "is not an interface name"),
    "defer-too-big": (case("gro_flush_timeout: 1000", "napi_defer_hard_irqs: 4294967295  # <-"),
                      "out of range 0..2147483647"),
    "sysctl-bad-name": (case("net.core.busy_read: 50", "'net.core.busy_read;id': 50  # <-"),
                        "is not a sysctl name"),
    "sysctl-bad-value": (case("net.core.busy_read: 50", "net.core.busy_read: '$(id)'  # <-"),
                         "a sysctl value is an integer or a word"),
    "rps-bad-cpus": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                          "    rps: {eth0: '1-'}  # <-"),
                     "setup.server.rps.eth0: '1-' is not a CPU list"),
    "rps-bad-queue": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                           "    rps: {eth0: {cpus: '1', queues: [rx0]}}  # <-"),
                      "is not a queue name"),
    "napi-unknown-attr": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                               "    napi: {eth0: {threads: enabled}}  # <-"),
                          "setup.server.napi.eth0.threads: unknown key"),
    "napi-bad-threaded": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                               "    napi: {eth0: {threaded: busypoll}}  # <-"),
                          "expected one of disabled, enabled, busy-poll"),
    "ethtool-bad-group": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                               "    ethtool: {eth0: {coalescing: {rx-usecs: 0}}}  # <-"),
                          "did you mean 'coalesce'"),
    "ethtool-bad-feature": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                                 "    ethtool: {eth0: {features: {gro: maybe}}}  # <-"),
                            "expected on or off"),
    "irq-affinity-empty": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                                "    irq_affinity: {eth0: none}  # <-"),
                           "an IRQ needs at least one CPU"),
    "napi-threads-policy": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                                 "    napi_threads: {eth0: {policy: realtime}}  # <-"),
                            "'realtime' is not one of"),
    "napi-threads-priority": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                                   "    napi_threads: {eth0: {policy: fifo, priority: 200}}  # <-"),
                              "priority: 200 is out of range"),
    "irqbalance-bad": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                            "    irqbalance: off  # <-"), "expected stopped or running"),
    "cpus-beyond-host": (case("    netdev: {eth0: {gro_flush_timeout: 1000}}",
                              "    rps: {eth0: '6'}"), "CPU 6 does not exist on b"),
    # workload
    "workload-unknown-tool": (case("  tool: ping", "  tool: pingg  # <-"),
                              "did you mean 'ping'"),
    "workload-duration-text": (case("  duration: 2", "  duration: two  # <-"),
                               "workload.duration: expected"),
    "workload-duration-zero": (case("  duration: 2", "  duration: 0  # <-"),
                               "workload.duration: 0 is out of range"),
    "workload-unknown-role": (case("  client: {role: client,", "  client: {role: clinet,  # <-"),
                              "did you mean 'client'"),
    "workload-bad-arg": (case('  client: {role: client, cpus: "0"}',
                              '  client: {role: client, args: {flood: yes}}  # <-'),
                         "workload.client.args.flood: unknown argument"),
    "workload-arg-type": (case('  client: {role: client, cpus: "0"}',
                               '  client: {role: client, args: {size: big}}  # <-'),
                          "workload.client.args.size: expected int"),
    "workload-bad-env": (case('  client: {role: client, cpus: "0"}',
                              '  client: {role: client, env: {1BAD: x}}  # <-'),
                         "not a valid environment variable name"),
    "workload-cpus-range": (case('cpus: "0"}', 'cpus: "3-1"}  # <-'), "range goes backwards"),
    "workload-cpus-host": (case('cpus: "0"}', 'cpus: "0-7"}'), "CPU 4 does not exist on a"),
    "workload-warmup-negative": (case("  duration: 2", "  duration: 2\n  warmup: -1  # <-"),
                                 "workload.warmup: -1 is out of range"),
    # collect
    "collect-unknown": (case("  softnet_stat: {roles: [server]}",
                             "  sofnet_stat: {roles: [server]}  # <-"),
                        "did you mean 'softnet_stat'"),
    "collect-bad-role": (case("  softnet_stat: {roles: [server]}",
                              "  softnet_stat: {roles: [srv]}  # <-"), "no such role 'srv'"),
    "collect-bad-regex": (case("  softnet_stat: {roles: [server]}",
                               "  interrupts: {irqs: '(eth0'}  # <-"), "bad regex"),
    "collect-dmesg-patterns": (case("  softnet_stat: {roles: [server]}",
                                    "  dmesg: {patterns: [WARNING]}  # <-"),
                               "expected a mapping of metric name -> regex"),
    "collect-kprobe-function": (case("  softnet_stat: {roles: [server]}",
                                     "  kprobes: {functions: ['skb free']}  # <-"),
                                "expected a list of kernel function names"),
    "collect-netstat-protocol": (case("  softnet_stat: {roles: [server]}",
                                      "  netstat: {names: [tcpext.BusyPollRxPackets]}  # <-"),
                                 "did you mean 'TcpExt'"),
    "collect-netstat-names": (case("  softnet_stat: {roles: [server]}",
                                   "  netstat: {names: {TcpExt: all}}  # <-"),
                              "expected a list of `Protocol` or `Protocol.Field` names"),
    # variants, matrix and top-level values
    "variant-unknown-field": (case("  a: {}", "  a: {setpu: {}}  # <-"),
                              "variants.a.setpu: unknown key"),
    "variant-bad-name": (case("  a: {}", "  'a b': {}  # <-"), "variant name 'a b'"),
    "baseline-unknown": (BASE + "baseline: c  # <-\n", "baseline: no variant named 'c'"),
    "repeat-zero": (BASE + "repeat: 0  # <-\n", "repeat: 0 is out of range"),
    "order-typo": (BASE + "order: interleave  # <-\n", "did you mean 'interleaved'"),
    "on-mismatch-bad": (BASE + "on_mismatch: ignore  # <-\n", "on_mismatch: 'ignore'"),
    "metrics-bad-percent": (BASE + "metrics:\n  rtt_avg: {max_regression: lots}  # <-\n",
                            "expected a percentage"),
    "matrix-unused": (BASE + "matrix:\n  budget: [8, 64]  # <-\n",
                      "matrix.budget: parameter never used"),
    "matrix-not-list": (BASE.replace("gro_flush_timeout: 1000", "gro_flush_timeout: '${b}'")
                        + "matrix:\n  b: 8  # <-\n", "expected a non-empty list"),
    # one mistake, one error: at the misspelt placeholder, not also "parameter never
    # used" at the matrix and "expected an integer" at the value
    "placeholder-unknown": (case("gro_flush_timeout: 1000",
                                 "gro_flush_timeout: '${budgte}'  # <-")
                            + "matrix:\n  budget: [8]\n",
                            "setup.server.netdev.eth0.gro_flush_timeout: unknown placeholder "
                            "${budgte}; matrix parameters are ['budget']; did you mean "
                            "'budget'?"),
    "table-bad-role": (BASE + "report:\n  table:\n    - {source: ping, metric: received, "
                       "role: x}  # <-\n", "report.table[0].role: no such role"),
    # inventories
    "inv-unknown-key": ("INV:\nhosts:\n  a: {address: 198.51.100.2, prot: 22}  # <-\n",
                        "did you mean 'port'"),
    "inv-bad-port": ("INV:\nhosts:\n  a: {address: 198.51.100.2, port: 70000}  # <-\n",
                     "hosts.a.port: 70000 is out of range"),
    "inv-bad-address": ("INV:\nhosts:\n  a: {address: 'a;b'}  # <-\n",
                        "hosts.a.address: 'a;b' is not an IP address"),
    "inv-bad-policy": ("INV:\nhost_key_policy: yolo  # <-\nhosts:\n  a: {}\n",
                       "host_key_policy: 'yolo' is not one of"),
    "inv-no-hosts": ("INV:\ntransport: ssh\nhosts: {}  # <-\n", "hosts: no hosts defined"),
    "inv-ansible-bad-port": ("INV:\nall:\n  hosts:\n    a: {ansible_port: x}  # <-\n",
                             "all.hosts.a.ansible_port: expected an integer"),
    "inv-ansible-become": ("INV:\nall:\n  hosts:\n    a:\n      ansible_become: true\n"
                           "      ansible_become_method: su  # <-\n",
                           "napilab supports sudo"),
}


@pytest.fixture(autouse=True)
def tripwire(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a transport was opened for bad input")

    for name in ("transport_for", "LocalTransport", "SSHTransport"):
        monkeypatch.setattr(connect, name, refuse)


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, fragment = CASES[name]
    profile, inventory = tmp_path / "p.yaml", tmp_path / "inv.yaml"
    if text.startswith("INV:\n"):
        profile.write_text(BASE)
        inventory.write_text(text.removeprefix("INV:\n"))
        marked = inventory
    else:
        profile.write_text(text)
        inventory.write_text(INVENTORY)
        marked = profile
    code, _, err = run_cli(capsys, "run", str(profile), "-i", str(inventory), "-o",
                           str(tmp_path / "out"))
    assert code == 2, err
    assert fragment in err, err
    lines = [i for i, line in enumerate(marked.read_text().splitlines(), 1) if "# <-" in line]
    if lines:
        assert f"{marked}:{lines[0]}:" in err, err
    else:
        assert str(marked) in err, err
    assert err.count(f"{marked}:") == 1, err  # one error, not one per variant or cascade
    assert not (tmp_path / "out").exists()


def test_corpus_size() -> None:
    assert len(CASES) >= 40
