"""What differs between two runs besides what was meant to differ (pure; two manifests in).

A cross-run comparison (`napilab compare A B`, `napilab check`) is only honest when the
runs differ in the thing under test. Policy (docs/statistics.md, "Confounders"):

- intended: a knob whose *requested* value differs between the runs (the profiles ask
  for different settings: that is the experiment), or that only one run sets;
- confounders: any host-fact difference (kernel release and build, command line, CPU
  model, online CPUs, irqbalance, USER_HZ, NIC driver/version/firmware, tool versions),
  a host present in one run only, a knob requested with the same value but read back
  differently (the kernel did not take it the same way), and a different workload
  (tool, arguments, duration, pinning) or role-to-host mapping for a compared variant.

A host-fact difference can be declared intended (`--intended kernel` for a patched
kernel A/B): `Confounders.waive` moves matching differences to `intended`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from napilab.harness.knobs.change import Change
from napilab.harness.profile.merge import deep_merge, located, plain
from napilab.harness.store.manifest import HostFacts, Manifest

HOST_FACTS = ("kernel_release", "kernel_version", "cmdline", "cpu_model", "online_cpus",
              "irqbalance", "user_hz")
NIC_FACTS = ("driver", "version", "firmware-version")
TOOL_FACTS = ("tool_versions", "tools")  # {tool: version} when the facts record them
PROFILE_KEYS = ("workload", "hosts")  # compared per variant, after the variant's overlay


@dataclass(frozen=True)
class Difference:
    kind: str  # host | host_fact | setting | workload
    where: str  # host, or variant/host for settings, or variant for workloads
    key: str  # fact name (nics.data0.driver), knob target, or profile key path
    a: str
    b: str
    note: str = ""

    def __str__(self) -> str:
        return self.text()

    def text(self, a: str = "A", b: str = "B") -> str:
        """One line, the two runs under their labels (compare's Baseline/Patched)."""
        note = f" ({self.note})" if self.note else ""
        return f"{self.where}: {self.key}: {a} {self.a!r}, {b} {self.b!r}{note}"

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "where": self.where, "key": self.key, "a": self.a,
                "b": self.b, "note": self.note}


@dataclass(frozen=True)
class Confounders:
    confounders: tuple[Difference, ...]
    intended: tuple[Difference, ...]

    def waive(self, prefixes: Iterable[str]) -> Confounders:
        """Declare differences whose key starts with one of `prefixes` intended."""
        wanted = tuple(p for p in prefixes if p)
        if not wanted:
            return self
        keep = tuple(d for d in self.confounders if not d.key.startswith(wanted))
        moved = tuple(d for d in self.confounders if d.key.startswith(wanted))
        return Confounders(keep, self.intended + moved)


def diff_manifests(a: Manifest, b: Manifest,
                   variants: Sequence[str] | None = None) -> Confounders:
    """Differences between runs A and B over the variants both ran (or `variants`)."""
    common = list(variants) if variants is not None else [
        v for v in a.variants if v in b.variants]
    confounders = _hosts(a.host_facts or {}, b.host_facts or {})
    confounders += _workloads(a, b, common)
    settings_bad, intended = _settings(a, b, common)
    return Confounders(tuple(confounders + settings_bad), tuple(intended))


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _hosts(a: Mapping[str, HostFacts], b: Mapping[str, HostFacts]) -> list[Difference]:
    out = []
    for host in sorted(set(a) | set(b)):
        if host not in a or host not in b:
            out.append(Difference("host", host, "host", "present" if host in a else "absent",
                                  "present" if host in b else "absent", "a host in one run only"))
            continue
        out += [Difference("host_fact", host, key, x, y)
                for key, x, y in _fact_pairs(a[host], b[host]) if x != y]
    return out


def _fact_pairs(a: HostFacts, b: HostFacts) -> list[tuple[str, str, str]]:
    pairs = [(key, _text(a.get(key)), _text(b.get(key))) for key in HOST_FACTS]
    nics_a, nics_b = a.nics, b.nics
    for nic in sorted(set(nics_a) | set(nics_b)):
        pairs += [(f"nics.{nic}.{key}", _text((nics_a.get(nic) or {}).get(key)),
                   _text((nics_b.get(nic) or {}).get(key))) for key in NIC_FACTS]
    for name in TOOL_FACTS:
        tools_a, tools_b = a.get(name) or {}, b.get(name) or {}
        if isinstance(tools_a, Mapping) and isinstance(tools_b, Mapping):
            pairs += [(f"{name}.{tool}", _text(tools_a.get(tool)), _text(tools_b.get(tool)))
                      for tool in sorted(set(tools_a) | set(tools_b))]
    return pairs


def _variant_doc(manifest: Manifest, variant: str) -> dict[str, Any]:
    """The workload and roles a variant ran with: the base document under its overlay
    (the profile's own deep merge, on the document stored in the manifest)."""
    document = manifest.profile.document
    overlay = (document.get("variants") or {}).get(manifest.written_as(variant)) or {}
    return {key: plain(deep_merge(located(document.get(key)), located(overlay[key])))
            if overlay.get(key) is not None else document.get(key) for key in PROFILE_KEYS}


def _flatten(value: Any, prefix: str) -> dict[str, str]:
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: _text(value)}


def _workloads(a: Manifest, b: Manifest, variants: Sequence[str]) -> list[Difference]:
    out = []
    for variant in variants:
        flat_a = _flatten(_variant_doc(a, variant), "")
        flat_b = _flatten(_variant_doc(b, variant), "")
        out += [Difference("workload", variant, key, flat_a.get(key, ""), flat_b.get(key, ""),
                           "the workload or host mapping differs")
                for key in sorted(set(flat_a) | set(flat_b))
                if flat_a.get(key, "") != flat_b.get(key, "")]
    return out


def _knobs(manifest: Manifest, variant: str) -> dict[tuple[str, str], Change]:
    """(host, path) -> the first completed trial's change record for `variant`."""
    out: dict[tuple[str, str], Change] = {}
    for trial in manifest.trials:
        if trial.variant != variant or trial.status != "ok":
            continue
        for change in trial.settings or []:
            out.setdefault((change.host, change.path), change)
    return out


def _values(change: Change) -> tuple[str, str]:
    """Requested and read back, in the canonical form the apply-time verdict stored."""
    if change.verdict is None:
        return _text(change.requested), ""
    return change.verdict.requested, change.verdict.effective


def _settings(a: Manifest, b: Manifest,
              variants: Sequence[str]) -> tuple[list[Difference], list[Difference]]:
    confounders, intended = [], []
    for variant in variants:
        knobs_a, knobs_b = _knobs(a, variant), _knobs(b, variant)
        for host, path in sorted(set(knobs_a) | set(knobs_b)):
            ca, cb = knobs_a.get((host, path)), knobs_b.get((host, path))
            where = f"{variant}/{host}"
            if ca is None or cb is None:
                only = cb if ca is None else ca
                assert only is not None
                intended.append(Difference(
                    "setting", where, only.target,
                    "unset" if ca is None else _text(ca.effective),
                    "unset" if cb is None else _text(cb.effective),
                    f"set in one run only; the host had {_text(only.original)!r} before"))
                continue
            (req_a, eff_a), (req_b, eff_b) = _values(ca), _values(cb)
            if req_a != req_b:
                intended.append(Difference("setting", where, ca.target, eff_a, eff_b,
                                           f"requested {req_a!r} vs {req_b!r}"))
            elif eff_a != eff_b:
                confounders.append(Difference(
                    "setting", where, ca.target, eff_a, eff_b,
                    f"both requested {req_a!r}; read back differently"))
    return confounders, intended
