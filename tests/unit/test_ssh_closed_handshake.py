"""A host that closes the connection in the middle of the SSH handshake (a host going
down as napilab connects, seen on the VM testbed while a guest rebooted) is a HostError
napilab reports, never a raw EOFError out of paramiko."""

from __future__ import annotations

import socket
import threading

import pytest

from napilab.harness.errors import HostError
from napilab.harness.inventory.inventory import Host
from napilab.harness.transport.ssh import SSHTransport


def test_a_handshake_cut_short_is_a_host_error() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
            conn.recv(4096)  # the client's banner and KEXINIT, then gone
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    transport = SSHTransport(Host("gone", address="127.0.0.1", port=port,
                                  connect_timeout=2, known_hosts="/dev/null"),
                             reconnect_attempts=1)
    try:
        # "SSH failed: ..." here; on a loaded machine the 2 s connect timeout may fire
        # first: either way a HostError naming the host, never paramiko's EOFError
        with pytest.raises(HostError, match=r"^gone: "):
            transport.run(["true"], timeout=5)
    finally:
        transport.close()
        server.close()
