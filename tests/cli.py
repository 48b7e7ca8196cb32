"""The one way the tests run the `napilab` command line (issue 37, item 4).

- `run_cli(capsys, *args)`: in this process, through napilab.harness.cli.main.main, as
  the unit tests do; the exit code and what it printed, read from capsys (or, where no
  capsys fixture reaches, e.g. a module-scoped fixture, from redirected streams).
- `run_napilab(*args)`: the installed `napilab` executable in a subprocess, as a user runs
  it; the CompletedProcess, its output captured as text.
- `start_napilab(*args)`: the same executable left running (a Popen), for the tests that
  interrupt or kill a run.

tests/unit/test_cli_helper_single.py fails if a test runs the CLI any other way."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from napilab.harness.cli.main import main

if TYPE_CHECKING:
    import pytest

# The venv's console script (the tests run with the venv's python).
NAPILAB = str(Path(sys.executable).parent / "napilab")


class CliResult(NamedTuple):
    """What one in-process `napilab` command did: its exit code and its two streams."""

    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str] | None, *args: str) -> CliResult:
    """`napilab ARGS` in this process. main() ends with SystemExit; a plain return counts
    as exit 0. With capsys None the streams are redirected for the call instead."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as redirected:
        if capsys is None:
            redirected.enter_context(contextlib.redirect_stdout(out))
            redirected.enter_context(contextlib.redirect_stderr(err))
        code: object = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
    if capsys is not None:
        captured = capsys.readouterr()
        out.write(captured.out)
        err.write(captured.err)
    if code is not None and not isinstance(code, int):
        # sys.exit("message"): the interpreter prints the message and exits 1
        err.write(f"{code}\n")
        code = 1
    return CliResult(int(code or 0), out.getvalue(), err.getvalue())


def run_napilab(*args: str, timeout: float | None = 300, env: Mapping[str, str] | None = None,
                cwd: str | os.PathLike[str] | None = None, input: str | None = None,
                check: bool = False,
                executable: str | os.PathLike[str] = NAPILAB) -> subprocess.CompletedProcess[str]:
    """`napilab ARGS` as a subprocess, stdout and stderr captured as text. timeout=None
    waits as long as it takes; check=True raises CalledProcessError on a non-zero exit;
    executable is another installation's `napilab` (the wheel test's venv)."""
    return subprocess.run([os.fspath(executable), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd, input=input, check=check)


def start_napilab(*args: str, stderr: int = subprocess.PIPE,
                  start_new_session: bool = False) -> subprocess.Popen[str]:
    """`napilab ARGS` started and left running, stdout a pipe, stderr a pipe too (or
    subprocess.STDOUT: merged into stdout); in a session of its own if asked, so that a
    test can kill its whole process group."""
    return subprocess.Popen([NAPILAB, *args], stdout=subprocess.PIPE, stderr=stderr,
                            text=True, start_new_session=start_new_session)
