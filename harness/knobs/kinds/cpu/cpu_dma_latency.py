"""`cpu_dma_latency: 0`: a PM QoS CPU latency request, in microseconds (tuned's
`force_latency`), held on the host for the trial by a process of napilab's that opens
/dev/cpu_dma_latency, writes the value and keeps the file open.

The kernel keeps the lowest of all open requests (cpuidle then avoids every idle state
whose exit latency is above it, on every CPU) and drops a request when its file is
closed, so the request ends with the holder: restore ends it, and it ends by itself
when its controller does, however that ends. The holder runs with its stdin held open
by napilab's SSH channel (or local pipe) and waits on it; when the connection ends,
sshd closes that stdin and the holder exits. A network that drops without closing the
TCP connection leaves it until sshd gives up on the client (ClientAliveInterval).

The value read back is /dev/cpu_dma_latency's: reading it gives the aggregated request
in force (a native 32-bit integer; 2000000000, PM_QOS_CPU_LATENCY_DEFAULT_VALUE, when
nobody holds one), not napilab's own. Another holder with a lower request (tuned)
therefore reads back as a mismatch, which is what the CPUs get. While this session's
holder runs, the value read says so (`0 (napilab holds 50)`): the verdict compares the
number in force, restore sees the difference from the original and ends the holder
even when another request keeps the number where it was. The per-CPU
`power/pm_qos_resume_latency_us` files are a different, per-device constraint napilab
does not set.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.interrupts import deferred_interrupts
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs import values
from napilab.harness.knobs.backend import Backend, Command
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting, Verdict

if TYPE_CHECKING:
    from napilab.harness.transport.transport import Process, Transport

DEVICE = "/dev/cpu_dma_latency"
NO_REQUEST = 2_000_000_000  # PM_QOS_CPU_LATENCY_DEFAULT_VALUE (include/linux/pm_qos.h)
LATENCY = values.integer(0, NO_REQUEST)
RELEASED = "<released>"
# The kernel reads a write of exactly 4 bytes as a binary s32 and anything else as hex
# text (kernel/power/qos.c, cpu_latency_qos_write): 8 hex digits and a newline are 9
# bytes, whatever the value, and need no byte order. `read` returns at end of file, when
# the controller's channel closes; `held` tells the controller the request is in force.
HOLD_SCRIPT = ('exec 3>"$1" && printf "%08x\\n" "$2" >&3 && echo held || exit 1; '
               'read -r _ || :')
READ = ["od", "-An", "-t", "d4", "-N", "4", "--"]
STARTED_WITHIN = 10.0


class HolderBackend(Backend):
    """Key: the device; value: the aggregated request in force, in microseconds. Writing
    ends this session's holder, then starts one for the value unless the host is
    already at it (the original, when restoring)."""

    name = "pm_qos_holder"
    scripts: ClassVar[dict[str, str]] = {"cpu-dma-latency-hold": HOLD_SCRIPT}

    def __init__(self, transport: Transport | None) -> None:
        super().__init__(transport)
        self._holders: dict[str, tuple[Process, str]] = {}  # key -> holder, its value

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [[*READ, key] for key in keys]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        out = {}
        for key, argv in zip(keys, self.read_argvs(keys), strict=True):
            result = self.transport.run(argv, check=False)
            words = result.stdout.split()
            if result.exit_code != 0 or len(words) != 1:
                raise HostError(f"{self.host}: cannot read {key}: "
                                f"{result.stderr.strip() or result.stdout.strip()!r}",
                                hint="the kernel has no CPU latency QoS device (CONFIG_PM "
                                "off), or napilab runs without root on this host")
            held = self._holders.get(key)
            out[key] = words[0] if held is None else f"{words[0]} (napilab holds {held[1]})"
        return out

    def write_command(self, key: str, value: str) -> Command:
        if value == RELEASED:
            return Command(["kill", "-s", "TERM", "<holder-pid>"])
        return Command(["sh", "-c", HOLD_SCRIPT, "napilab-cpu-dma-latency", key, value])

    def write(self, key: str, value: str) -> None:
        self._release(key)
        if self.read([key])[key] == value:
            return  # the host is at the value without a holder of ours (restore)
        with deferred_interrupts():  # the holder is noted as it starts: restore ends it
            process = self.transport.start(self.write_command(key, value).argv,
                                           stdin_open=True)
            self._holders[key] = (process, value)
        deadline = time.monotonic() + STARTED_WITHIN
        while "held" not in process.output()[0]:
            if process.poll() is not None or time.monotonic() > deadline:
                self._release(key)
                err = process.output()[1].strip().splitlines()[-1:] or ["no output"]
                raise HostError(f"{self.host}: the request holder for {key} did not "
                                f"start: {err[0]}")
            time.sleep(0.005)

    def _release(self, key: str) -> None:
        held = self._holders.pop(key, None)
        if held is not None:
            process = held[0]
            process.signal("TERM")
            process.wait(STARTED_WITHIN)


class CpuDmaLatency(Kind):
    name = key = "cpu_dma_latency"
    backend = HolderBackend

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        try:
            value = LATENCY(node[self.name])
        except values.KnobValueError as exc:
            check.error(node.where(self.name), path, f"{exc} (microseconds)")
            return []
        return [Setting(role, self.name, self.name, value)]

    def json_schema(self) -> js.Schema:
        return js.converter(LATENCY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(DEVICE, self.name, setting.value)]

    def verdict(self, key: str, requested: str, effective: str) -> Verdict:
        """The number in force against the number asked for (not napilab's note)."""
        want, got = requested.split()[0], effective.split()[0]
        return Verdict("taken" if want == got else "mismatch", want, got)

    def plan_original(self, item: Item) -> str:
        return RELEASED

    def check_paths(self, iface: str | None) -> list[str]:
        return [DEVICE]
