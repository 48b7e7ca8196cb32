"""A scripted transport for unit tests: a fake host whose files live in a dict. It
answers only the commands napilab's settings, lock and journal code uses (tail -v, tee,
ls, cat, find, rm, the journal and lock writes, the identity read) and fails the test
on anything else."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from napilab.harness.inventory.inventory import Host
from napilab.harness.transport.transport import CommandResult, Process


@dataclass
class FakeHost:
    files: dict[str, str]
    refuse: dict[str, str] = field(default_factory=dict)  # path -> error on write
    ignore: set[str] = field(default_factory=set)  # paths that silently keep their value
    log: list[tuple[str, ...]] = field(default_factory=list)
    machine_id: str = "f" * 32
    boot_id: str = "11111111-2222-3333-4444-555555555555"
    netns: str = "net:[4026531833]"
    mtimes: dict[str, float] = field(default_factory=dict)  # path -> mtime (default: now)
    disk_full: bool = False  # writes under /var/tmp fail with ENOSPC
    unreachable: bool = False  # every command fails as a dropped connection would


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
        if self.fake.unreachable:
            from napilab.harness.errors import HostError

            raise HostError(f"{self.host.name}: connection dropped during `{argv[0]}`")
        word = argv[3] if argv[0] == "sh" else argv[0]
        handler = {"napilab-identity": self._identity, "napilab-create": self._create,
                   "napilab-journal": self._journal, "napilab-sched": self._sched,
                   "cat": self._cat, "find": self._find, "tail": self._tail, "tee": self._tee,
                   "rm": self._rm, "rmdir": self._rmdir, "ls": self._ls,
                   "taskset": self._taskset,
                   # harness.hosts.tracers: no bpftrace runs on a fake host
                   "napilab-tracers": lambda a, _: self._result(a, out="others 0\n")
                   }.get(word)
        if handler is None or (word == "tail" and list(argv[:4]) != ["tail", "-v", "-n", "+1"]):
            raise AssertionError(f"unexpected command {argv}")
        result = handler(argv, stdin)
        return result.check() if check else result

    def _identity(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        fake = self.fake
        return self._result(argv, 0, f"{fake.machine_id}\n{fake.boot_id}\n{fake.netns}\n")

    def _create(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        path = argv[6]  # napilab-create DIR TMP PATH, the content on stdin
        if self.fake.disk_full:
            return self._result(argv, 1, "", "sh: write error: No space left on device")
        if path in self.fake.files:
            return self._result(argv, 1, "", f"ln: failed to create hard link '{path}': "
                                "File exists")
        self.fake.files[path] = stdin or ""
        return self._result(argv)

    def _journal(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        if self.fake.disk_full:
            return self._result(argv, 1, "", "sh: write error: No space left on device")
        self.fake.files[argv[6]] = stdin or ""
        return self._result(argv)

    def _sched(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        """SCHED_READ: affinity and policy of the PIDs, from `/proc/PID/affinity` and
        `/proc/PID/policy` entries of the fake's files (a PID without them is gone)."""
        out = []
        for pid in argv[4:]:
            out.append(f"== {pid}")
            cpus = self.fake.files.get(f"/proc/{pid}/affinity")
            if cpus is not None:
                policy, _, priority = self.fake.files[f"/proc/{pid}/policy"].partition(":")
                out += [f"pid {pid}'s current affinity list: {cpus}",
                        f"pid {pid}'s current scheduling policy: SCHED_{policy.upper()}",
                        f"pid {pid}'s current scheduling priority: {priority}"]
        return self._result(argv, 0, "\n".join(out) + "\n")

    def _taskset(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        cpus, pid = argv[2], argv[3]
        if f"/proc/{pid}/affinity" not in self.fake.files:
            return self._result(argv, 1, "", "taskset: failed to set pid's affinity: No such "
                                "process")
        self.fake.files[f"/proc/{pid}/affinity"] = cpus
        return self._result(argv)

    def _cat(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        path = argv[-1]
        if path in self.fake.files:
            return self._result(argv, 0, self.fake.files[path])
        return self._result(argv, 1, "", f"cat: {path}: No such file or directory")

    def _find(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        directory, pattern = argv[1], argv[5]
        found = [p for p in sorted(self.fake.files) if p.rpartition("/")[0] == directory
                 and fnmatch.fnmatch(p.rpartition("/")[2], pattern)]
        if "-printf" not in argv:
            return self._result(argv, 0, "".join(f"{p}\n" for p in found))
        return self._result(argv, 0, "".join(
            f"{self.fake.mtimes.get(p, time.time())} {p}\n" for p in found))

    def _tail(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        out, err = [], []
        for path in argv[5:]:
            if path in self.fake.files:
                out.append(f"==> {path} <==\n{self.fake.files[path]}")
            else:
                err.append(f"tail: cannot open '{path}' for reading: No such file")
        return self._result(argv, 1 if err else 0, "\n".join(out), "\n".join(err))

    def _tee(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        path = argv[2]
        if path in self.fake.refuse:
            return self._result(argv, 1, "", f"tee: {path}: {self.fake.refuse[path]}")
        if path not in self.fake.ignore:
            self.fake.files[path] = stdin or ""
        return self._result(argv)

    def _rm(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        self.fake.files.pop(argv[-1], None)
        return self._result(argv)

    def _rmdir(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        return self._result(argv)  # directories are implied by the files' paths

    def _ls(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        prefix = argv[-1] + "/"
        names = sorted({p[len(prefix):].split("/")[0] for p in self.fake.files
                        if p.startswith(prefix)})
        return self._result(argv, 0 if names else 2, "\n".join(names) + "\n")

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> Process:
        raise AssertionError(f"unexpected start {argv}")

    def read_file(self, path: str) -> str:
        return self.run(["cat", "--", path]).stdout

    def write_file(self, path: str, data: str) -> None:
        self.run(["tee", "--", path], stdin=data)

    def close(self) -> None:
        pass
