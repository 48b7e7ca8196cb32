"""What the profile JSON Schema costs an editor or a CI check: the size of the file
(`profiles/schema/profile.schema.json`, what `napilab schema profile` prints), how many
subschemas, `$ref`s and `$defs` it has, and, each phase in a fresh interpreter, median
of N runs: reading the JSON, checking it against the draft 2020-12 metaschema
(`check_schema`, what check-jsonschema does first), building the validator
(`validator_for(schema)(schema)`), then validating every shipped profile with
`iter_errors` (cold: references resolved and regexes compiled for the first time) and
once more (warm). The jsonschema package of the venv measures it (check-jsonschema is
jsonschema underneath).

    .venv/bin/python benchmarks/schema_size.py [--runs 5] [SCHEMA.json ...]

With files, each is measured against the same profiles (e.g. an older schema:
`git show HEAD~1:profiles/schema/profile.schema.json > /tmp/old.json`). Figures are
printed, not asserted (tests/unit/test_json_schema.py checks the schema's content).

Measured on this project's shared 2-CPU VM (issue 21, item 8), three runs of 5 each: with
every tool's args written out per tool and again per inherited variant, 594 KB, 5,741
subschemas, check_schema 3.6-4.8 s; with shared `$defs`, 141 KB, 1,612 subschemas,
check_schema 0.77-1.03 s; validating the 7 shipped profiles 30-60 ms either way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "profiles" / "schema" / "profile.schema.json"
PHASES = ("read", "check_schema", "validator", "validate cold", "validate warm")


def shipped_profiles() -> list[Path]:
    return sorted(p for p in (ROOT / "profiles").glob("*.yaml") if "inventory" not in p.name)


def child(schema_path: Path) -> None:
    """One run, in this fresh interpreter: seconds per phase as JSON on stdout."""
    import jsonschema
    import yaml

    documents = [yaml.safe_load(p.read_text()) for p in shipped_profiles()]
    times: dict[str, float] = {}
    start = time.perf_counter()
    schema = json.loads(schema_path.read_text())
    times["read"] = time.perf_counter() - start
    cls = jsonschema.validators.validator_for(schema)
    start = time.perf_counter()
    cls.check_schema(schema)
    times["check_schema"] = time.perf_counter() - start
    start = time.perf_counter()
    validator = cls(schema)
    times["validator"] = time.perf_counter() - start
    errors = 0
    for phase in ("validate cold", "validate warm"):
        start = time.perf_counter()
        errors = sum(1 for doc in documents for _ in validator.iter_errors(doc))
        times[phase] = time.perf_counter() - start
    print(json.dumps({"times": times, "errors": errors}))


def shape(schema: Any) -> tuple[int, int, int]:
    """(subschemas, $refs, $defs) of a schema."""
    subschemas = refs = 0
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            subschemas += 1
            refs += "$ref" in node
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return subschemas, refs, len(schema.get("$defs", {}))


def measure(path: Path, runs: int) -> None:
    text = path.read_text()
    subschemas, refs, defs = shape(json.loads(text))
    samples = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, __file__, "--child", str(path)], check=True,
                              capture_output=True, text=True, cwd=ROOT)
        samples.append(json.loads(done.stdout))
    errors = {s["errors"] for s in samples}
    print(f"{path}: {len(text.encode()):,} bytes ({len(text.encode()) / 1024:.0f} KB), "
          f"{subschemas:,} subschemas, {refs:,} $refs, {defs} $defs")
    for phase in PHASES:
        print(f"  {phase:<14} {statistics.median(s['times'][phase] for s in samples) * 1e3:8.1f}"
              " ms")
    total = statistics.median(sum(s["times"][p] for p in PHASES[:4]) for s in samples)
    print(f"  {'read to cold':<14} {total * 1e3:8.1f} ms   "
          f"({len(shipped_profiles())} shipped profiles, errors {sorted(errors)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("schemas", nargs="*", type=Path, default=[SCHEMA])
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    from importlib.metadata import version

    print(f"profile JSON Schema, median of {args.runs} fresh runs per phase "
          f"(jsonschema {version('jsonschema')}, Python {sys.version.split()[0]}):")
    for path in args.schemas:
        measure(path, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
