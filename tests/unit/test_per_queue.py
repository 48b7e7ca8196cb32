"""Per-queue addressing (harness.knobs.per_queue, kinds/queue_map.py): the grammar a
profile writes (queues, cpus, spread, map, rxqs) into settings, its errors at the
user's line, and the host side resolved on captured files of a 7.2 virtio-net guest
(tests/data/queues/virtio-net-7.2-4q), of a vmxnet3 guest, and on IRQ names of other
drivers. Also the knob grammar's pointers: a key written under the wrong kind names the
kind that has it; a sysctl number with a unit is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.errors import HostError, InputError
from napilab.harness.inventory.inventory import Host
from napilab.harness.knobs import registry
from napilab.harness.knobs.backend import Backend
from napilab.harness.knobs.kind import Setting
from napilab.harness.knobs.kinds import queue_map
from napilab.harness.profile.profile import load_profile
from napilab.harness.transport.transport import CommandResult
from napilab.runners.base import HOST_PYTHON

DATA = Path(__file__).parents[1] / "data" / "queues" / "virtio-net-7.2-4q"

PROFILE = """\
name: perq
hosts:
  sut: {host: sut}
setup:
  sut:
SETUP
workload:
  tool: ping
  duration: 1
  client: {role: sut}
  server: {role: sut}
