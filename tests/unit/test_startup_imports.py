"""`napilab --help`, shell completion and `validate` start without the scientific stack
(issue 21): importing the CLI and running these commands imports none of the heavy
libraries; the commands that compute (run, report, compare, check, parse of a samples
file...) import them when they run. Checked in a fresh interpreter, whose sys.modules no
other test filled; benchmarks/startup.py prints what a start costs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "duckdb", "ruptures",
         "paramiko", "jinja2")
SEED_000 = ROOT / "profiles" / "seed-000-threaded-busypoll.yaml"
INVENTORY = ROOT / "profiles" / "inventory.example.yaml"
COMPLETE_COMMANDS = {"_NAPILAB_COMPLETE": "bash_complete", "COMP_WORDS": "napilab ",
                     "COMP_CWORD": "1"}

# Runs each step in-process, in order, and prints {step: [exit code, heavy modules loaded
# by then]} as JSON: the first step that lists a module is the one that imported it.
SCRIPT = """
import contextlib, io, json, os, sys

heavy, steps = json.loads(sys.argv[1]), json.loads(sys.argv[2])
loaded = lambda: [name for name in heavy if name in sys.modules]
from napilab.harness.cli.main import main

found = {"import napilab.harness.cli.main": [0, loaded()]}
for step, argv, env in steps:
    os.environ.update(env)
    code = None
    with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())):  # completion: bytes
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code
    for key in env:
        del os.environ[key]
    found[step] = [code, loaded()]
print(json.dumps(found))
"""


def test_help_completion_and_validate_import_no_heavy_library() -> None:
    steps = [
        ("napilab --help", ["--help"], {}),
        ("completion of `napilab `", [], COMPLETE_COMMANDS),
        ("napilab validate seed-000", ["validate", str(SEED_000)], {}),
        ("napilab validate seed-000 -i", ["validate", str(SEED_000), "-i", str(INVENTORY),
                                          "--strict"], {}),
    ]
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(HEAVY), json.dumps(steps)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert list(found) == ["import napilab.harness.cli.main", *(step for step, _, _ in steps)]
    for step, (code, modules) in found.items():
        assert code == 0, f"{step}: exit {code}\n{done.stderr}"
        assert modules == [], f"{step} imported {', '.join(modules)}"
