"""Seed 001 as its letter ran it: the shipped profile seed-001-backlog-napi-vm.yaml
(durations cut to 5 s, repeat 1, and `boot: per-kernel`: the letter boots each kernel
once and runs both experiments in it, as the test does; the shipped profile boots fresh
for every trial of its repeat 2) boots guest b into Debian 6.1-rt (Baseline) and 7.2-rt
(Patched); the letter's own script (seed001_letter.sh, copied verbatim from the cover
letter) runs in the same boot of each kernel, as the last trial of its set (a `command`
variant). Its veth pair takes 192.0.2.1/.2, which b's data0 holds: the trial flushes
data0's addresses first, and the run's next boot (into the other kernel, or b's own at
the end) undoes that and whatever else the script leaves. It cannot run in a network
namespace of its own: net.core.skb_defer_max, which it sets, exists only in the initial
one (6.1-rt: "/proc/sys/net/core/skb_defer_max: No such file or directory" there).
napilab's table and
the script's output must show the same pattern on every row: zero or not, absent or
present, and which column is larger where the script's two columns differ clearly
(2x or more; rows within 2x, such as the echo requests, are noise at these durations).

"Which column is larger" is checked on the rows where the letter's own published table
differs clearly too: skb_attempt_defer_free() is 1,075,050 vs 1,558,153 there (how many
skbs a run frees remotely follows its throughput), and it went either way here (8,562 vs
2,280 from the script in one guest, 1,263 vs 9,410 from napilab between two).

Both outputs are printed (pytest -s) for the record; the numbers are QEMU TCG's, the
pattern is the letter's."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

from napilab.harness.lab.vmbed import VmTestbed
from tests.conftest import ROOT
from tests.integration.vm.conftest import (
    NAPILAB,
    RT_NEW,
    RT_OLD,
    dead_guests,
    guest,
    leftovers,
)

LETTER = Path(__file__).with_name("seed001_letter.sh")
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


def encoded(kernel: str) -> str:
    """The letter's script as one word: napilab refuses an argv with newlines in it."""
    return base64.b64encode(letter_script(kernel).encode()).decode()


def short_profile(tmp_path: Path) -> Path:
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
""" for column, kernel in (("Baseline", RT_OLD), ("Patched", RT_NEW)))
    path = tmp_path / "seed001.yaml"
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


# Rows whose pattern is whether the function exists on the kernel, not whether it was
# hit: the letter's script on 7.2-rt counted kick_defer_list_purge() 0, 1 and 469 times
# in three 5 s runs here (a make test failed on the 0).
PRESENCE_ONLY = ("kick_defer_list_purge()",)


def letter_script(kernel: str) -> str:
    """The letter's script; mainline PREEMPT_RT (7.2) has no /sys/kernel/realtime, so its
    RT check asks uname -v there (as the issue measured it)."""
    text = LETTER.read_text()
    if kernel == RT_NEW:
        text = text.replace("[[ $(cat /sys/kernel/realtime) == 1 ]]",
                            "uname -v | grep -q PREEMPT_RT")
    return text


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


def test_seed_001_table_agrees_with_the_letters_script(tmp_path: Path,
                                                       vm_clean: VmTestbed) -> None:
    own = guest(vm_clean, "b", "uname -r; cat /proc/cmdline").stdout
    for attempt in (1, 2):
        results = tmp_path / f"r{attempt}"
        done = subprocess.run([NAPILAB, "run", str(short_profile(tmp_path)), "-i",
                               str(vm_clean.inventory_path), "-o", str(results),
                               "--format", "text,json"],
                              capture_output=True, text=True, timeout=1800, check=False)
        crashed = dead_guests(vm_clean)
        if done.returncode == 0 or not crashed or attempt == 2:
            break
        # A guest that crashed under TCG (not napilab: its QEMU is gone) is napilab
        # restore's case; the run is made again once, the crash printed for the record.
        print(f"\nguest crashed during the run, console: {crashed}")
        restored = subprocess.run([NAPILAB, "restore", "-i", str(vm_clean.inventory_path)],
                                  capture_output=True, text=True, timeout=900, check=False)
        assert restored.returncode == 0, restored.stdout + restored.stderr
    assert done.returncode == 0, done.stdout + done.stderr + str(crashed)
    run_dir = next((results / "seed-001-backlog-napi-vm").iterdir())
    # every trial ran on its variant's kernel, read back; b is back on its own
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for trial in manifest["trials"]:
        kernel = next(c for c in trial["settings"] if c["kind"] == "kernel")
        want = RT_OLD if trial["variant"].startswith("Baseline") else RT_NEW
        assert kernel["verdict"]["state"] == "taken"
        assert json.loads(kernel["effective"])["release"].startswith(
            {"6.1-rt": "6.1.0-", "7.2-rt": "7.2."}[want]) and "PREEMPT_RT" in kernel[
            "effective"]
    assert guest(vm_clean, "b", "uname -r; cat /proc/cmdline").stdout == own
    assert leftovers(vm_clean) == {"a": [], "b": []}
    assert not manifest.get("hosts_changed")
    text = (run_dir / "report.txt").read_text()
    assert "\n  Baseline: b on 6.1.0-" in text and "\n  Patched: b on 7.2." in text
    assert "host(s) a, b: QEMU TCG, emulated" in text or "KVM" in str(manifest["host_facts"])
    print("\nnapilab's table (napilab run profiles/seed-001-backlog-napi-vm.yaml, 5 s):\n"
          + text.split("\n\n")[0])
    table = json.loads((run_dir / "report.json").read_text())["table"]
    assert table["columns"] == ["Baseline", "Patched"]
    ours = {line["label"]: line for line in table["lines"]}
    assert list(ours)[:len(ROWS)] == list(ROWS)

    letter = {}
    for column, kernel in (("Baseline", RT_OLD), ("Patched", RT_NEW)):
        index = next(t["index"] for t in manifest["trials"]
                     if t["variant"] == f"{column}-letter")
        out = (run_dir / "raw" / f"{index:03d}" / "b" / "client.out").read_text()
        letter[column] = parse_letter(out)
        print(f"\nthe letter's script on {kernel} (SECS={SECS}, guest b, trial {index}):\n"
              + "\n".join(ln for ln in out.splitlines() if re.search(
                  r"KERNEL=|IDLE_IRQ|TARGET_WARN|HITS|PROBE_ABSENT|received|backlog_napi/", ln)))

    disagreements = []
    for label, key in ROWS.items():
        line = ours[label]
        for column in ("Baseline", "Patched"):
            mine = "absent" if column in line.get("absent", []) else pattern(
                line["cells"][column]["value"])
            theirs = pattern(letter[column].get(key, "ABSENT"))
            if label in PRESENCE_ONLY:  # absent or not; its count is noise at 5 s
                mine, theirs = (("absent" if v == "absent" else "present")
                                for v in (mine, theirs))
            if mine != theirs:
                disagreements.append(f"{label} {column}: napilab {mine}, letter {theirs}")
        values = [letter[c].get(key) for c in ("Baseline", "Patched")]
        if all(v not in (None, "ABSENT") for v in values) and clear(*PUBLISHED.get(label,
                                                                                 (1, 1))):
            a, b = (float(v) for v in values)  # type: ignore[arg-type]
            if clear(a, b):  # a clear difference in the script too
                mine_a, mine_b = (line["cells"][c]["value"] for c in ("Baseline", "Patched"))
                if (mine_a > mine_b) != (a > b):
                    disagreements.append(f"{label}: the letter's larger column is "
                                         f"{'Baseline' if a > b else 'Patched'}, napilab's "
                                         "is not")
    assert not disagreements, disagreements
