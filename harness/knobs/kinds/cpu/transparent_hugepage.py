"""`transparent_hugepage: {enabled: never, defrag: never}`: the host's transparent
hugepage modes, /sys/kernel/mm/transparent_hugepage/{enabled,defrag}.

The files list every mode the kernel knows with the one in force in brackets
(`always [madvise] never`); that bracketed word is the value read back (its backend
reads it so, which makes the journalled original a word restore can write back). The
words a profile may write are the kernel's (Documentation/admin-guide/mm/transhuge.rst);
a kernel without THP lacks the directory and the apply fails before any write, naming
the file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import FileBackend
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting
from napilab.harness.knobs.values import spaces

DIRECTORY = "/sys/kernel/mm/transparent_hugepage"
MODES = {
    "enabled": ("always", "madvise", "never"),
    "defrag": ("always", "defer", "defer+madvise", "madvise", "never"),
}
_SELECTED = re.compile(r"\[([^\]\s]+)\]")


def selected(text: str) -> str:
    """The bracketed word of a mode file (`always [madvise] never` -> madvise); text
    without brackets (a value as written) as it is."""
    found = _SELECTED.search(text)
    return found.group(1) if found else spaces(text)


class SelectedBackend(FileBackend):
    """Files that list the choices with the one in force in brackets: read as that word."""

    name = "selected_file"

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        return {key: selected(text) for key, text in super().read(keys).items()}


class TransparentHugepage(Kind):
    name = key = "transparent_hugepage"
    backend = SelectedBackend

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        if body is None:
            return []
        check.keys(body, path, MODES)
        out = []
        for attr, modes in MODES.items():
            mode = check.choice(body, attr, path, modes)
            if mode is not None:
                out.append(Setting(role, self.name, attr, mode, grammar.at(body, attr, path)))
        return out

    def json_schema(self) -> js.Schema:
        return js.obj({attr: js.leaf({"enum": list(modes)}) for attr, modes in MODES.items()})

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(f"{DIRECTORY}/{setting.target}",
                          f"transparent_hugepage/{setting.target}", setting.value)]

    def canonical(self, key: str, value: str) -> str:
        return selected(value)

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"{DIRECTORY}/{attr}" for attr in MODES]
