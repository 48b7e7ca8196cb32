"""The top-level keys of a profile and of an inventory (the validators and the JSON
Schema read them from here), and telling the two kinds of file apart: a file of the
wrong kind gets one sentence, not an error for every key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from napilab.harness.errors import InputError, Location, Problem
from napilab.harness.grammar.yamlsrc import load_file, read_file

# A profile's keys, each with the line an editor shows for it (the JSON Schema's
# description, harness.authoring.json_schema); docs/profiles.md has each with an example.
PROFILE_KEY_HELP = {
    "name": "The profile's name: its results go to RESULTS/NAME/ (default: the file name "
            "without .yaml). Letters, digits and . _ = + -, at most 64 characters.",
    "description": "Free text shown at the top of the report.",
    "extends": "A file, or a list of files, this profile builds on (relative to this "
               "file): mappings merge key by key and this file wins; lists and scalars "
               "are replaced.",
    "hosts": "The roles: each bound to a host of the inventory (`server: sut`), "
             "optionally with the interface its settings call ${iface} (`{host: sut, "
             "iface: eth0}`).",
    "setup": "Per role, the knobs set in every variant (variants add to or override "
             "them): read, journalled on the host, written, read back, and restored after "
             "each trial.",
    "workload": "What runs during the measured window: the tool, its duration, and the "
                "role, CPUs and args of its client and server.",
    "collect": "Kernel counters read before and after the load on each role's host "
               "(softnet_stat, interrupts, proc_stat, ...); per-CPU deltas are stored.",
    "report": "The rows of the A/B table (`table`: source, metric, role, label) and the "
              "variants joined into each column (`columns`).",
    "variants": "The experiment's arms, by name: each an overlay (setup, workload, "
                "collect, kernel) over the rest of the profile. The first is the baseline "
                "unless `baseline` names another.",
    "baseline": "The variant the others are compared with (default: the first).",
    "repeat": "Repetitions of each variant (default 1).",
    "order": "The order of the trials: interleaved (default: A B A B ...), blocked (A A "
             "... B B ...) or randomized (a seeded shuffle).",
    "seed": "The seed of `order: randomized` (chosen and recorded when absent).",
    "cooldown": "Seconds to wait between trials (default 0).",
    "on_mismatch": "A knob that reads back another value than written: fail (default: "
                   "restore and stop) or warn (measure anyway, the report shows both).",
    "metrics": "The primary metrics, by name or source.metric: their direction, the "
               "min_effect the A/B table tests and the max_regression `napilab check` "
               "gates.",
    "matrix": "A sweep: each combination of the parameters, used as ${name} in strings, "
              "is a variant (short form {param: [values]}, or parameters, variants, "
              "name, exclude).",
    "warmup_trials": "Trials run before the measured ones with their settings applied, "
                     "results not kept (default 0, at most 100).",
    "kernel": "Per role, the kernel its host boots into for the trials: an image name, "
              "release or path, or {image, append: [command-line words]}.",
    "boot": "When hosts boot into the trials' kernels: per-kernel (default: one boot per "
            "kernel) or per-trial (fresh before every trial).",
    "tune": "The search of `napilab tune`: parameters (${name} in one variant: ranges or "
            "choices), the goal, the budget, the confirmation of the best candidates.",
    "bisect": "`napilab bisect`'s git range: {tree: DIR (relative to this file), build: "
              "the build command, image: the image it leaves}; the command line's --tree, "
              "--build and --build-image win.",
}
PROFILE_KEYS = tuple(PROFILE_KEY_HELP)
# A variant's keys (harness.profile.profile.VARIANT_KEYS), each with its line.
VARIANT_KEY_HELP = {
    "description": "What this variant changes, shown in the plan and the report.",
    "group": "A comparison group: the variant is compared with the first variant of its "
             "group, never with the profile's baseline.",
    "cores": "The cores this variant may use (a number, or per role): the report says when "
             "it used more, and when compared variants have unequal budgets.",
    "setup": "Per role, knobs this variant sets, merged over the profile's `setup`.",
    "workload": "This variant's workload, merged over the profile's (another `tool` "
                "starts from a fresh workload).",
    "collect": "Collectors this variant adds or changes, merged over the profile's.",
    "kernel": "Per role, the kernel this variant's trials run on (over the profile's "
              "`kernel`).",
}
INVENTORY_KEYS = ("transport", "host_key_policy", "hosts", "ssh_config", "replicas")
HOST_KEYS = ("address", "port", "user", "key", "known_hosts", "become", "data_address",
             "netns", "iface", "transport", "host_key_policy", "cpus", "connect_timeout",
             "boot")
ROLE_KEYS = ("host", "iface")  # a profile's `hosts:` entry: the role's host and interface
# only a profile has these (name, description and hosts are in both kinds)
_PROFILE_ONLY = tuple(k for k in PROFILE_KEYS if k not in ("name", "description", "hosts"))
_INVENTORY_ONLY = tuple(k for k in INVENTORY_KEYS if k != "hosts")
_HOST_ONLY = tuple(k for k in HOST_KEYS if k not in ROLE_KEYS)
_ANSIBLE = ("all", "_meta", "ungrouped")  # Ansible YAML inventories, --list JSON


INI_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_PATTERN = r"(?:[A-Za-z0-9_.-]|\[[^\]\s]*\])+"  # a host name with its [x:y] ranges
_HOST_LINE = re.compile(rf"^{_PATTERN}(?::\d+)?(?:\s+[A-Za-z_]\w*=\S*)*\s*(?:#.*)?$")


def looks_like_ini(text: str) -> bool:
    """The first line that is not blank or a comment is an INI section or host line."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        return bool((INI_SECTION.match(stripped) and "," not in stripped)
                    or (_HOST_LINE.match(stripped) and not stripped.startswith("[")))
    return False


