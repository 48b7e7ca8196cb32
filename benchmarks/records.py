"""Which library serialises napilab's records: msgspec, pydantic 2 or cattrs (attrs),
against the standard library's dataclasses + json written by hand (what the manifest
used before harness.records). Measured on this machine, in one run:

- the import a cold `napilab` pays (a fresh interpreter, median of 5 `-c "import X"`
  less the bare interpreter's start);
- a manifest of 400 trials (five changes read back and five restore entries each, the
  shape benchmarks/store.py writes): encode to JSON bytes, and decode and validate into
  the typed records (median of 7);
- defining the five record classes and the first decode (`define`: what a process
  pays once);
- whether a wrong-typed field is refused with the field's path in the message.

    python benchmarks/records.py [--trials 400]

Candidates not installed are skipped and named (`pip install msgspec pydantic cattrs`
in a scratch venv to measure all three; napilab depends on the one chosen only).
Figures are printed, not asserted.
"""


import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

REPEAT = 7


def import_ms(module: str) -> float | None:
    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start
    try:
        __import__(module)
    except ImportError:
        return None
    bare = statistics.median(once("pass") for _ in range(5))
    loaded = statistics.median(once(f"import {module}") for _ in range(5))
    return (loaded - bare) * 1e3


def document(trials: int) -> dict[str, Any]:
    def change(k: int) -> dict[str, Any]:
        return {"host": "peer", "role": "receiver", "kind": "netdev",
                "target": f"data0/knob_{k}", "path": f"/sys/class/net/data0/knob_{k}",
                "original": "0", "requested": "20000", "effective": "20000",
                "backend": "file",
                "verdict": {"state": "taken", "requested": "20000", "effective": "20000"}}

    def trial(i: int) -> dict[str, Any]:
        changes = [change(k) for k in range(5)]
        return {"index": i, "id": f"{i:03d}", "variant": f"variant-{i % 5}",
                "rep": 1 + i // 5, "status": "ok", "start": 1.5 * i, "end": 1.5 * i + 1,
                "settings": changes,
                "restore": [{"host": "peer", "target": c["target"], "path": c["path"],
                             "restored": "0"} for c in changes]}
    return {"schema_version": 3, "run_id": "20261205T000000Z-00000000",
            "trials": [trial(i) for i in range(1, trials + 1)]}


def median_ms(work: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


# ---------------------------------------------------------------- the candidates


def stdlib(doc: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], Any], str]:
    @dataclasses.dataclass(frozen=True)
    class Verdict:
        state: str
        requested: str
        effective: str

    @dataclasses.dataclass(frozen=True)
    class Change:
        host: str
        role: str
        kind: str
        target: str
        path: str
        original: str
        requested: str
        effective: str | None = None
        backend: str = "file"
        verdict: Verdict | None = None

    @dataclasses.dataclass(frozen=True)
    class Restore:
        host: str
        target: str
        path: str
        restored: str

    @dataclasses.dataclass
    class Trial:
        index: int
        id: str
        variant: str
        rep: int
        status: str
        start: float | None = None
        end: float | None = None
        settings: list[Change] | None = None
        restore: list[Restore] | None = None

    @dataclasses.dataclass
    class Manifest:
        schema_version: int
        run_id: str
        trials: list[Trial]

    def change_in(c: dict[str, Any]) -> Change:
        v = c.get("verdict")
        return Change(**{**c, "verdict": Verdict(**v) if v else None})

    def decode(data: bytes) -> Manifest:
        raw = json.loads(data)
        return Manifest(raw["schema_version"], raw["run_id"], [
            Trial(**{**t, "settings": [change_in(c) for c in t["settings"]],
                     "restore": [Restore(**r) for r in t["restore"]]})
            for t in raw["trials"]])

    def change_out(c: Change) -> dict[str, Any]:
        v = c.verdict
        return {"host": c.host, "role": c.role, "kind": c.kind, "target": c.target,
                "path": c.path, "original": c.original, "requested": c.requested,
                "effective": c.effective, "backend": c.backend,
                "verdict": None if v is None else {"state": v.state,
                                                   "requested": v.requested,
                                                   "effective": v.effective}}

    manifest = decode(json.dumps(doc).encode())

    def encode() -> bytes:
        return json.dumps({"schema_version": manifest.schema_version,
                           "run_id": manifest.run_id,
                           "trials": [{"index": t.index, "id": t.id, "variant": t.variant,
                                       "rep": t.rep, "status": t.status, "start": t.start,
                                       "end": t.end,
                                       "settings": [change_out(c) for c in t.settings or []],
                                       "restore": [dataclasses.asdict(r)
                                                   for r in t.restore or []]}
                                      for t in manifest.trials]}).encode()

    def refuses(data: bytes) -> str:
        try:
            decode(data)
        except (TypeError, KeyError) as exc:
            return f"refused: {exc}"
        return "accepted"
    return encode, decode, refuses(_wrong(doc))


