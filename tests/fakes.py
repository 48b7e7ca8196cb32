"""A scripted transport for unit tests: a fake host whose files live in a dict. It
answers only the commands napilab's settings code uses (tail -v, tee, ls, sh journal
write, rm) and fails the test on anything else."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.profile.inventory import Host
from harness.transport.transport import CommandResult, Process


@dataclass
class FakeHost:
    files: dict[str, str]
    refuse: dict[str, str] = field(default_factory=dict)  # path -> error on write
    ignore: set[str] = field(default_factory=set)  # paths that silently keep their value
    log: list[tuple[str, ...]] = field(default_factory=list)


class FakeTransport:
    def __init__(self, fake: FakeHost, name: str = "fake") -> None:
        self.host = Host(name=name, transport="local")
        self.fake = fake

    def _result(self, argv: Sequence[str], code: int = 0, out: str = "",
                err: str = "") -> CommandResult:
        return CommandResult(self.host.name, tuple(argv), code, out, err, time.time(), 0.0)

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        self.fake.log.append(tuple(argv))
        files = self.fake.files
        if argv[:4] == ["tail", "-v", "-n", "+1"]:
            out, err = [], []
            for path in argv[5:]:
                if path in files:
                    out.append(f"==> {path} <==\n{files[path]}")
                else:
                    err.append(f"tail: cannot open '{path}' for reading: No such file")
            result = self._result(argv, 1 if err else 0, "\n".join(out), "\n".join(err))
        elif argv[0] == "tee":
            path = argv[2]
            if path in self.fake.refuse:
                result = self._result(argv, 1, "", f"tee: {path}: {self.fake.refuse[path]}")
            else:
                if path not in self.fake.ignore:
                    files[path] = stdin or ""
                result = self._result(argv)
        elif argv[0] == "sh" and argv[3] == "napilab-journal":
            files[argv[6]] = stdin or ""
            result = self._result(argv)
        elif argv[0] == "rm":
            files.pop(argv[-1], None)
            result = self._result(argv)
        elif argv[0] == "ls":
            prefix = argv[-1] + "/"
            names = sorted({p[len(prefix):].split("/")[0] for p in files if p.startswith(prefix)})
            result = self._result(argv, 0 if names else 2, "\n".join(names) + "\n")
        else:
            raise AssertionError(f"unexpected command {argv}")
        return result.check() if check else result

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Process:
        raise AssertionError(f"unexpected start {argv}")

    def read_file(self, path: str) -> str:
        return self.run(["cat", "--", path]).stdout

    def write_file(self, path: str, data: str) -> None:
        self.run(["tee", "--", path], stdin=data)

    def close(self) -> None:
        pass
