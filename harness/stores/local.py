"""A store that is a directory of this machine: the results directory layout itself
(RESULTS/PROFILE/RUN/), so a local store is read as a results directory is."""

from __future__ import annotations

import os
from pathlib import Path

from napilab.harness.errors import StorageError
from napilab.harness.store.store import atomic_write


class LocalBackend:
    parallel = 1  # reads of local files gain nothing from threads

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def describe(self) -> str:
        return str(self.root)

    def list_dirs(self, prefix: str) -> list[str]:
        where = self.root / prefix if prefix else self.root
        try:
            return sorted(e.name for e in os.scandir(where)
                          if e.is_dir() and not e.name.startswith("."))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot list {where}: {exc.strerror or exc}") from None

    def list_files(self, prefix: str) -> dict[str, int]:
        base = self.root / prefix
        out = {}
        for path in base.rglob("*") if base.is_dir() else ():
            rel = path.relative_to(self.root).as_posix()
            if path.is_file() and not any(p.startswith(".") for p in rel.split("/")):
                out[rel] = path.stat().st_size
        return out

    def read(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {self.root / key}: {exc.strerror or exc}") from None

    def write(self, key: str, data: bytes) -> None:
        atomic_write(self.root / key, data)

    def close(self) -> None:
        pass
