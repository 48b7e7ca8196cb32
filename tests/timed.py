"""The parts of `make test`, timed against tests/budgets.toml (standard library only: the
set-up part runs it before the venv exists).

    python3 tests/timed.py start                 forget the times of an earlier run;
                                                 measure the machine's speed
    python3 tests/timed.py run PART -- CMD ...   run CMD, record its time as PART's
    python3 tests/timed.py report                each part's time against its budget;
                                                 exit 1 when one took over 1.5 x its budget

A part that fails prints the times so far and exits with its command's code. Times go to
.test-times.json in the working directory (the repository's root under make).

The budgets are seconds of the machine they were measured on. `start` times a fixed piece
of pure-Python work (best of 7): on a machine slower than that one by a factor k > 1 each
budget is k times as many seconds (the report says so); on a faster one they stay as
written. A new test that makes its part slower shows on every machine; a slower machine
alone does not fail the run (one session's machine was 2.1x slower: every test passed
there and three parts were over 1.5 x the budgets written for the other).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import tomllib
from pathlib import Path

BUDGETS = Path(__file__).with_name("budgets.toml")
TIMES = Path(".test-times.json")
OVER = 1.5  # a part fails the run past this multiple of its budget


SPEED = "(machine)"  # the key of .test-times.json that holds speed()'s seconds


def budgets() -> dict[str, dict[str, object]]:
    parts: dict[str, dict[str, object]] = tomllib.loads(BUDGETS.read_text())["parts"]
    return parts


def reference() -> float:
    """speed()'s seconds on the machine the budgets were measured on."""
    value = tomllib.loads(BUDGETS.read_text())["machine"]["speed"]
    return float(value)


def speed() -> float:
    """Seconds this machine takes for a fixed piece of pure-Python work: the best of 7
    (the least disturbed by what else the machine runs)."""
    best = math.inf
    for _ in range(7):
        start = time.perf_counter()
        total, table = 0, {}
        for i in range(100_000):
            total += i * i % 7
            table[i & 1023] = str(i)
        json.dumps(table)
        best = min(best, time.perf_counter() - start)
    return best


def recorded() -> dict[str, float]:
    try:
        doc = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def save(times: dict[str, float]) -> None:
    TIMES.write_text(json.dumps(times, indent=1) + "\n")


def slower(times: dict[str, float], ref: float) -> float:
    """How many times slower this machine is than the budgets' (whose speed() took
    `ref` s): 1 when faster, or when `start` did not measure it."""
    measured = times.get(SPEED)
    return max(1.0, measured / ref) if measured else 1.0


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def report(times: dict[str, float]) -> tuple[list[str], list[str]]:
    """The table's lines, and the parts over OVER x their budget (or without one)."""
    parts, ref = budgets(), reference()
    k = slower(times, ref)
    lines = [f"make test: each part's time (budgets in {BUDGETS.name}; a part fails past "
             f"{OVER:g} x its budget)"]
    if SPEED in times:
        lines.append(f"  machine: {times[SPEED]:.3f} s for timed.py's speed(), "
                     f"{ref:.3f} s on the budgets' machine: "
                     + (f"{k:.2f} x slower, each budget x {k:.2f}" if k > 1 else
                        "budgets as written"))
    over = []
    for name, seconds in times.items():
        if name == SPEED:
            continue
        written = parts.get(name, {}).get("budget")
        budget = written * k if isinstance(written, int | float) else None
        if budget is None:
            over.append(f"{name} has no budget in {BUDGETS}")
            lines.append(f"  {name:<12} {seconds:7.1f} s   (no budget)")
            continue
        flag = ""
        if seconds > OVER * budget:
            flag = f"   OVER {OVER:g} x budget"
            over.append(f"{name} took {seconds:.0f} s, over {OVER:g} x its budget of "
                        f"{budget:g} s")
        lines.append(f"  {name:<12} {seconds:7.1f} s   budget {budget:5.0f} s{flag}")
    total = sum(v for name, v in times.items() if name != SPEED)
    promised = k * sum(float(p["budget"]) for p in parts.values()  # type: ignore[arg-type]
                       if isinstance(p.get("budget"), int | float))
    lines.append(f"  {'total':<12} {total:7.1f} s   budget {promised:5.0f} s   ({minutes(total)})")
    lines += [f"make test: {o}" for o in over]
    return lines, over


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"]:
        save({SPEED: speed()})
        return 0
    if argv[:1] == ["report"]:
        lines, over = report(recorded())
        print("\n".join(lines), flush=True)
        return 1 if over else 0
    if argv[:1] == ["run"] and len(argv) > 3 and argv[2] == "--":
        part, command = argv[1], argv[3:]
        if part not in budgets():
            print(f"timed.py: part {part!r} has no budget in {BUDGETS}", file=sys.stderr)
            return 2
        start = time.monotonic()
        code = subprocess.run(command, check=False).returncode
        times = recorded()
        times[part] = times.get(part, 0.0) + time.monotonic() - start
        save(times)
        if code != 0:
            print("\n".join(report(times)[0]), flush=True)
        return code
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
