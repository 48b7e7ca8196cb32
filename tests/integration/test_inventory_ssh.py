"""Inventories resolved against the testbed's real sshd: an Ansible inventory, an
ssh_config alias (HostName, Port, User, IdentityFile) and a ProxyJump through the
other namespace. Nothing of the machine's own ssh setup is read or written: the
ssh_config file is the inventory's `ssh_config:`."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.lab import netns as tb
from napilab.harness.transport.connect import transport_for


def hostname_of(inventory: Path, host: str) -> str:
    transport = transport_for(load_inventory(inventory).hosts[host])
    try:
        # each namespace has its own data address: it tells which host answered
        out = transport.run(["ip", "-4", "-o", "addr", "show", "dev", "data0"]).stdout
    finally:
        transport.close()
    return out.split()[3]


def test_ansible_inventory_reaches_the_testbed(testbed: tb.Testbed, tmp_path: Path) -> None:
    state = testbed.state
    a, b = (n.mgmt_address for n in testbed.nodes)
    inventory = tmp_path / "ansible.yaml"
    inventory.write_text(f"""\
all:
  vars:
    ansible_user: root
    ansible_ssh_private_key_file: {state / 'id_ed25519'}
    napilab_known_hosts: {state / 'known_hosts'}
  children:
    lab:
      hosts:
        sut: {{ansible_host: {b}, ansible_port: 22, napilab_iface: data0}}
        peer: {{ansible_host: {a}}}
""")
    assert hostname_of(inventory, "sut") == "192.0.2.2/24"
    assert hostname_of(inventory, "peer") == "192.0.2.1/24"


def test_ssh_config_alias_and_proxyjump(testbed: tb.Testbed, tmp_path: Path) -> None:
    state = testbed.state
    a, b = (n.mgmt_address for n in testbed.nodes)
    config = tmp_path / "ssh_config"
    config.write_text(f"""\
Host lab-b
  HostName {b}
  Port 22
  User root
  IdentityFile {state / 'id_ed25519'}
Host lab-b-via-a
  HostName 192.0.2.2
  User root
  IdentityFile {state / 'id_ed25519'}
  ProxyJump root@{a}
Host {a}
  IdentityFile {state / 'id_ed25519'}
""")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"""\
ssh_config: {config}
hosts:
  direct: {{address: lab-b, known_hosts: {state / 'known_hosts'}}}
  jumped: {{address: lab-b-via-a, known_hosts: {state / 'known_hosts'}}}
""")
    assert hostname_of(inventory, "direct") == "192.0.2.2/24"
    # 192.0.2.2 is reachable only from inside namespace a: the jump is real
    assert hostname_of(inventory, "jumped") == "192.0.2.2/24"


def test_unknown_host_key_is_refused_unless_accept_new(testbed: tb.Testbed,
                                                        tmp_path: Path) -> None:
    state = testbed.state
    b = testbed.nodes[1].mgmt_address
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  b: {{address: {b}, user: root, key: "
                         f"{state / 'id_ed25519'}, known_hosts: {empty}}}\n")
    with pytest.raises(HostError, match="unknown host key"):
        hostname_of(inventory, "b")
    inventory.write_text(inventory.read_text().replace("known_hosts:",
                                                       "host_key_policy: accept-new, known_hosts:"))
    assert hostname_of(inventory, "b") == "192.0.2.2/24"
    assert b in empty.read_text()  # recorded for next time
    # a changed key is refused even with accept-new
    other = (state / "a" / "ssh_host_ed25519_key.pub").read_text().split()
    empty.write_text(f"{b} {other[0]} {other[1]}\n")
    with pytest.raises(HostError, match="does not match known_hosts"):
        hostname_of(inventory, "b")


def test_ini_inventory_with_host_vars_reaches_the_testbed(testbed: tb.Testbed,
                                                          tmp_path: Path) -> None:
    state = testbed.state
    a, b = (n.mgmt_address for n in testbed.nodes)
    inventory = tmp_path / "hosts"
    inventory.write_text(f"""\
