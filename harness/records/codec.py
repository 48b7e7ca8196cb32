"""The one codec of napilab's records (msgspec: benchmarks/records.py measured it 27x
faster than hand-written dataclasses + json to encode a 400-trial manifest and 8x to
decode it, with a validation error that names the field's path).

A `Record` is a msgspec Struct whose keys a newer napilab wrote but this one does not
know are kept in `extra` and written back unchanged, beside the known ones (so an older
napilab resuming a newer one's run loses nothing). Fields at their default are left out
of the JSON (the published JSON Schema states every default), except in a record
declared with `omit_defaults=False` (one that other programs poll while it is written,
such as tune.json: every key always there). A `Document` is a record
that is a whole file: it carries `schema_version`, and `MIGRATIONS[v]` turns a version
`v` document (as plain JSON data) into version `v + 1`, so every older version napilab
wrote is read as the current one.

Nothing else in napilab parses its own JSON: tests/unit/test_records.py scans for it.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import msgspec

from napilab.harness.errors import InputError

JSON = dict[str, Any]
R = TypeVar("R", bound="Record | FrozenRecord")


class Record(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A typed record, filled in as it goes (a frozen one is a `FrozenRecord`);
    `extra` holds keys of a newer napilab (never written by this one's code). `WHAT`
    names the record in errors."""

    WHAT: ClassVar[str] = "a record"

    extra: JSON = msgspec.field(default_factory=dict)

    def to_json(self) -> Any:
        """The record as JSON data (dicts, lists, strings, numbers), `extra` merged in."""
        return to_builtins(self)

    @classmethod
    def from_json(cls, doc: Any, where: str = "") -> Self:
        return convert(doc, cls, where or cls.WHAT)


