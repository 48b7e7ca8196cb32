"""napilab's foundation: profiles, inventories, transports, host settings, engine, store."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("napilab")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