[lab]
sut ansible_host={b}
peer ansible_host={a}

[lab:vars]
ansible_user=root
ansible_ssh_private_key_file={state / 'id_ed25519'}
napilab_known_hosts={state / 'known_hosts'}
""")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "sut.yml").write_text("napilab_iface: data0\n")
    assert load_inventory(inventory).hosts["sut"].iface == "data0"
    assert hostname_of(inventory, "sut") == "192.0.2.2/24"
    assert hostname_of(inventory, "peer") == "192.0.2.1/24"


def _connected(inventory: Path, host: str) -> tuple[str, int]:
    """(data address of the host that answered, how many jump connections it took)."""
    transport = transport_for(load_inventory(inventory).hosts[host])
    try:
        out = transport.run(["ip", "-4", "-o", "addr", "show", "dev", "data0"]).stdout
        return out.split()[3], len(getattr(transport, "_jumps", []))
    finally:
        transport.close()


def test_proxyjump_chain_and_proxycommand(testbed: tb.Testbed, tmp_path: Path) -> None:
    """A two-hop ProxyJump (b's management address, then a's data address, reachable
    only from inside the namespaces) and a ProxyCommand running OpenSSH's `ssh -W`
    through b (its own config and known hosts only: -F /dev/null)."""
    state = testbed.state
    b = testbed.nodes[1].mgmt_address
    key, known = state / "id_ed25519", state / "known_hosts"
    proxy = (f"ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes "
             f"-o UserKnownHostsFile={known} -i {key} -W %h:%p root@{b}")
    config = tmp_path / "ssh_config"
    config.write_text(f"""\
Host chained
  HostName 192.0.2.2
  User root
  IdentityFile {key}
  ProxyJump root@{b},root@192.0.2.1
Host proxied
  HostName 192.0.2.1
  User root
  IdentityFile {key}
  ProxyCommand {proxy}
Host {b} 192.0.2.1
  IdentityFile {key}
""")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"""\
ssh_config: {config}
hosts:
  chained: {{address: chained, known_hosts: {known}}}
  proxied: {{address: proxied, known_hosts: {known}}}
""")
    assert _connected(inventory, "chained") == ("192.0.2.2/24", 2)
    assert _connected(inventory, "proxied") == ("192.0.2.1/24", 0)
    broken = config.read_text().replace("-W %h:%p", "-W %h:2")
    config.write_text(broken)
    with pytest.raises(HostError, match=r"proxied: .*closed its output \(exit 255\)"):
        _connected(inventory, "proxied")


def test_a_direct_connection_has_nagle_off_and_a_refused_one_says_so(
        testbed: tb.Testbed, tmp_path: Path) -> None:
    """napilab opens the TCP connection to sshd itself, with TCP_NODELAY (paramiko's
    own has Nagle's algorithm on, and a handshake write waited for a delayed ACK); a
    port nobody listens on is an error naming the host and the reason."""
    import socket

    from napilab.harness.transport.ssh import SSHTransport

    transport = transport_for(load_inventory(testbed.inventory_path).hosts["b"])
    try:
        assert isinstance(transport, SSHTransport)
        assert transport.run(["true"]).exit_code == 0
        client = transport._client
        assert client is not None
        sock = client.get_transport().sock  # type: ignore[union-attr]
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        transport.close()
    state, b = testbed.state, testbed.nodes[1].mgmt_address
    inventory = tmp_path / "closed.yaml"
    inventory.write_text(f"""\
transport: ssh
hosts:
  closed: {{address: {b}, port: 2, user: root, key: {state / 'id_ed25519'},
            known_hosts: {state / 'known_hosts'}}}
""")
    closed = transport_for(load_inventory(inventory).hosts["closed"])
    closed.reconnect_attempts = 1  # type: ignore[attr-defined]
    try:
        with pytest.raises(HostError, match=rf"closed: cannot connect to .*{b}.*refused"):
            closed.run(["true"])
    finally:
        closed.close()
