"""The netdev netlink host script writes and reads its JSON without the json module
(harness/knobs/kinds/hostscripts/netdev_nl.py: json's imports took half of a call in a
TCG guest); what it writes is what json reads, and it reads what napilab sends."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import ModuleType

from napilab.harness.knobs.kinds.napi import NETDEV_NL, NapiBackend


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("netdev_nl", NETDEV_NL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_what_it_prints_is_what_json_reads() -> None:
    dumps = script().dumps
    for value in ([{"id": 8194, "ifindex": 3, "threaded": "busy-poll", "defer-hard-irqs": 0}],
                  [{"info": {"id": 5, "ifindex": 2}, "alloc-fast": 2**63 + 5}], {}, [],
                  {"xdp-features": ["basic", "bit-40"], "x": True, "y": None},
                  {'a "quoted" \\ name\n\x01': "tab\there"}):
        assert json.loads(dumps(value)) == value


def test_it_reads_the_napi_set_requests_napilab_sends() -> None:
    loads_flat = script().loads_flat
    backend = NapiBackend(None)
    backend._client = "python3"
    for key, value in (("2/8194/threaded", "busy-poll"), ("2/8195/defer-hard-irqs", "100"),
                       ("2/291/gro-flush-timeout", "20000")):
        request = backend.write_command(key, value).argv[-1]
        assert loads_flat(request) == json.loads(request)


def test_it_imports_neither_json_nor_socket_py() -> None:
    code = (f"import sys; sys.argv = ['-', 'nothing']; exec(open({str(NETDEV_NL)!r}).read()"
            ".replace('if __name__', 'if False and __name__')); "
            "print(sorted({'json', 're', 'socket', 'enum'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
