"""napilab's foundation: profiles, inventories, transports, host settings, engine, store."""

from __future__ import annotations

if __name__ != "napilab.harness":  # `import harness` from the repository root: a second copy
    raise ImportError(f"import napilab.harness, not {__name__}: the repository's harness/ is "
                      "installed as napilab.harness (pip install -e .)")

__version__: str  # looked up on first use (__getattr__)


def __getattr__(name: str) -> str:
    """`harness.__version__`, read from the installed distribution when first asked for:
    importlib.metadata would otherwise cost every `napilab` start (benchmarks/startup.py)
    and only `--version` and a new run's manifest need it."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("napilab")
    except PackageNotFoundError:  # running from a source tree that was not installed
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
