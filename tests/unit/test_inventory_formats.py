"""Ansible inventories as Ansible users have them: INI files, `group_vars/` and
`host_vars/` beside the inventory, `ansible-inventory --list` JSON from a file or
standard input; errors located in whichever file wrote the value; and ssh_config
ProxyJump chains and ProxyCommand resolved as OpenSSH does."""

from __future__ import annotations

import io
import json
from pathlib import Path

import paramiko
import pytest

from napilab.harness.errors import InputError
from napilab.harness.grammar.keys import looks_like_ini
from napilab.harness.inventory.formats import expand_range
from napilab.harness.inventory.inventory import Host, load_inventory
from napilab.harness.transport import ssh_config as sshconfig
from tests.cli import run_cli

INI = """\
# the lab
loner ansible_host=198.51.100.30

[lab]
sut ansible_host=198.51.100.20 napilab_iface=eth0 ansible_become=true
peer:2222 ansible_host=198.51.100.21 ansible_user="root"
web[01:03] ansible_host=192.0.2.40

[lab:vars]
ansible_user=admin
ansible_port=22

[dc:children]
lab

[all:vars]
napilab_data_address=192.0.2.99
"""

LIST = {
    "_meta": {"hostvars": {
        "sut": {"ansible_host": "198.51.100.20", "ansible_user": "admin",
                "napilab_iface": "eth0", "napilab_cpus": 8},
        "peer": {"ansible_host": "198.51.100.21", "ansible_port": 2222}}},
    "all": {"children": ["ungrouped", "lab"]},
    "lab": {"hosts": ["sut", "peer"], "vars": {"ansible_user": "ops"}},
    "ungrouped": {},
}


