"""The parts of `make test`, timed against tests/budgets.toml (standard library only: the
set-up part runs it before the venv exists).

    python3 tests/timed.py start                 forget the times of an earlier run
    python3 tests/timed.py run PART -- CMD ...   run CMD, record its time as PART's
    python3 tests/timed.py report                each part's time against its budget;
                                                 exit 1 when one took over 1.5 x its budget

A part that fails prints the times so far and exits with its command's code. Times go to
.test-times.json in the working directory (the repository's root under make).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

BUDGETS = Path(__file__).with_name("budgets.toml")
TIMES = Path(".test-times.json")
OVER = 1.5  # a part fails the run past this multiple of its budget


def budgets() -> dict[str, dict[str, object]]:
    parts: dict[str, dict[str, object]] = tomllib.loads(BUDGETS.read_text())["parts"]
    return parts


def recorded() -> dict[str, float]:
    try:
        doc = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def report(times: dict[str, float]) -> tuple[list[str], list[str]]:
    """The table's lines, and the parts over OVER x their budget (or without one)."""
    parts = budgets()
    lines = [f"make test: each part's time (budgets in {BUDGETS.name}; a part fails past "
             f"{OVER:g} x its budget)"]
    over = []
    for name, seconds in times.items():
        budget = parts.get(name, {}).get("budget")
        if not isinstance(budget, int | float):
            over.append(f"{name} has no budget in {BUDGETS}")
            lines.append(f"  {name:<12} {seconds:7.1f} s   (no budget)")
            continue
        flag = ""
        if seconds > OVER * budget:
            flag = f"   OVER {OVER:g} x budget"
            over.append(f"{name} took {seconds:.0f} s, over {OVER:g} x its budget of "
                        f"{budget:g} s")
        lines.append(f"  {name:<12} {seconds:7.1f} s   budget {budget:5.0f} s{flag}")
    total = sum(times.values())
    promised = sum(float(p["budget"]) for p in parts.values()  # type: ignore[arg-type]
                   if isinstance(p.get("budget"), int | float))
    lines.append(f"  {'total':<12} {total:7.1f} s   budget {promised:5.0f} s   ({minutes(total)})")
    lines += [f"make test: {o}" for o in over]
    return lines, over


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"]:
        TIMES.unlink(missing_ok=True)
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
        TIMES.write_text(json.dumps(times, indent=1) + "\n")
        if code != 0:
            print("\n".join(report(times)[0]), flush=True)
        return code
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
