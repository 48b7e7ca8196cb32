"""Inventories: napilab's format, Ansible's, and ssh_config resolution."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from napilab.harness.errors import InputError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.transport import ssh_config as sshconfig

ANSIBLE = """\
all:
  vars:
    ansible_user: admin
    napilab_iface: eth0
  children:
    lab:
      vars: {ansible_port: 2222}
      hosts:
        sut:
          ansible_host: 198.51.100.20
          ansible_ssh_private_key_file: ~/.ssh/lab
          napilab_data_address: 192.0.2.20
          ansible_become: true
        peer:
          ansible_host: 198.51.100.21
          ansible_user: root
          ansible_port: 22
          some_other_var: ignored
  hosts:
    loner: {ansible_host: loner.example.org}
"""


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_ansible_inventory_with_group_vars(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, ANSIBLE))
    sut, peer, loner = inv.hosts["sut"], inv.hosts["peer"], inv.hosts["loner"]
    assert (sut.address, sut.port, sut.user, sut.iface, sut.data_address, sut.become) == (
        "198.51.100.20", 2222, "admin", "eth0", "192.0.2.20", "sudo")
    assert sut.key == str(Path("~/.ssh/lab").expanduser())
    assert (peer.address, peer.port, peer.user, peer.become) == ("198.51.100.21", 22, "root",
                                                                  None)
    assert (loner.address, loner.port, loner.user) == ("loner.example.org", 22, "admin")


def test_ansible_errors_have_locations(tmp_path: Path) -> None:
    path = write(tmp_path, ANSIBLE.replace("ansible_port: 22\n", "ansible_port: twenty\n"))
    with pytest.raises(InputError) as exc:
        load_inventory(path)
    assert f"{path}:17:25: all.children.lab.hosts.peer.ansible_port: expected an integer" in str(
        exc.value)


def test_napilab_inventory_defaults_and_errors(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts:\n  a: {address: 198.51.100.2, cpus: 4}\n"))
    a = inv.hosts["a"]
    assert (a.transport, a.port, a.host_key_policy, a.cpus) == ("ssh", 22, "reject", 4)
    path = write(tmp_path, "host_key_policy: trust\nhosts:\n  a: {address: 'x;y', user: 'r t'}\n")
    with pytest.raises(InputError) as exc:
        load_inventory(path)
    text = str(exc.value)
    assert "host_key_policy: 'trust' is not one of" in text
    assert "hosts.a.address: 'x;y' is not an IP address" in text
    assert "hosts.a.user: 'r t' is not a valid user" in text


def test_ssh_config_alias_and_proxyjump() -> None:
    config = paramiko.SSHConfig.from_text(
        "Host sut\n  HostName 198.51.100.6\n  Port 2200\n  User admin\n"
        "  IdentityFile /keys/sut\n  ProxyJump ops@jump.example.org:2022\n"
        "Host jump.example.org\n  IdentityFile /keys/jump\n")
    from napilab.harness.inventory.inventory import Host

    endpoint = sshconfig.resolve(Host(name="sut", address="sut"), config)
    assert (endpoint.hostname, endpoint.port, endpoint.user, endpoint.key_files) == (
        "198.51.100.6", 2200, "admin", ("/keys/sut",))
    assert endpoint.jump is not None
    assert (endpoint.jump.hostname, endpoint.jump.port, endpoint.jump.user,
            endpoint.jump.key_files) == ("jump.example.org", 2022, "ops", ("/keys/jump",))
    # values written in the inventory win over ssh_config
    explicit = sshconfig.resolve(Host(name="sut", address="sut", user="root", port=22,
                                      port_set=True, key="/k"), config)
    assert (explicit.user, explicit.port, explicit.key_files) == ("root", 22, ("/k",))


def test_connect_timeout_from_the_inventory_or_ssh_config(tmp_path: Path) -> None:
    """`connect_timeout` (seconds) is validated like other host keys; without it,
    ssh_config's ConnectTimeout applies, else 10 s; the inventory's wins."""
    from napilab.harness.inventory.inventory import Host

    inv = load_inventory(write(tmp_path, "hosts:\n  a: {address: sut, connect_timeout: 2.5}\n"
                                          "  b: {address: peer}\n"))
    assert (inv.hosts["a"].connect_timeout, inv.hosts["b"].connect_timeout) == (2.5, None)
    path = write(tmp_path, "hosts:\n  a: {address: sut, connect_timeout: 0}\n"
                           "  b: {address: peer, connect_timeout: soon}\n")
    with pytest.raises(InputError) as exc:
        load_inventory(path)
    assert f"{path}:2:38: hosts.a.connect_timeout: 0 is out of range 0.5..3600" in str(exc.value)
    assert "hosts.b.connect_timeout: expected" in str(exc.value)
    config = paramiko.SSHConfig.from_text("Host sut\n  ConnectTimeout 3\nHost bad\n"
                                          "  ConnectTimeout soon\n")
    assert sshconfig.resolve(Host(name="sut", address="sut"), config).connect_timeout == 3
    assert sshconfig.resolve(Host(name="sut", address="sut", connect_timeout=2.5),
                             config).connect_timeout == 2.5
    assert sshconfig.resolve(Host(name="p", address="peer"), config).connect_timeout == 10
    with pytest.raises(InputError, match="ConnectTimeout 'soon' is not a number of seconds"):
        sshconfig.resolve(Host(name="bad", address="bad"), config)


MATCH_EXEC = """\
import sys
from napilab.harness.inventory.inventory import Host
from napilab.harness.transport import ssh_config as sshconfig
import paramiko

# the transport stands in for invoke until `Match exec` needs it
assert "invoke.context" not in sys.modules and "unittest.mock" not in sys.modules
config = paramiko.SSHConfig.from_text(
    "Match host sut exec \\"test -e {there}\\"\\n  HostName 198.51.100.7\\n"
    "Match host peer exec \\"test -e {missing}\\"\\n  HostName 198.51.100.8\\n")
print(sshconfig.resolve(Host(name="sut", address="sut"), config).hostname)
print(sshconfig.resolve(Host(name="peer", address="peer"), config).hostname)
print("invoke.context" in sys.modules)
"""


def test_match_exec_in_ssh_config_runs_its_command(tmp_path: Path) -> None:
    """ssh_config's `Match exec` runs its command (paramiko, through invoke) though the
    transport keeps invoke out of a run's start until a `Match exec` needs it."""
    import subprocess
    import sys

    (tmp_path / "there").touch()
    code = MATCH_EXEC.format(there=tmp_path / "there", missing=tmp_path / "missing")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["198.51.100.7", "peer", "True"]