def with_msgspec(doc: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], Any], str]:
    import msgspec

    class Verdict(msgspec.Struct, frozen=True):
        state: str
        requested: str
        effective: str

    class Change(msgspec.Struct, frozen=True, kw_only=True):
        host: str
        role: str
        kind: str
        target: str
        path: str
        original: str
        requested: str
        effective: str | None = None
        backend: str = "file"
        verdict: Verdict | None = None

    class Restore(msgspec.Struct, frozen=True):
        host: str
        target: str
        path: str
        restored: str

    class Trial(msgspec.Struct, kw_only=True, omit_defaults=True):
        index: int
        id: str
        variant: str
        rep: int
        status: str
        start: float | None = None
        end: float | None = None
        settings: list[Change] | None = None
        restore: list[Restore] | None = None

    class Manifest(msgspec.Struct):
        schema_version: int
        run_id: str
        trials: list[Trial]

    decoder = msgspec.json.Decoder(Manifest)
    encoder = msgspec.json.Encoder()
    manifest = decoder.decode(json.dumps(doc).encode())

    def refuses(data: bytes) -> str:
        try:
            decoder.decode(data)
        except msgspec.ValidationError as exc:
            return f"refused: {exc}"
        return "accepted"
    return (lambda: encoder.encode(manifest)), decoder.decode, refuses(_wrong(doc))


def with_pydantic(doc: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], Any], str]:
    import pydantic

    class Verdict(pydantic.BaseModel, frozen=True):
        state: str
        requested: str
        effective: str

    class Change(pydantic.BaseModel, frozen=True):
        host: str
        role: str
        kind: str
        target: str
        path: str
        original: str
        requested: str
        effective: str | None = None
        backend: str = "file"
        verdict: Verdict | None = None

    class Restore(pydantic.BaseModel, frozen=True):
        host: str
        target: str
        path: str
        restored: str

    class Trial(pydantic.BaseModel):
        index: int
        id: str
        variant: str
        rep: int
        status: str
        start: float | None = None
        end: float | None = None
        settings: list[Change] | None = None
        restore: list[Restore] | None = None

    class Manifest(pydantic.BaseModel):
        schema_version: int
        run_id: str
        trials: list[Trial]

    manifest = Manifest.model_validate_json(json.dumps(doc))

    def refuses(data: bytes) -> str:
        try:
            Manifest.model_validate_json(data)
        except pydantic.ValidationError as exc:
            return "refused: " + " ".join(str(exc).split())[:110]
        return "accepted"
    return (lambda: manifest.model_dump_json().encode()), Manifest.model_validate_json, \
        refuses(_wrong(doc))


def with_cattrs(doc: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], Any], str]:
    import attrs
    import cattrs
    from cattrs.preconf.json import make_converter

    @attrs.frozen
    class Verdict:
        state: str
        requested: str
        effective: str

    @attrs.frozen(kw_only=True)
    class Change:
        host: str
        role: str
        kind: str
        target: str
        path: str
        original: str
        requested: str
        effective: str | None = None
        backend: str = "file"
        verdict: Verdict | None = None

    @attrs.frozen
    class Restore:
        host: str
        target: str
        path: str
        restored: str

    @attrs.define(kw_only=True)
    class Trial:
        index: int
        id: str
        variant: str
        rep: int
        status: str
        start: float | None = None
        end: float | None = None
        settings: list[Change] | None = None
        restore: list[Restore] | None = None

    @attrs.define
    class Manifest:
        schema_version: int
        run_id: str
        trials: list[Trial]

    converter = make_converter()
    manifest = converter.loads(json.dumps(doc), Manifest)

    def refuses(data: bytes) -> str:
        try:
            converter.loads(data, Manifest)
        except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
            return "refused: " + " ".join(repr(exc).split())[:110]
        return "accepted"
    return (lambda: converter.dumps(manifest).encode()), \
        (lambda data: converter.loads(data, Manifest)), refuses(_wrong(doc))


def _wrong(doc: dict[str, Any]) -> bytes:
    """The document with trial 3's rep a list: a reader must refuse it, naming where."""
    bad = json.loads(json.dumps(doc))
    bad["trials"][2]["rep"] = [1]
    return json.dumps(bad).encode()


CANDIDATES = (("dataclasses+json (by hand)", "json", stdlib), ("msgspec", "msgspec", with_msgspec),
              ("pydantic", "pydantic", with_pydantic), ("cattrs", "cattrs", with_cattrs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    args = parser.parse_args()
    doc = document(args.trials)
    size = len(json.dumps(doc))
    print(f"a manifest of {args.trials} trials ({size / 1e6:.2f} MB of JSON), "
          f"median of {REPEAT}; import: median of 5 fresh interpreters less a bare one")
    print(f"  {'library':<28} {'import':>9} {'define':>9} {'encode':>9} {'decode':>9}  "
          "wrong type")
    base: tuple[float, float] | None = None
    for name, module, build in CANDIDATES:
        loaded = import_ms(module)
        if loaded is None:
            print(f"  {name:<28} not installed")
            continue
        start = time.perf_counter()
        encode, decode, refused = build(doc)
        built = (time.perf_counter() - start) * 1e3
        data = encode()
        enc = median_ms(encode)
        dec = median_ms(lambda decode=decode, data=data: decode(data))
        base = base or (enc, dec)
        print(f"  {name:<28} {loaded:7.1f}ms {built:7.1f}ms {enc:7.1f}ms {dec:7.1f}ms  "
              f"{refused[:80]}")
        print(f"  {'':<28} {'':>9} {'':>9} {enc / base[0]:8.2f}x {dec / base[1]:8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
