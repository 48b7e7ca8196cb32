"""Seed 001 as its letter ran it, shared by the recorder of its stored run
(tests/golden/seed001/record.py) and the test that judges that run
(tests/unit/test_seed001_letter.py).

The shipped profile seed-001-backlog-napi-vm.yaml (durations cut to 5 s, repeat 1, and
`boot: per-kernel`: the letter boots each kernel once and runs both experiments in it;
the shipped profile boots fresh for every trial of its repeat 2) boots guest b into
Debian 6.1-rt (Baseline) and 7.2-rt (Patched); the letter's own script (letter.sh,
copied verbatim from the cover letter) runs in the same boot of each kernel, as the last
trial of its set (a `command` variant). Its veth pair takes 192.0.2.1/.2, which b's data0
holds: the trial flushes data0's addresses first, and the run's next boot (into the other
kernel, or b's own at the end) undoes that and whatever else the script leaves. It cannot
run in a network namespace of its own: net.core.skb_defer_max, which it sets, exists
only in the initial one (6.1-rt: "/proc/sys/net/core/skb_defer_max: No such file or
directory" there).

napilab's table and the script's output must show the same pattern on every row: zero
or not, absent or present, and which column is larger where the script's two columns
differ clearly (2x or more; rows within 2x, such as the echo requests, are noise at these
durations). "Which column is larger" is checked on the rows where the letter's own
published table differs clearly too: skb_attempt_defer_free() is 1,075,050 vs 1,558,153
there (how many skbs a run frees remotely follows its throughput), and it went either
way here (8,562 vs 2,280 from the script in one guest, 1,263 vs 9,410 from napilab
between two)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "tests" / "golden" / "seed001" / "letter.sh"
RT_OLD, RT_NEW = "6.1-rt", "7.2-rt"
SECS = 5
# The letter's table (Baseline, Patched), for the rows it tells apart by size.
PUBLISHED = {"Idle hardirq (ms)": (10, 10), "Load hardirq (ms)": (900, 40),
             "received_rps delta": (2390909, 0), "Function-call IPIs": (2390695, 947),
             "Echo requests received": (2390916, 2473383), "Target WARNING records": (1, 0),
             "skb_attempt_defer_free()": (1075050, 1558153),
             "trigger_rx_softirq()": (176249, 0)}
# napilab's row label -> the script's value
ROWS = {"Idle hardirq (ms)": "IDLE_IRQ_MS", "Load hardirq (ms)": "LOAD_IRQ_MS",
        "received_rps delta": "RPS_CALLBACKS", "Function-call IPIs": "CALL_IPI",
        "Echo requests received": "received", "Target WARNING records": "TARGET_WARNINGS",
        "skb_attempt_defer_free()": "def_free", "kick_defer_list_purge()": "kick",
        "trigger_rx_softirq()": "trig", "backlog_napi threads": "backlog_napi"}
# Rows whose pattern is whether the function exists on the kernel, not whether it was
# hit: the letter's script on 7.2-rt counted kick_defer_list_purge() 0, 1 and 469 times
# in three 5 s runs here (a make test failed on the 0).
PRESENCE_ONLY = ("kick_defer_list_purge()",)
COLUMNS = (("Baseline", RT_OLD), ("Patched", RT_NEW))


def letter_script(kernel: str) -> str:
    """The letter's script; mainline PREEMPT_RT (7.2) has no /sys/kernel/realtime, so its
    RT check asks uname -v there (as the issue measured it)."""
    text = LETTER.read_text()
    if kernel == RT_NEW:
        text = text.replace("[[ $(cat /sys/kernel/realtime) == 1 ]]",
                            "uname -v | grep -q PREEMPT_RT")
    return text


def encoded(kernel: str) -> str:
    """The letter's script as one word: napilab refuses an argv with newlines in it."""
    return base64.b64encode(letter_script(kernel).encode()).decode()


def short_profile(directory: Path) -> Path:
    letters = "".join(f"""\
  {column}-letter:
    group: letter
    kernel: {{receiver: "{kernel}"}}
    workload:
      tool: command
      duration: {SECS}
      timeout: 600
      idle: 0
      warmup: 0
      client:
        role: receiver
        cpus: "0-2"  # all of b's three: unpinned, as the letter ran it
        args:
          argv: [sh, -c, {json.dumps(f'ip addr flush dev data0 && exec env SECS={SECS} '
                                     f'MODE=rps bash -c "$(echo {encoded(kernel)} | base64 -d)"')}]
          metrics: {{call_ipi: {{regex: 'CALL_IPI=(\\d+)', unit: count}}}}
""" for column, kernel in COLUMNS)
    path = directory / "seed001.yaml"
    path.write_text(f"""\
name: seed-001-backlog-napi-vm
extends: {ROOT / "profiles" / "seed-001-backlog-napi-vm.yaml"}
workload: {{duration: {SECS}, idle: {SECS}}}
variants:
  Baseline-defer: {{workload: {{duration: {SECS}}}}}
  Patched-defer: {{workload: {{duration: {SECS}}}}}
{letters}repeat: 1
boot: per-kernel
""")
    return path


def letter_trial(manifest: dict[str, Any], column: str) -> int:
    """The index of the trial in which the letter's script ran on `column`'s kernel."""
    return int(next(t["index"] for t in manifest["trials"]
                    if t["variant"] == f"{column}-letter"))


def letter_output(run_dir: Path, index: int) -> Path:
    return run_dir / "raw" / f"{index:03d}" / "b" / "client.out"


def parse_letter(out: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in re.findall(r"\b([A-Z_]+)=(\S+)", out):
        found[key] = value
    for name, value in re.findall(r"\b(def_free|kick|trig)=(\S+)", out):
        found[name] = value
    ping = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert ping, out
    found["received"] = ping.group(2)
    found["backlog_napi"] = str(len(re.findall(r"\sbacklog_napi/\d+\s*$", out, re.M)))
    return found


def clear(a: float, b: float) -> bool:
    """Two values differ clearly: one is twice the other or more."""
    return max(a, b) >= 2 * max(min(a, b), 1)


def pattern(value: str | float | None) -> str:
    if value is None or value == "ABSENT":
        return "absent"
    return "zero" if float(value) == 0 else "nonzero"


def disagreements(table: dict[str, Any], letter: dict[str, dict[str, str]]) -> list[str]:
    """Where napilab's table (report.json's) and the letter's script (parsed, by column)
    show a different pattern."""
    ours = {line["label"]: line for line in table["lines"]}
    found = []
    for label, key in ROWS.items():
        line = ours[label]
        for column, _ in COLUMNS:
            mine = "absent" if column in line.get("absent", []) else pattern(
                line["cells"][column]["value"])
            theirs = pattern(letter[column].get(key, "ABSENT"))
            if label in PRESENCE_ONLY:  # absent or not; its count is noise at 5 s
                mine, theirs = (("absent" if v == "absent" else "present")
                                for v in (mine, theirs))
            if mine != theirs:
                found.append(f"{label} {column}: napilab {mine}, letter {theirs}")
        values = [letter[c].get(key) for c, _ in COLUMNS]
        if all(v not in (None, "ABSENT") for v in values) and clear(*PUBLISHED.get(label,
                                                                                 (1, 1))):
            a, b = (float(v) for v in values)  # type: ignore[arg-type]
            if clear(a, b):  # a clear difference in the script too
                mine_a, mine_b = (line["cells"][c]["value"] for c, _ in COLUMNS)
                if (mine_a > mine_b) != (a > b):
                    found.append(f"{label}: the letter's larger column is "
                                 f"{'Baseline' if a > b else 'Patched'}, napilab's is not")
    return found