class FrozenRecord(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A Record whose fields never change once made (a change, a host's facts)."""

    WHAT: ClassVar[str] = "a record"

    extra: JSON = msgspec.field(default_factory=dict)

    def to_json(self) -> Any:
        return to_builtins(self)

    @classmethod
    def from_json(cls, doc: Any, where: str = "") -> Self:
        return convert(doc, cls, where or cls.WHAT)


RECORDS = (Record, FrozenRecord)
AnyRecord = Record | FrozenRecord


class Document(Record, kw_only=True):
    """A record that is a whole file, versioned."""

    VERSION: ClassVar[int] = 1
    # version v -> the function that turns a version v document into version v + 1
    MIGRATIONS: ClassVar[Mapping[int, Callable[[JSON], JSON]]] = {}

    schema_version: int = 0  # set to VERSION when written (`encode`)

    @classmethod
    def reads(cls) -> tuple[int, ...]:
        """The versions this napilab reads (older ones through MIGRATIONS)."""
        first = cls.VERSION
        while first - 1 in cls.MIGRATIONS:
            first -= 1
        return tuple(range(first, cls.VERSION + 1))


# ------------------------------------------------------------------------ encoding

def _text(value: Any) -> Any:
    """What JSON cannot hold as is: a numpy number as its Python number, anything else
    (a Path, a date from YAML...) as its text, as json.dumps(default=str) did."""
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    return str(value)


_ENCODER = msgspec.json.Encoder(enc_hook=_text)


def to_builtins(record: Any) -> Any:
    if isinstance(record, Document) and record.schema_version != type(record).VERSION:
        msgspec.structs.force_setattr(record, "schema_version", type(record).VERSION)
    built = msgspec.to_builtins(record, enc_hook=_text)
    return _flatten(record, built)


def full(record: Any) -> Any:
    """The record as JSON-like data with every field, defaults included (views and
    comparisons that read every key; the file leaves defaults out)."""
    if isinstance(record, RECORDS):
        out = {name: full(getattr(record, name))
               for name in record.__struct_fields__ if name != "extra"}
        return {**out, **record.extra}
    if isinstance(record, msgspec.Struct):
        return {name: full(getattr(record, name)) for name in record.__struct_fields__}
    if isinstance(record, list | tuple):
        return [full(item) for item in record]
    if isinstance(record, dict):
        return {key: full(item) for key, item in record.items()}
    return record


def plain(data: Any) -> Any:
    """Any data as JSON's builtins (a numpy number as its number, a Path or a date as
    its text): what a YAML or JSON dump of it shows."""
    return msgspec.to_builtins(data, enc_hook=_text)


def checked(data: Any, cls: type[R], where: str) -> R:
    """A writer's plain data (dicts, lists, numpy numbers...) as the record it must be:
    what the file will hold, NaN and infinity as null; an InputError if it is not."""
    return convert(parse_json(plain_json(data), where), cls, where)


def plain_json(data: Any) -> bytes:
    """Plain data (dicts, lists, numbers, numpy numbers...) as compact JSON (a writer's
    dict on its way into a record: `checked`); a number JSON cannot hold (NaN,
    infinity) becomes null."""
    return _ENCODER.encode(data)


def encode(record: AnyRecord, *, indent: int | None = None) -> bytes:
    """The record as JSON bytes (compact, or indented by `indent`); a Document says its
    current schema_version first."""
    if isinstance(record, Document) and record.schema_version != type(record).VERSION:
        msgspec.structs.force_setattr(record, "schema_version", type(record).VERSION)
    data = _ENCODER.encode(record if _plain(record) else to_builtins(record))
    return msgspec.json.format(data, indent=indent) if indent is not None else data


def _plain(record: Any) -> bool:
    """No `extra` anywhere in the record, and every record in it leaves defaults (and
    so an empty `extra`) out: the common case, encoded in one call."""
    if isinstance(record, RECORDS):
        if record.extra or not type(record).__struct_config__.omit_defaults:
            return False
        return all(_plain(getattr(record, name)) for name in _nested(type(record)))
    if isinstance(record, list | tuple):
        return all(_plain(item) for item in record)
    if isinstance(record, dict):
        return all(_plain(item) for item in record.values())
    return True


def _flatten(record: Any, built: Any) -> Any:
    if isinstance(record, RECORDS) and isinstance(built, dict):
        extra = built.pop("extra", None)
        for name in _nested(type(record)):
            if name in built:
                built[name] = _flatten(getattr(record, name), built[name])
        if extra:
            built.update(extra)
        return built
    if isinstance(record, list | tuple) and isinstance(built, list):
        return [_flatten(r, b) for r, b in zip(record, built, strict=False)]
    if isinstance(record, dict) and isinstance(built, dict):
        return {k: _flatten(r, b) for (k, b), r in zip(built.items(), record.values(),
                                                        strict=False)}
    return built


@cache
def _nested(cls: type) -> tuple[str, ...]:
    """The fields of a record class whose type can hold a record."""
    hints = typing.get_type_hints(cls)
    return tuple(name for name in cls.__struct_fields__  # type: ignore[attr-defined]
                 if name != "extra" and _holds_record(hints[name]))


def _holds_record(hint: Any) -> bool:
    if isinstance(hint, type) and issubclass(hint, RECORDS):
        return True
    return any(_holds_record(arg) for arg in typing.get_args(hint))


@cache
def _known(cls: type) -> frozenset[str]:
    return frozenset(cls.__struct_fields__) - {"extra"}  # type: ignore[attr-defined]


# ------------------------------------------------------------------------ decoding

def parse_json(data: bytes | str, where: str) -> Any:
    """JSON text as plain data; an InputError naming `where` when it is not JSON."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(f"{where}: not JSON ({exc})") from None


def parse(data: bytes | str, cls: type[R], where: str) -> R:
    """A record from JSON text; a clear InputError naming `where` when it is not one."""
    return convert(parse_json(data, where), cls, where)


def read(path: Path, cls: type[R]) -> R:
    """A record from a file (OSError passes through: a missing file is the caller's)."""
    return parse(path.read_bytes(), cls, str(path))


def read_state(directory: str | Path, name: str, cls: type[R], what: str, hint: str) -> R:
    """The state record NAME of a long-lived directory (a tune study, a bisection): an
    input error that says what DIRECTORY is not (WHAT) and how to start one (HINT) when
    it has none, or that it is unreadable."""
    path = Path(directory) / name
    try:
        return read(path, cls)
    except FileNotFoundError:
        raise InputError(f"{directory}: not {what} (no {name})", hint=hint) from None
    except OSError as exc:
        raise InputError(f"{path}: unreadable ({exc.strerror})") from None


def convert(doc: Any, cls: type[R], where: str) -> R:
    """A record from JSON data, migrated to the current version when it is a
    Document; unknown keys kept in each record's `extra`."""
    if not isinstance(doc, Mapping):
        raise InputError(f"{where}: not {cls.WHAT} (a JSON object)")
    if issubclass(cls, Document):
        doc = _migrated(dict(doc), cls, where)
    try:
        record = msgspec.convert(doc, cls)
    except msgspec.ValidationError as exc:
        raise InputError(f"{where}: not {cls.WHAT} napilab can read: {exc}") from None
    _attach(record, doc)
    return record


def _migrated(doc: JSON, cls: type[Document], where: str) -> JSON:
    version = doc.get("schema_version", cls.VERSION)
    reads = cls.reads()
    if version not in reads:
        raise InputError(f"{where}: {cls.WHAT} schema_version {version!r}, this napilab "
                         f"reads {', '.join(map(str, reads))}")
    while version < cls.VERSION:
        doc = cls.MIGRATIONS[version](doc)
        version += 1
    doc["schema_version"] = version
    return doc


def _attach(record: Any, doc: Any) -> None:
    if isinstance(record, RECORDS) and isinstance(doc, Mapping):
        known = _known(type(record))
        unknown = {k: v for k, v in doc.items() if k not in known}
        if unknown:
            msgspec.structs.force_setattr(record, "extra", unknown)
        for name in _nested(type(record)):
            _attach(getattr(record, name), doc.get(name))
    elif isinstance(record, list | tuple) and isinstance(doc, list):
        for item, raw in zip(record, doc, strict=False):
            _attach(item, raw)
    elif isinstance(record, dict) and isinstance(doc, Mapping):
        for key, item in record.items():
            _attach(item, doc.get(key))


# ------------------------------------------------------------------------ schemas

def schema(cls: type[AnyRecord], *, base: str = "https://napilab.invalid/schemas/") -> JSON:
    """The record's JSON Schema (draft 2020-12): every field with its type and
    default, unknown keys allowed (`extra` is how they are kept, not a key)."""
    out: JSON = msgspec.json.schema(cls)
    for definition in out.get("$defs", {}).values():
        definition.get("properties", {}).pop("extra", None)
        if "required" in definition:
            definition["required"] = [r for r in definition["required"] if r != "extra"]
        doc = (definition.get("description") or "").strip()
        if doc:
            definition["description"] = " ".join(doc.split())
    name = cls.__name__
    if issubclass(cls, Document):
        top = out["$defs"][name]["properties"]
        top["schema_version"] = {"enum": list(cls.reads()), "default": cls.VERSION,
                                 "description": f"written as {cls.VERSION}; older "
                                 "versions are read through the record's migrations"}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{base}{name}.json", "title": cls.WHAT, **out}
