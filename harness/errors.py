"""The one user-facing exception family and the exit codes of the CLI contract.

Every error a user can act on derives from `NapilabError`; `harness.cli.main.main` catches
it once, prints `napilab: error: ...` and exits with the error's `exit_code`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of the CLI (docs/design.md, "Contracts")."""

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    REGRESSION = 3
    PARTIAL = 4
    INCONCLUSIVE = 5  # `check` could judge no gated metric
    INTERRUPTED = 130


class NapilabError(Exception):
    """Base of every error napilab reports to the user."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


@dataclass(frozen=True)
class Location:
    """Where in a YAML file a value was written (1-based line and column)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One mistake in a profile or inventory: where, which key, what was expected."""

    location: Location | None
    key_path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        key = f"{self.key_path}: " if self.key_path else ""
        return f"{where}{key}{self.message}"


@dataclass(frozen=True)
class Written:
    """Where a value was written and its full key path, kept for the checks that run
    later (binding to an inventory) so their errors point at the value, not its role."""

    location: Location | None
    key_path: str


class InputError(NapilabError):
    """Bad input (profile, inventory, command-line value): exit 2, no host touched."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, problems: list[Problem] | str, *, hint: str = "") -> None:
        if isinstance(problems, str):
            problems = [Problem(None, "", problems)]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems), hint=hint)


class HostError(NapilabError):
    """A host could not be reached or a command on it failed."""


class RestoreIncomplete(HostError):
    """A host could not be put back as it was; its journal stays for `napilab restore`.
    A run stops here: the next trial would start from a host in an unknown state."""


class CommandError(HostError):
    """A command exited non-zero where success was required."""

    def __init__(
        self, host: str, argv: tuple[str, ...], exit_code: int, stderr: str, *, hint: str = ""
    ) -> None:
        import shlex

        tail = "\n".join(stderr.strip().splitlines()[-5:])
        message = f"{host}: `{shlex.join(argv)}` exited {exit_code}"
        if tail:
            message += ": " + tail
        super().__init__(message, hint=hint)
        self.host = host
        self.argv = argv
        self.returncode = exit_code
        self.stderr = stderr


class StorageError(NapilabError):
    """The results directory cannot be written (disk full, read-only, quota), or a
    stored run cannot be read (a damaged file): exit 1, the file named."""


class SettingMismatch(NapilabError):
    """A knob read back a value other than the one written (policy: fail)."""


class Interrupted(NapilabError):
    """SIGINT or SIGTERM arrived; hosts were restored before this was raised."""

    exit_code = ExitCode.INTERRUPTED