def test_ini_groups_vars_ranges_and_ports(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text(INI)
    hosts = load_inventory(path).hosts
    assert sorted(hosts) == ["loner", "peer", "sut", "web01", "web02", "web03"]
    sut, peer, loner = hosts["sut"], hosts["peer"], hosts["loner"]
    assert (sut.address, sut.user, sut.port, sut.iface, sut.become, sut.data_address) == (
        "198.51.100.20", "admin", 22, "eth0", "sudo", "192.0.2.99")
    assert (peer.port, peer.user) == (2222, "root")  # host variables over group ones
    assert (loner.address, loner.user, loner.data_address) == ("198.51.100.30", None,
                                                               "192.0.2.99")
    assert hosts["web02"].address == "192.0.2.40"


def test_ini_errors_name_the_ini_line(tmp_path: Path) -> None:
    path = tmp_path / "hosts.ini"
    path.write_text(INI.replace("ansible_port=22", "ansible_port=twenty-two"))
    with pytest.raises(InputError) as exc:
        load_inventory(path)
    # the key path names the INI section it was written in, [lab:vars]
    assert str(exc.value) == f"{path}:11:1: lab.vars.ansible_port: " \
           "expected an integer, got a string 'twenty-two'"
    path.write_text("[lab:hostz]\nsut\n")
    with pytest.raises(InputError, match=r"hosts.ini:1:1: lab: \[lab:hostz\]: unknown "):
        load_inventory(path)


def test_what_looks_like_ini() -> None:
    assert looks_like_ini(INI)
    assert looks_like_ini("sut ansible_host=198.51.100.2\n")
    assert looks_like_ini("[lab]\nsut\n")
    assert not looks_like_ini("hosts:\n  sut: {address: 198.51.100.2}\n")
    assert not looks_like_ini("all:\n  hosts: {sut: }\n")
    assert not looks_like_ini("[a, b]\n")  # a YAML flow sequence
    assert not looks_like_ini('{"all": {}}\n')
    assert expand_range("web[1:3]") == ["web1", "web2", "web3"]
    assert expand_range("r[a:b]-[08:09]") == ["ra-08", "ra-09", "rb-08", "rb-09"]


def test_group_vars_and_host_vars_beside_the_inventory(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text(INI)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("napilab_cpus: 4\nansible_user: nobody\n")
    (tmp_path / "group_vars" / "lab").mkdir()
    (tmp_path / "group_vars" / "lab" / "10-net.yaml").write_text("napilab_cpus: 16\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "sut.json").write_text('{"napilab_data_address": "192.0.2.20"}')
    hosts = load_inventory(path).hosts
    # as ansible-inventory 2.19 resolves it: the inventory's lab vars < group_vars/all <
    # group_vars/lab (every group_vars file beats every group variable of the inventory);
    # host_vars over all
    assert (hosts["sut"].cpus, hosts["sut"].user, hosts["sut"].data_address) == (
        16, "nobody", "192.0.2.20")
    assert (hosts["loner"].cpus, hosts["loner"].user) == (4, "nobody")
    (tmp_path / "host_vars" / "peer.yml").write_text("# peer\nansible_port: many\n")
    with pytest.raises(InputError) as exc:
        load_inventory(path)
    assert f"{tmp_path / 'host_vars' / 'peer.yml'}:2:15: " in str(exc.value)


def test_ansible_inventory_list_json_file_and_stdin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(LIST, indent=1))
    hosts = load_inventory(path).hosts
    assert (hosts["sut"].address, hosts["sut"].user, hosts["sut"].cpus,
            hosts["sut"].iface) == ("198.51.100.20", "admin", 8, "eth0")
    assert (hosts["peer"].port, hosts["peer"].user) == (2222, "ops")
    bad = dict(LIST, _meta={"hostvars": {"sut": {"ansible_port": "x"}}})
    path.write_text(json.dumps(bad, indent=1))
    with pytest.raises(InputError, match=rf"{path}:5:21: _meta.hostvars.sut.ansible_port: "
                       "expected an integer"):
        load_inventory(path)
    profile = tmp_path / "p.yaml"
    profile.write_text("name: p\nhosts: {server: {host: sut}, client: {host: peer}}\n"
                       "workload: {tool: ping, client: {role: client}}\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(LIST)))
    done = run_cli(capsys, "validate", str(profile), "-i", "-")
    assert done.code == 0, done.err
    assert "bound to -" in done.out


CONFIG = """\
Host target
  HostName 192.0.2.9
  User root
  ProxyJump ops@hop1,hop2
Host hop1
  Port 2201
  IdentityFile /keys/hop1
  ProxyCommand nc -x socks.example.org %h %p
Host hop2
  HostName 198.51.100.72
  Port 2202
  ProxyJump ignored-for-a-later-hop
Host behind
  HostName 192.0.2.10
  User lab
  ProxyCommand ssh -W %h:%p -p 2203 bastion
"""


def test_ssh_config_proxyjump_chain_and_proxycommand() -> None:
    config = paramiko.SSHConfig.from_text(CONFIG)
    target = sshconfig.resolve(Host(name="t", address="target"), config)
    chain = sshconfig.hops(target)
    assert [(e.hostname, e.port) for e in chain] == [("hop1", 2201), ("198.51.100.72", 2202),
                                                      ("192.0.2.9", 22)]
    # the first hop keeps its own ProxyCommand, a later hop goes through the one before
    assert chain[0].proxy_command == "nc -x socks.example.org hop1 2201"
    assert (chain[0].user, chain[0].key_files) == ("ops", ("/keys/hop1",))
    assert chain[1].proxy_command is None and chain[1].jump == chain[0]
    assert target.describe().startswith("root@192.0.2.9:22 via ")
    behind = sshconfig.resolve(Host(name="b", address="behind"), config)
    assert behind.jump is None
    assert behind.proxy_command == "ssh -W 192.0.2.10:22 -p 2203 bastion"
    looped = paramiko.SSHConfig.from_text("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n")
    with pytest.raises(InputError, match="chain too long"):
        sshconfig.resolve(Host(name="a", address="a"), looped)
