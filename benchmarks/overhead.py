"""How much time napilab adds around the workloads it runs (targets: wall/workload <= 1.02,
<= 150 ms per trial; <= 1.05 against the hand-written script).

On the SSH testbed (root; builds and removes its own): 2 variants x 3 repetitions x 5 s
ping-flood trials, with settings on the receiver (3 knobs) and all collectors. Prints

  napilab wall time / sum of workload time
  napilab wall time / wall time of an equivalent hand-written shell script

The script does what a careful engineer would by hand over ssh: read each knob, write
it, run the ping flood, cat the same /proc files and dmesg before and after, write the
originals back, one `ssh` per command. Both figures come from this one run.

Two more napilab runs in the same process, of the same trials and of twice as many
(--repeat doubled), split the overhead into what a run pays once (connecting, locking,
the hosts' facts, the merge at the end) and what each further trial adds (settings,
snapshots, restore, the trial's files): the line through their overheads, by trial
count. Both import nothing new (the first run did), so the slope is not the imports'.

    .venv/bin/python benchmarks/overhead.py [--duration 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from napilab.harness.cli.main import execute  # noqa: E402
from napilab.harness.engine.progress import QuietProgress  # noqa: E402
from napilab.harness.inventory.inventory import load_inventory  # noqa: E402
from napilab.harness.lab.netns import Testbed  # noqa: E402
from napilab.harness.profile.plan import bind  # noqa: E402
from napilab.harness.profile.profile import load_profile  # noqa: E402

PROFILE = """\
name: overhead
hosts:
  sender: {{host: a}}
  receiver: {{host: b}}
setup:
  receiver:
    netdev: {{data0: {{gro_flush_timeout: 20000, napi_defer_hard_irqs: 2}}}}
workload:
  tool: ping
  duration: {duration}
  client: {{role: sender, cpus: "0"}}
  server: {{role: receiver}}
collect:
  softnet_stat: {{roles: [receiver]}}
  interrupts: {{roles: [receiver]}}
  proc_stat: {{roles: [receiver]}}
  softirqs: {{roles: [receiver]}}
  napi_threads: {{roles: [receiver]}}
  dmesg: {{roles: [receiver], patterns: {{warnings: "WARNING"}}}}
variants:
  rps-off: {{setup: {{receiver: {{rps: {{data0: none}}}}}}}}
  rps-remote: {{setup: {{receiver: {{rps: {{data0: "1"}}}}}}}}
repeat: {repeat}
"""
KNOBS = ["/sys/class/net/data0/gro_flush_timeout", "/sys/class/net/data0/napi_defer_hard_irqs",
         "/sys/class/net/data0/queues/rx-0/rps_cpus"]
PROC = ["/proc/net/softnet_stat", "/proc/interrupts", "/proc/stat", "/proc/softirqs"]


def run_napilab(bed: Testbed, work: Path, duration: float, repeat: int) -> tuple[float, float]:
    work.mkdir()
    profile = work / "overhead.yaml"
    profile.write_text(PROFILE.format(duration=duration, repeat=repeat))
    plan = bind(load_profile(profile), load_inventory(bed.inventory_path))
    start = time.monotonic()
    code = execute(plan, str(work / "results"), formats=[], progress=QuietProgress())
    wall = time.monotonic() - start
    assert int(code) == 0, code
    run_dir = next((work / "results" / "overhead").iterdir())
    workload = sum(json.loads(p.read_text())["duration"]
                   for p in run_dir.glob("raw/*/a/client.json"))
    return wall, workload


def shell_script(bed: Testbed, duration: float, repeat: int) -> str:
    key, known = bed.state / "id_ed25519", bed.state / "known_hosts"
    ssh = (f"ssh -i {key} -o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes "
           "-o BatchMode=yes -o ControlMaster=no")
    a, b = "root@198.51.100.2", "root@198.51.100.6"
    lines = ["set -e"]
    for _ in range(repeat):
        for rps in ("0", "2"):
            values = ["20000", "2", rps]
            for knob, value in zip(KNOBS, values, strict=True):
                lines.append(f"orig_{abs(hash(knob))}=$({ssh} {b} cat {knob})")
                lines.append(f"{ssh} {b} {shlex.quote(f'echo {value} > {knob}')}")
            lines.append(f"{ssh} {b} cat {' '.join(PROC)} >/dev/null; {ssh} {b} dmesg >/dev/null")
            lines.append(f"{ssh} {a} taskset -c 0 ping -n -f -q -w {duration:g} 192.0.2.2 "
                         ">/dev/null")
            lines.append(f"{ssh} {b} cat {' '.join(PROC)} >/dev/null; {ssh} {b} dmesg >/dev/null")
            for knob in KNOBS:
                var = f"orig_{abs(hash(knob))}"
                lines.append(f'{ssh} {b} "echo ${var} > {knob}"')
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("overhead.py needs root (it builds the netns testbed with sshd)")
    bed = Testbed(prefix="napilabb")
    bed.down()
    bed.up(ssh=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            wall, workload = run_napilab(bed, work / "n0", args.duration, args.repeat)
            wall1, workload1 = run_napilab(bed, work / "n1", args.duration, args.repeat)
            wall2, workload2 = run_napilab(bed, work / "n2", args.duration, 2 * args.repeat)
            script = work / "by-hand.sh"
            script.write_text(shell_script(bed, args.duration, args.repeat))
            start = time.monotonic()
            subprocess.run(["bash", str(script)], check=True)
            by_hand = time.monotonic() - start
    finally:
        bed.down()
    trials = 2 * args.repeat
    print(f"trials: {trials} x {args.duration:g} s ping flood, settings on 1 host, "
          "6 collectors")
    print(f"sum of workload time (client commands): {workload:8.2f} s")
    print(f"napilab wall time (connect..restored):  {wall:8.2f} s")
    print(f"hand-written ssh script wall time:      {by_hand:8.2f} s")
    print(f"napilab wall / workload time:           {wall / workload:8.3f}   (target <= 1.02)")
    print(f"napilab wall / hand-written script:     {wall / by_hand:8.3f}   (target <= 1.05)")
    print(f"overhead per trial:                     {(wall - workload) / trials * 1000:8.0f} ms"
          "   (target <= 150 ms)")
    added = ((wall2 - workload2) - (wall1 - workload1)) / trials
    fixed = (wall1 - workload1) - added * trials
    for n, (w, load) in ((trials, (wall1, workload1)), (2 * trials, (wall2, workload2))):
        print(f"again, {n} trials: wall {w:.2f} s, workload {load:.2f} s, wall / workload "
              f"{w / load:.3f}, {(w - load) / n * 1000:.0f} ms per trial")
    print(f"  paid once a run (intercept):          {fixed * 1000:8.0f} ms")
    print(f"  added by each trial (slope):          {added * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
