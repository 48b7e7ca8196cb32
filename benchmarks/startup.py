"""How long `napilab` takes to start (issue 21's targets: `--help` <= 0.3 s, `validate`
<= 0.5 s on a 2-CPU machine): `napilab --help`, one shell-completion request (what a
TAB waits for: click's bash_complete of `napilab `) and `napilab validate` of a seed
profile, each run N times through the venv's `napilab` script. Prints, per command, the
median wall time, the median of each run's maximum resident set size, and which of the
heavy libraries the command imported (one more run under PYTHONPROFILEIMPORTTIME);
`python -c pass` first, the floor no command can go below.

Then `validate` of generated profiles of 1,000, 4,000, 16,000 and 100,000 variants, each
written out (one line per variant, ~64 bytes each) and as a matrix of 10 x N/10: time
and memory per size, and the time per 1,000 variants (linear: about constant), or the
limit's one-line error (docs/profiles.md, Limits); a run over --timeout is killed.

    .venv/bin/python benchmarks/startup.py [--runs 5] [--profile PROFILE] [--no-scale]
                                           [--timeout 120]

Figures are printed, not asserted (tests/unit/test_startup_imports.py checks that
these commands import none of the heavy libraries).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "profiles" / "seed-000-threaded-busypoll.yaml"
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "duckdb", "ruptures",
         "paramiko", "jinja2")


@dataclass(frozen=True)
class Case:
    label: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Figures:
    wall: float  # seconds, median
    rss: float  # MB, median of each run's maximum
    heavy: tuple[str, ...]


def napilab() -> tuple[str, ...]:
    script = Path(sys.executable).parent / "napilab"
    return (str(script),) if script.exists() else (sys.executable, "-m", "napilab.harness.cli.main")


def cases(profile: Path) -> list[Case]:
    cmd = napilab()
    return [
        Case("python -c pass", (sys.executable, "-c", "pass")),
        Case("napilab --help", (*cmd, "--help")),
        Case("completion (TAB)", cmd, (("_NAPILAB_COMPLETE", "bash_complete"),
                                       ("COMP_WORDS", "napilab "), ("COMP_CWORD", "1"))),
        Case("validate " + "-".join(profile.stem.split("-")[:2]),
             (*cmd, "validate", str(profile))),
    ]


def run_once(case: Case, extra_env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """One run: wall seconds, maximum RSS in MB (this child's own, from wait4), stderr."""
    env = {**os.environ, **dict(case.env), **(extra_env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        pid = os.posix_spawn(case.argv[0], list(case.argv), env,
                             file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(case.argv)} exited {code}:\n{stderr}")
    return wall, usage.ru_maxrss / 1024, stderr


def imported(case: Case) -> tuple[str, ...]:
    """The heavy top-level packages the command imported (-X importtime's lines)."""
    _, _, stderr = run_once(case, {"PYTHONPROFILEIMPORTTIME": "1"})
    names = {line.rpartition("|")[2].strip().split(".")[0]
             for line in stderr.splitlines() if line.startswith("import time:")}
    return tuple(h for h in HEAVY if h in names)


def measure(case: Case, runs: int) -> Figures:
    samples = [run_once(case) for _ in range(runs)]
    return Figures(statistics.median(s[0] for s in samples),
                   statistics.median(s[1] for s in samples), imported(case))


HEAD = """\
name: scale
hosts: {sender: {host: a}, receiver: {host: b}}
workload: {tool: ping, duration: 1, client: {role: sender}, server: {role: receiver}}
repeat: 10
metrics: {rtt_avg: {direction: lower, max_regression: 25%}}
"""
SIZES = (1000, 4000, 16000, 100000)


def scale_profile(n: int, form: str, directory: Path) -> Path:
    path = directory / f"{form}-{n}.yaml"
    if form == "written":
        body = "variants:\n" + "".join(
            f"  v{i}: {{setup: {{receiver: {{sysctl: {{net.core.busy_read: {i % 100}}}}}}}}}\n"
            for i in range(n))
    else:
        body = ("variants: {v: {setup: {receiver: {sysctl: {net.core.busy_read: '${x}', "
                "net.core.busy_poll: '${y}'}}}}}\n"
                f"matrix: {{x: {list(range(10))}, y: {list(range(n // 10))}}}\n")
    path.write_text(HEAD + body)
    return path


def validate_scale(cmd: tuple[str, ...], timeout: float) -> None:
    print("\nvalidate of many variants (one run each):")
    print(f"  {'variants':>8} {'form':<8} {'size':>8} {'wall':>8} {'per 1k':>8} {'max RSS':>9}"
          "  outcome")
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            for form in ("written", "matrix"):
                path = scale_profile(n, form, Path(tmp))
                case = Case("", (*cmd, "validate", str(path)))
                env = {**os.environ}
                with tempfile.TemporaryFile() as err:
                    start = time.perf_counter()
                    pid = os.posix_spawn(case.argv[0], list(case.argv), env, file_actions=[
                        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                        (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
                    killed = False
                    while True:
                        done, status, usage = os.wait4(pid, os.WNOHANG)
                        if done:
                            break
                        if time.perf_counter() - start > timeout and not killed:
                            os.kill(pid, 9)
                            killed = True
                        time.sleep(0.02)
                    wall = time.perf_counter() - start
                    err.seek(0)
                    text = err.read().decode(errors="replace").strip().splitlines()
                code = os.waitstatus_to_exitcode(status)
                outcome = f"killed after {timeout:g} s" if killed else "valid" if code == 0 \
                    else f"exit {code}: " + (text[-1].split(": ", 2)[-1] if text else "")
                print(f"  {n:>8,} {form:<8} {path.stat().st_size / 1024:6.0f} KB "
                      f"{wall:6.2f} s {wall / n * 1000:6.3f} s {usage.ru_maxrss / 1024:6.0f} MB"
                      f"  {outcome[:60]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", type=Path, default=PROFILE,
                        help="profile to validate (default: the shipped seed 000)")
    parser.add_argument("--no-scale", action="store_true",
                        help="skip the validation of 1k-100k variants")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds before a validate of many variants is killed")
    args = parser.parse_args()
    chosen = cases(args.profile.resolve())
    print(f"napilab start-up, median of {args.runs} runs ({' '.join(napilab())}, "
          f"{os.cpu_count()} CPUs):")
    print(f"  {'command':<18} {'wall':>8} {'max RSS':>9}  heavy libraries imported")
    for case in chosen:
        got = measure(case, args.runs)
        print(f"  {case.label:<18} {got.wall * 1e3:5.0f} ms {got.rss:6.0f} MB  "
              f"{', '.join(got.heavy) or '-'}")
    if not args.no_scale:
        validate_scale(napilab(), args.timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
