"""Booting hosts into each variant's kernel (the profile's `kernel:`) and back.

The kernel a host runs is a knob (harness.knobs.kinds.kernel): its original (uname -r,
uname -v, /proc/cmdline as the run found them) is journalled on the host before the
first boot, in its own journal (`journal-RUN-HOST-kernel.json`, kept for the whole run,
while each trial's settings journal lives for one trial). Before a trial, a host boots
when it runs another kernel than the variant asks for (a host whose role has no kernel
asks for its own), or always with `boot: per-trial`; what came up is read back and
judged: a host on another kernel fails the trial loudly (and is booted back). At the
end of the run, and by `napilab restore` after a crash, restore boots every host back
into its original kernel and drops the journal.

`schedule` is the same decision without a host, for `napilab plan`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from napilab.harness.errors import NapilabError
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.setting_steps import JOURNAL_DIR
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.knobs import registry
from napilab.harness.knobs.change import Change
from napilab.harness.knobs.kind import Setting
from napilab.harness.knobs.kinds import kernel as kernel_kind
from napilab.harness.profile.kernel import KernelSpec
from napilab.harness.profile.plan import Plan
from napilab.harness.profile.profile import Trial, Variant

OWN = "its own kernel"


def kernel_journal(run_id: str, host: str) -> str:
    return f"{JOURNAL_DIR}/journal-{run_id}-{host}-kernel.json"


def needs_boot(current: KernelSpec | None, wanted: KernelSpec | None, fresh: bool) -> bool:
    """Boot before a trial: always with per-trial boots, else when the host runs another
    kernel than the trial wants (None: the host's own)."""
    return fresh or current != wanted


def schedule(plan: Plan, trials: list[Trial]) -> tuple[dict[int, dict[str, str]], list[str]]:
    """{trial index: {host: what it boots into}} and the hosts booted back at the end."""
    fresh = plan.profile.boot == "per-trial"
    current: dict[str, KernelSpec | None] = dict.fromkeys(plan.booted_hosts)
    boots: dict[int, dict[str, str]] = {}
    for trial in trials:
        wanted = plan.kernels(plan.profile.variant(trial.variant))
        for host in plan.booted_hosts:
            spec = wanted.get(host)
            if needs_boot(current[host], spec, fresh):
                boots.setdefault(trial.index, {})[host] = spec.describe() if spec else OWN
                current[host] = spec
    return boots, [h for h, spec in current.items() if spec is not None]


class Boots:
    """The kernels of one run's hosts."""

    def __init__(self, plan: Plan, sessions: dict[str, HostSession], run_id: str,
                 say: Callable[[str], None]) -> None:
        self.plan = plan
        self.sessions = sessions
        self.fresh = plan.profile.boot == "per-trial"
        self.say = say
        self.settings = {h: HostSettings(sessions[h], run_id, journal=kernel_journal(run_id, h))
                         for h in plan.booted_hosts}
        self.current: dict[str, KernelSpec | None] = dict.fromkeys(plan.booted_hosts)
        self._targets: dict[tuple[str, KernelSpec], str] = {}
        self._own: dict[str, str] = {}  # host -> its own kernel, as read at the first boot
        self.finished = not self.settings  # finish() was called (once is enough)

    @property
    def active(self) -> bool:
        return bool(self.settings)

    def resolve_all(self) -> None:
        """Find every variant's image now: a kernel the host's boot method cannot find
        fails the run before any trial."""
        for variant in self.plan.profile.variants:
            for host, spec in self.plan.kernels(variant).items():
                self._target(host, spec)

    def _target(self, host: str, spec: KernelSpec) -> str:
        key = (host, spec)
        if key not in self._targets:
            backend = self.sessions[host].backend(kernel_kind.BootBackend)
            if spec.image is None:  # the image it runs, again, with `append`
                target = backend.method().own(kernel_kind.loads(self._running(host)),
                                              spec.append)
            else:
                target = backend.method().resolve(spec.image, spec.append)
            self._targets[key] = kernel_kind.dumps(target)
        return self._targets[key]

    def _running(self, host: str) -> str:
        """The kernel `host` ran when the run first asked (its own, before any boot)."""
        if host not in self._own:
            backend = self.sessions[host].backend(kernel_kind.BootBackend)
            self._own[host] = backend.read([kernel_kind.KEY])[kernel_kind.KEY]
        return self._own[host]

    def before(self, variant: Variant) -> list[Change]:
        """Boot the hosts whose kernel the trial of `variant` needs; the kernel change
        of every host with a journalled kernel, as this trial runs it."""
        wanted = self.plan.kernels(variant)
        for host in self.plan.booted_hosts:
            spec = wanted.get(host)
            if needs_boot(self.current[host], spec, self.fresh):
                if self._boots(host, spec):
                    self.say(f"{host}: booting {spec.describe() if spec else OWN}")
                self._boot(host, spec)
        return [s.changes[0] for s in self.settings.values() if s.changes]

    def _boots(self, host: str, spec: KernelSpec | None) -> bool:
        """Whether bringing `host` to `spec` boots it: always with per-trial boots, else
        when what it runs (as read back after its last boot, or as the run found it) is
        not what `spec` asks for: the kernel knob writes only then, so a host whose own
        kernel is the one asked for is not said to boot."""
        settings = self.settings[host]
        if self.fresh or self._drops_words(host, spec):
            return True
        if settings.changes:
            change = settings.changes[0]
            return _runs_other(change, self._target(host, spec) if spec else change.original)
        if spec is None:
            return False  # its own kernel, which it runs
        return not registry.kind("kernel").same(kernel_kind.KEY, self._running(host),
                                                self._target(host, spec))

    def _drops_words(self, host: str, spec: KernelSpec | None) -> bool:
        """The host runs command-line words `spec` does not ask for (`append`ed for the
        kernel it runs now). The kernel knob takes a host on image X with more words
        than asked for as running X (words a boot loader adds are not napilab's to
        judge), so such a switch boots whatever the knob compares: without it, a
        variant of X after a variant of X + idle=poll kept idle=poll."""
        current = self.current[host]
        if current is None or spec is None:
            return False  # the host's own kernel: its original has its whole command line
        return bool(set(current.append) - set(spec.append))

    def _boot(self, host: str, spec: KernelSpec | None) -> None:
        settings = self.settings[host]
        session = self.sessions[host]
        role = next(r for r, h in self.plan.role_hosts.items() if h.name == host)
        # kexec boots an image with the host's own command line plus `append`: the one
        # the run found, not the one of the boot the host is on (another variant's words)
        session.backend(kernel_kind.BootBackend).remember_cmdline(
            kernel_kind.loads(self._running(host))["cmdline"])
        force = self.fresh or self._drops_words(host, spec)
        try:
            if not settings.changes:
                own = self._running(host)
                value = self._target(host, spec) if spec else own
                setting = Setting(role, "kernel", "kernel", value)
                settings.apply([setting])
                if self.fresh and not _booted(settings):
                    settings.rewrite(setting, force=True)
            else:
                value = self._target(host, spec) if spec else settings.changes[0].original
                settings.rewrite(Setting(role, "kernel", "kernel", value), force=force)
        finally:
            self.current[host] = spec if settings.changes else None
            session.rebooted()

    def finish(self) -> list[str]:
        """Every host back on its own kernel (restore boots it when it runs another)
        and its kernel journal dropped; the failures, each naming its host."""
        self.finished = True
        failures = []
        for host, settings in self.settings.items():
            if not settings.changes:
                continue
            try:
                if self.current[host] is not None and _runs_other(settings.changes[0],
                                                                  settings.changes[0].original):
                    self.say(f"{host}: booting back into {OWN}")
                settings.restore()
                self.current[host] = None
            except NapilabError as exc:
                failures.append(str(exc))
            finally:
                self.sessions[host].rebooted()
        return failures


def _runs_other(change: Change, wanted: str) -> bool:
    """The host's kernel, as its change last read it back, is not `wanted` (not read
    back yet: taken as another, so a boot is said rather than hidden)."""
    return change.effective is None or change.differs(change.effective, wanted)


def _booted(settings: HostSettings) -> bool:
    """The apply wrote (booted): its original differs from what it asked for."""
    change = settings.changes[0]
    return change.differs(change.original, change.requested)


def kernel_of(change: Change) -> dict[str, Any]:
    """What a trial's kernel change says the host ran."""
    return kernel_kind.loads(change.effective or "{}")
