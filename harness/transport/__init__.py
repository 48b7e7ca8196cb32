"""Running commands on a host: the Transport protocol, its local and SSH
implementations (persistent shell, ~/.ssh/config) and opening one per host.

paramiko.config imports invoke at its own import, for ssh_config's `Match exec` only,
and invoke imports unittest.mock and asyncio: about 50 ms of every run's start, before
its first connection (benchmarks/overhead.py). Here `import invoke` binds a stand-in
that imports the real invoke when an attribute of it is first read, i.e. when an
ssh_config's `Match exec` first runs a command, as paramiko would have run it."""

import importlib
import importlib.util
import sys
import types


class _InvokeWhenUsed(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if sys.modules.get("invoke") is self:
            del sys.modules["invoke"]
        return getattr(importlib.import_module("invoke"), name)


if "invoke" not in sys.modules and importlib.util.find_spec("invoke") is not None:
    sys.modules["invoke"] = _InvokeWhenUsed("invoke")