def _inventory_signs(data: dict[str, Any]) -> list[str]:
    """The keys that make DATA an inventory: `transport:`, `all:`, `hosts.X.address`."""
    signs = [f"{k}:" for k in (*_INVENTORY_ONLY, *_ANSIBLE) if k in data]
    hosts = data.get("hosts")
    if isinstance(hosts, dict):
        for name, host in hosts.items():
            if isinstance(host, dict) and "host" not in host:
                signs += [f"hosts.{name}.{k}" for k in _HOST_ONLY if k in host][:1]
    return signs


def not_an_inventory(data: Any, path: str, where: Location | None) -> None:
    """A profile loader's check: DATA has no profile-only key and looks like an
    inventory (napilab's or Ansible's)."""
    if not isinstance(data, dict) or any(k in data for k in _PROFILE_ONLY):
        return
    signs = _inventory_signs(data)
    if signs:
        _refuse(path, where, f"this is an inventory (it has {', '.join(signs[:3])}), not a "
                "profile: give it with -i, and a profile (name, hosts, workload, variants) "
                "as the first argument")


def not_a_profile(data: Any, path: str, where: Location | None) -> None:
    """An inventory loader's check: DATA has profile-only keys (workload, variants, ...)
    and nothing of an inventory but `hosts:`."""
    if not isinstance(data, dict):
        return
    signs = [f"{k}:" for k in _PROFILE_ONLY if k in data]
    if signs and not _inventory_signs(data):
        _refuse(path, where, f"this is a profile (it has {', '.join(signs[:3])}), not an "
                "inventory: give it as the first argument, and with -i an inventory "
                "(hosts with address, user, key)")


def _refuse(path: str, where: Location | None, sentence: str) -> None:
    raise InputError([Problem(where or Location(path, 1, 1), "", sentence)])


def load_profile_document(path: Path) -> Any:
    """The file's YAML; an inventory (napilab's, Ansible's YAML, INI or --list JSON)
    given as a profile is one sentence."""

    try:
        document = load_file(path)
    except InputError:
        if looks_like_ini(read_file(path)):
            raise InputError([Problem(Location(str(path), 1, 1), "", "this is an Ansible INI "
                                      "inventory, not a profile: give it with -i, and a "
                                      "profile as the first argument")]) from None
        raise
    not_an_inventory(document, str(path), getattr(document, "location", None))
    return document