"""


def settings(tmp_path: Path, setup: str) -> list[tuple[str, str, str]]:
    text = PROFILE.replace("SETUP", "\n".join("    " + ln for ln in setup.splitlines()))
    (tmp_path / "p.yaml").write_text(text)
    profile = load_profile(tmp_path / "p.yaml")
    return [(s.kind, s.target, s.value) for s in profile.variants[0].settings]


def problems(tmp_path: Path, setup: str) -> list[str]:
    with pytest.raises(InputError) as caught:
        settings(tmp_path, setup)
    return [str(p) for p in caught.value.problems]


# -- grammar -----------------------------------------------------------------------------

def test_whole_interface_forms_are_unchanged(tmp_path: Path) -> None:
    assert settings(tmp_path, 'irq_affinity: {eth0: "0-3"}') == [
        ("irq_affinity", "eth0", "0-3")]
    assert settings(tmp_path, 'irq_affinity: {eth0: {cpus: "1", match: input}}') == [
        ("irq_affinity", "eth0/input", "1")]
    assert settings(tmp_path, 'rps: {eth0: "0-1"}') == [("rps", "eth0/rx-*", "0-1")]
    assert settings(tmp_path, "napi: {eth0: {threaded: busy-poll}}") == [
        ("napi", "eth0/threaded", "busy-poll")]


def test_queues_by_index_with_one_cpu_list_spread_or_map(tmp_path: Path) -> None:
    assert settings(tmp_path, 'irq_affinity: {eth0: {queues: "0-1", cpus: "2"}}') == [
        ("irq_affinity", "eth0 queue 0", "2"), ("irq_affinity", "eth0 queue 1", "2")]
    # the k-th chosen queue on the k-th CPU of the list, wrapping around
    assert settings(tmp_path, 'irq_affinity: {eth0: {queues: "2-4", spread: "0-1"}}') == [
        ("irq_affinity", "eth0 queue 2", "0"), ("irq_affinity", "eth0 queue 3", "1"),
        ("irq_affinity", "eth0 queue 4", "0")]
    assert settings(tmp_path, 'irq_affinity: {eth0: {spread: "0-3"}}') == [
        ("irq_affinity", "eth0 queues", "spread 0-3")]
    assert settings(tmp_path, "irq_affinity: {eth0: {queues: [1, 3], spread: local}}") == [
        ("irq_affinity", "eth0 queue 1", "spread local 0"),
        ("irq_affinity", "eth0 queue 3", "spread local 1")]
    assert settings(tmp_path, 'irq_affinity: {eth0: {map: {0: "2", 5: "3-4"}}}') == [
        ("irq_affinity", "eth0 queue 0", "2"), ("irq_affinity", "eth0 queue 5", "3-4")]


def test_one_queues_napi_and_its_kthread(tmp_path: Path) -> None:
    assert settings(tmp_path, "napi: {eth0: {queues: 3, threaded: busy-poll}}") == [
        ("napi", "eth0 queue 3/threaded", "busy-poll")]
    assert settings(tmp_path, 'napi: {eth0: {queues: "2-3", defer_hard_irqs: 2}}') == [
        ("napi", "eth0 queue 2/defer-hard-irqs", "2"),
        ("napi", "eth0 queue 3/defer-hard-irqs", "2")]
    assert settings(tmp_path, 'napi_threads: {eth0: {queues: 3, cpus: "2", policy: fifo}}'
                    ) == [("napi_threads", "eth0 queue 3/cpus", "2"),
                          ("napi_threads", "eth0 queue 3/policy", "fifo:50")]
    assert settings(tmp_path, 'napi_threads: {eth0: {spread: "2-3"}}') == [
        ("napi_threads", "eth0 queues/cpus", "spread 2-3")]


def test_rps_and_xps_per_queue(tmp_path: Path) -> None:
    assert settings(tmp_path, 'rps: {eth0: {queues: "0-1", cpus: "3"}}') == [
        ("rps", "eth0/rx-0", "3"), ("rps", "eth0/rx-1", "3")]
    assert settings(tmp_path, 'rps: {eth0: {queues: [rx-0], cpus: "3"}}') == [
        ("rps", "eth0/rx-0", "3")]
    assert settings(tmp_path, 'rps: {eth0: {spread: "2-3"}}') == [
        ("rps", "eth0/rx-*", "spread 2-3")]
    assert settings(tmp_path, 'xps: {eth0: {queues: "0-1", spread: "0-1"}}') == [
        ("xps", "eth0/tx-0", "0"), ("xps", "eth0/tx-1", "1")]
    assert settings(tmp_path, "xps: {eth0: {rxqs: paired}}") == [
        ("xps_rxqs", "eth0/tx-*", "paired")]
    assert settings(tmp_path, 'xps: {eth0: {queues: 1, rxqs: "0-1"}}') == [
        ("xps_rxqs", "eth0/tx-1", "0-1")]


def test_per_queue_mistakes_are_refused_at_their_line(tmp_path: Path) -> None:
    found = problems(tmp_path, 'irq_affinity: {eth0: {queues: "3-1", cpus: "0"}}')
    assert len(found) == 1 and "p.yaml:6" in found[0] and "backwards" in found[0]
    found = problems(tmp_path, 'irq_affinity: {eth0: {cpus: "0", spread: "0-1"}}')
    assert len(found) == 1 and "cpus and spread both place the queues" in found[0]
    found = problems(tmp_path, "irq_affinity: {eth0: {queues: 1}}")
    assert len(found) == 1 and "say where the queues go" in found[0]
    found = problems(tmp_path, 'irq_affinity: {eth0: {queues: 1, map: {1: "0"}}}')
    assert "map names its queues itself" in found[0]
    found = problems(tmp_path, 'rps: {eth0: {queues: [tx-0], cpus: "1"}}')
    assert "this kind sets rx queues" in found[0]
    found = problems(tmp_path, "xps: {eth0: {rxqs: pairs}}")
    assert "paired" in found[0] and "p.yaml:6" in found[0]
    found = problems(tmp_path, "napi: {eth0: {queue: 3, threaded: busy-poll}}")
    assert "'queues'" in found[0] and "p.yaml:6" in found[0]


# -- the host side on captured files -------------------------------------------------------

class CapturedGuest:
    """Answers the commands queue_map and the napi backend run, from the files captured
    on the guest; fails on anything else."""

    def __init__(self, *, queue_get: str | None = None, napi_get: str | None = None,
                 interrupts: str | None = None, msi: str | None = None) -> None:
        self.host = Host(name="b", transport="local")
        self.answers = {
            "queue-get": queue_get or (DATA / "queue-get.json").read_text(),
            "napi-get": napi_get or (DATA / "napi-get.json").read_text(),
            "interrupts": interrupts or (DATA / "interrupts.txt").read_text(),
            "msi": msi if msi is not None else (DATA / "msi_irqs.txt").read_text()}

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        argv = list(argv)
        if argv[:2] == ["which", "ynl"]:
            return self._out(argv, "", 1)
        if argv[:2] == ["which", "python3"]:
            return self._out(argv, "/usr/bin/python3\n")
        script = len(HOST_PYTHON) + 1  # python3, its options, "-": the script on stdin
        if argv[:script] == [*HOST_PYTHON, "-"] and argv[script] in ("queue-get", "napi-get"):
            return self._out(argv, self.answers[argv[script]])
        if argv[0] == "sh" and argv[3] == "napilab-irqs":
            return self._out(argv, self.answers["msi"])
        if argv[:4] == ["tail", "-v", "-n", "+1"]:
            path = argv[5]
            text = {"/proc/interrupts": self.answers["interrupts"],
                    "/sys/class/net/data0/ifindex": "3\n"}[path]
            return self._out(argv, f"==> {path} <==\n{text}")
        raise AssertionError(f"unexpected command {argv}")

    def _out(self, argv: list[str], out: str, code: int = 0) -> CommandResult:
        return CommandResult("b", tuple(argv), code, out, "", time.time(), 0.0)


class Session:
    def __init__(self, transport: CapturedGuest) -> None:
        self.name = "b"
        self.transport = transport
        self._backends: dict[type, Backend] = {}

    def backend(self, cls: type[Any]) -> Any:
        return self._backends.setdefault(cls, cls(self.transport))


class Lookup:
    """A host lookup that runs each function on the captured guest."""

    def __init__(self, session: Session) -> None:
        self.name = "b"
        self.session = session

    def find(self, fn: Callable[..., Any], *args: str, plan: Any) -> Any:
        return fn(self.session, *args)


def resolved(kind: str, target: str, value: str, guest: CapturedGuest | None = None
             ) -> list[tuple[str, str, str]]:
    lookup = Lookup(Session(guest or CapturedGuest()))
    items = registry.kind(kind).resolve(Setting("r", kind, target, value), lookup)
    return [(i.key, i.target, i.value) for i in items]


def test_queue_irqs_by_name_where_the_napis_report_none() -> None:
    session = Session(CapturedGuest())
    by_queue = queue_map.queue_irqs(session, "data0", "")  # type: ignore[arg-type]
    assert {q: [n for n, _ in irqs] for q, irqs in by_queue.items()} == {
        0: ["46", "47"], 1: ["48", "49"], 2: ["50", "51"], 3: ["52", "53"]}  # not config 45


def test_irq_spread_over_every_queue_and_one_queue() -> None:
    items = resolved("irq_affinity", "data0 queues", "spread 0-1")
    assert [(k, v) for k, _, v in items] == [
        ("/proc/irq/46/smp_affinity_list", "0"), ("/proc/irq/47/smp_affinity_list", "0"),
        ("/proc/irq/48/smp_affinity_list", "1"), ("/proc/irq/49/smp_affinity_list", "1"),
        ("/proc/irq/50/smp_affinity_list", "0"), ("/proc/irq/51/smp_affinity_list", "0"),
        ("/proc/irq/52/smp_affinity_list", "1"), ("/proc/irq/53/smp_affinity_list", "1")]
    assert items[0][1] == "queue 0 irq 46 (virtio10-input.0)"
    one = resolved("irq_affinity", "data0 queue 3/input", "1")
    assert one == [("/proc/irq/52/smp_affinity_list", "queue 3 irq 52 (virtio10-input.3)",
                    "1")]
    with pytest.raises(HostError, match=r"no IRQ for queue 7 .*queues with IRQs: 0, 1, 2, 3"):
        resolved("irq_affinity", "data0 queue 7", "1")


def test_the_napis_irq_wins_over_its_name() -> None:
    """A driver that reports each NAPI's IRQ (netif_napi_set_irq): the IRQ belongs to
    the queue netlink says, whatever its name."""
    napis = json.loads((DATA / "napi-get.json").read_text())
    for napi in napis:
        napi["irq"] = {8194: 48, 8195: 46}.get(napi["id"])  # swapped on purpose
        if napi["irq"] is None:
            del napi["irq"]
    guest = CapturedGuest(napi_get=json.dumps(napis))
    by_queue = queue_map.queue_irqs(Session(guest), "data0", "")  # type: ignore[arg-type]
    assert by_queue[0][0][0] == "48" and by_queue[1][0][0] == "46"


def test_a_queues_napi_and_a_queue_without_one() -> None:
    assert resolved("napi", "data0 queue 1/threaded", "busy-poll") == [
        ("3/8195/threaded", "data0/queue-1/napi-8195/threaded", "busy-poll")]
    with pytest.raises(HostError, match=r"no queue 3 with a NAPI .*its queues: 0, 1"):
        resolved("napi", "data0 queue 3/threaded", "busy-poll")


@pytest.mark.parametrize(("name", "queue"), [
    ("PCI-MSIX-0000:00:0c.0 1-edge virtio10-input.3", 3),
    ("PCI-MSIX-0000:00:0c.0 8-edge virtio10-output.12", 12),
    ("PCI-MSIX-0000:03:00.0 1-edge eth0-rx-2", 2),
    ("PCI-MSIX-0000:03:00.0 2-edge enp3s0-tx-0", 0),
    ("IR-PCI-MSIX-0000:3b:00.0 5-edge ice-ens1f0-TxRx-4", 4),
    ("PCI-MSIX-0000:0b:00.0 1-edge eth0-rxtx-1", 1),
    ("IR-PCI-MSIX-0000:08:00.0 3-edge mlx5_comp3@pci:0000:08:00.0", 3),
    ("PCI-MSIX-0000:00:0c.0 0-edge virtio10-config", None),
    ("PCI-MSIX-0000:03:00.0 0-edge eth0", None),
    ("PCI-MSIX-0000:0b:00.0 4-edge eth0-event-4", None),
    ("IR-PCI-MSIX-0000:08:00.0 0-edge mlx5_async0@pci:0000:08:00.0", None),
])
def test_irq_names_of_several_drivers(name: str, queue: int | None) -> None:
    assert queue_map.irq_queue(name) == queue


VMXNET3 = Path(__file__).parents[1] / "data" / "queues" / "vmxnet3-7.2"


def vmxnet3_guest() -> CapturedGuest:
    return CapturedGuest(**{k: (VMXNET3 / f).read_text() for k, f in (
        ("queue_get", "queue-get.json"), ("napi_get", "napi-get.json"),
        ("interrupts", "interrupts.txt"), ("msi", "msi_irqs.txt"))})


def test_vmxnet3_queues_irqs_by_name_and_no_napi_per_queue() -> None:
    """vmxnet3 (7.2): IRQs data0-rxtx-N, an event IRQ in no queue, and no queue linked
    to a NAPI: an IRQ per queue works, a NAPI per queue is refused saying why."""
    items = resolved("irq_affinity", "data0 queues", "spread 0-1", vmxnet3_guest())
    assert [(k, t, v) for k, t, v in items] == [
        ("/proc/irq/42/smp_affinity_list", "queue 0 irq 42 (data0-rxtx-0)", "0"),
        ("/proc/irq/43/smp_affinity_list", "queue 1 irq 43 (data0-rxtx-1)", "1")]
    with pytest.raises(HostError, match="does not say which NAPI serves each of its 4 "
                       "queues") as caught:
        resolved("napi", "data0 queue 1/threaded", "busy-poll", vmxnet3_guest())
    assert "without queues" in (caught.value.hint or "")


@pytest.mark.parametrize(("setup", "points"), [
    ("netdev: {eth0: {irq_suspend_timeout: 20000000}}",
     "irq_suspend_timeout belongs to napi: {eth0: {irq_suspend_timeout: ...}}"),
    ("napi: {eth0: {napi_defer_hard_irqs: 2}}",
     "napi_defer_hard_irqs belongs to netdev: {eth0: {napi_defer_hard_irqs: ...}}"),
    ("gro_flush_timeout: 20000",
     "gro_flush_timeout belongs to netdev: {IFACE: {gro_flush_timeout: ...}}"),
    ('napi: {eth0: {rps: "1"}}', "rps belongs to rps: {...} beside napi"),
    ("netdev: {eth0: {channels: {combined: 1}}}",
     "channels belongs to ethtool: {eth0: {channels: ...}}"),
])
def test_a_misplaced_knob_points_to_the_kind_that_has_it(tmp_path: Path, setup: str,
                                                        points: str) -> None:
    (found,) = problems(tmp_path, setup)
    assert "p.yaml:6" in found and points in found, found
    assert "did you mean" not in found


def test_a_sysctl_number_with_a_unit_is_refused(tmp_path: Path) -> None:
    (found,) = problems(tmp_path, "sysctl: {net.core.busy_poll: 50us}")
    assert "p.yaml:6" in found and "'50us' is a number with a unit" in found
    (found,) = problems(tmp_path, "sysctl: {net.ipv4.tcp_rmem: [4096, 128k, 6291456]}")
    assert "'128k'" in found
    assert settings(tmp_path, "sysctl: {net.ipv4.tcp_congestion_control: bbr}") == [
        ("sysctl", "net.ipv4.tcp_congestion_control", "bbr")]
