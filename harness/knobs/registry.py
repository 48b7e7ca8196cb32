"""Every knob kind napilab knows, one line each, in apply order: restore runs in the
reverse order. Profile parsing (`setup:`), the CPU checks of a bound plan, settings
apply/restore, `napilab plan` and `napilab hosts check` all read this registry; no
other module dispatches on a kind. Adding a kind is one module under
harness/knobs/kinds/ (cpu/ for the host's CPU and power) and one line here (docs/design.md)."""

from __future__ import annotations

from napilab.harness.errors import HostError
from napilab.harness.knobs.backend import Backend
from napilab.harness.knobs.kind import Kind
from napilab.harness.knobs.kinds import (
    irq_affinity,
    irqbalance,
    kernel,
    kprobe,
    napi,
    napi_threads,
    netdev,
    queues,
    sysctl,
    sysfs,
)
from napilab.harness.knobs.kinds.cpu import (
    cpu_dma_latency,
    cpufreq,
    cpuidle,
    energy_perf_bias,
    intel_pstate,
    platform_profile,
    smt,
    transparent_hugepage,
)
from napilab.harness.knobs.kinds.ethtool import ethtool

KINDS: tuple[Kind, ...] = (
    kernel.Kernel(),  # booted into before anything else is set (harness.engine.boots)
    sysctl.Sysctl(),
    irqbalance.Irqbalance(),
    transparent_hugepage.TransparentHugepage(),
    platform_profile.PlatformProfile(),  # before cpufreq: a profile may set EPP itself
    cpufreq.Cpufreq(),
    intel_pstate.IntelPstate(),
    energy_perf_bias.EnergyPerfBias(),
    cpuidle.Cpuidle(),
    cpu_dma_latency.CpuDmaLatency(),
    smt.Smt(),  # last of the host's: per-CPU files are written while every CPU is online
    ethtool.Ethtool(),  # first of the interface's: channels and GRO decide queues and NAPIs
    netdev.Netdev(),
    sysfs.Sysfs(),
    napi.Napi(),
    queues.Rps(),
    queues.RpsFlowCnt(),
    queues.Xps(),
    queues.XpsRxqs(),
    irq_affinity.IrqAffinity(),
    napi_threads.NapiThreads(),
    kprobe.Kprobe(),
)


def kinds() -> tuple[Kind, ...]:
    return KINDS


def kind(name: str) -> Kind:
    for known in KINDS:
        if known.name == name:
            return known
    raise HostError(f"unknown knob kind {name!r}; napilab knows "
                    f"{', '.join(k.name for k in KINDS)}")


def order(name: str) -> int:
    """A kind's place in the apply order."""
    return [k.name for k in KINDS].index(kind(name).name)


def profile_keys() -> dict[str, Kind]:
    """The keys `setup.<role>` accepts, each with the kind that parses it."""
    return {k.key: k for k in KINDS if k.key is not None}


def backend_names() -> set[str]:
    return {k.backend.name for k in KINDS}


def backend_class(name: str) -> type[Backend]:
    """The backend class a journal entry or a change names."""
    for known in KINDS:
        if known.backend.name == name:
            return known.backend
    raise HostError(f"unknown knob backend {name!r}")
