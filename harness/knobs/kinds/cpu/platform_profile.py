"""`platform_profile: performance`: the ACPI platform profile,
/sys/firmware/acpi/platform_profile (Documentation/userspace-api/sysfs-platform_profile.rst).

The profiles a host offers are the words of /sys/firmware/acpi/platform_profile_choices,
read when the trial starts: a word it does not list is refused before any write, with
the list. A host without a platform profile driver lacks both files and is refused
naming them; one whose driver cannot read its profile back (the read fails with EINVAL
on some HP laptops, kernel bug 220926) is refused too, as napilab could not restore it.
"""

from __future__ import annotations

import re

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import read_files
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting

PROFILE = "/sys/firmware/acpi/platform_profile"
CHOICES = "/sys/firmware/acpi/platform_profile_choices"
_WORD = re.compile(r"[a-z][a-z-]{0,31}")  # low-power, balanced-performance


def choices(session: Session) -> tuple[str, ...]:
    try:
        text = read_files(session.transport, [CHOICES])[CHOICES]
    except HostError as exc:
        raise HostError(exc.message, hint="the host has no platform profile driver; drop "
                        "`platform_profile:` for this host") from None
    return tuple(text.split())


class PlatformProfile(Kind):
    name = key = "platform_profile"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        value = node[self.name]
        if not isinstance(value, str) or not _WORD.fullmatch(value):
            check.error(node.where(self.name), path, "expected a platform profile's name "
                        f"(low-power, balanced, performance...), got {value!r}")
            return []
        return [Setting(role, self.name, "platform_profile", value)]

    def json_schema(self) -> js.Schema:
        return js.leaf({"type": "string", "pattern": js.regex(_WORD)})

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        planned: tuple[str, ...] = (setting.value,)
        offered = host.find(choices, plan=planned)
        if setting.value not in offered:
            raise HostError(f"{host.name}: {CHOICES} offers {', '.join(offered)}; not "
                            f"{setting.value!r}")
        return [self.item(PROFILE, "platform_profile", setting.value)]

    def check_paths(self, iface: str | None) -> list[str]:
        return [PROFILE, CHOICES]
