"""Ansible inventories resolve in napilab as in Ansible (issue 21, item 1): every host
and every variable, from INI, YAML and `ansible-inventory --list` JSON, compared with
the real `ansible-inventory` (ansible-core is a test extra; the comparisons skip, saying
so, where it is not installed).

The inventory is the issue's case: `sut` in `dut` and `rt`, `[rt]` giving it
`napilab_iface=eth1` on its host line, the parent group `lab` giving eth0; `group_vars/
lab.yml` and `[gen:vars]` both setting napilab_cpus. Ansible: host variables (INI host
lines included) beat group variables, a child group beats its parents, groups of one
depth merge by ansible_group_priority then name, and every group_vars/ file beats every
group variable written in the inventory. With it: a stride range, `host:port` named
twice, a string port, ansible_connection=local, napilab_connect_timeout, host_vars/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.errors import InputError
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.inventory.formats import expand_range
from napilab.harness.inventory.inventory import Host, load_inventory
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
SEED_000 = ROOT / "profiles" / "seed-000-threaded-busypoll.yaml"  # roles sut and peer

INI = """\
# the lab
loner ansible_host=198.51.100.30 ansible_connection=local

[rt]
sut napilab_iface=eth1
peer:2201 ansible_host=198.51.100.21
peer:2202 ansible_user=ops

[dut]
sut ansible_host=198.51.100.20

[lab:children]
rt
dut

[lab:vars]
napilab_iface=eth0
napilab_connect_timeout=7
ansible_port="2222"
quoted="5"
flag=True
shout=FALSE
items=[1, 2]
trailing=eth0 # no comment in a vars section

[gen]
web[01:05:2] napilab_data_address=192.0.2.40
peer

[gen:vars]
napilab_cpus=4
napilab_iface=gen0

[boost]
web05

[boost:vars]
ansible_group_priority=5
napilab_iface=boost0

[all:vars]
ansible_user=root
napilab_data_address=192.0.2.99
"""

# The same inventory as Ansible's YAML (host keys are patterns there too).
YAML = """\
all:
  hosts:
    loner: {ansible_host: 198.51.100.30, ansible_connection: local}
  vars: {ansible_user: root, napilab_data_address: 192.0.2.99}
  children:
    lab:
      children:
        rt:
          hosts:
            sut: {napilab_iface: eth1}
            "peer:2201": {ansible_host: 198.51.100.21}
            "peer:2202": {ansible_user: ops}
        dut:
          hosts:
            sut: {ansible_host: 198.51.100.20}
      vars:
        napilab_iface: eth0
        napilab_connect_timeout: 7
        ansible_port: "2222"
        quoted: "5"
        flag: true
        shout: "FALSE"
        items: [1, 2]
        trailing: "eth0 # no comment in a vars section"
    gen:
      hosts:
        web[01:05:2]: {napilab_data_address: 192.0.2.40}
        peer:
      vars: {napilab_cpus: 4, napilab_iface: gen0}
    boost:
      hosts: {web05: }
      vars: {ansible_group_priority: 5, napilab_iface: boost0}
"""

FILES = {
    "group_vars/lab.yml": "napilab_cpus: 16\n",
    "group_vars/all/10-base.yaml": "ansible_ssh_timeout: 9\n",
    "host_vars/web03.yml": "napilab_data_address: 192.0.2.43\n",
}

# What every source resolves to, as ansible-inventory 2.19 does (and so napilab):
# host -> napilab's host keys.
EXPECTED = {
    "loner": {"transport": "local", "address": "198.51.100.30", "port": 22, "user": "root",
              "data_address": "192.0.2.99", "iface": None, "cpus": None,
              "connect_timeout": 9.0},
    "sut": {"transport": "ssh", "address": "198.51.100.20", "port": 2222, "user": "root",
            "data_address": "192.0.2.99", "iface": "eth1", "cpus": 16, "connect_timeout": 7.0},
    "peer": {"transport": "ssh", "address": "198.51.100.21", "port": 2201, "user": "ops",
             "data_address": "192.0.2.99", "iface": "eth0", "cpus": 16,
             "connect_timeout": 7.0},
    "web01": {"transport": "ssh", "address": "web01", "port": 22, "user": "root",
              "data_address": "192.0.2.40", "iface": "gen0", "cpus": 4,
              "connect_timeout": 9.0},
    "web03": {"transport": "ssh", "address": "web03", "port": 22, "user": "root",
              "data_address": "192.0.2.43", "iface": "gen0", "cpus": 4,
              "connect_timeout": 9.0},
    "web05": {"transport": "ssh", "address": "web05", "port": 22, "user": "root",
              "data_address": "192.0.2.40", "iface": "boost0", "cpus": 4,
              "connect_timeout": 9.0},
}


def ansible_inventory_command() -> Path | None:
    beside = Path(sys.executable).with_name("ansible-inventory")  # the venv's
    found = beside if beside.exists() else shutil.which("ansible-inventory")
    return Path(found) if found else None


ANSIBLE_INVENTORY = ansible_inventory_command()
needs_ansible = pytest.mark.skipif(
    ANSIBLE_INVENTORY is None, reason="ansible-inventory is not installed: "
    "`pip install -e '.[test]'` brings ansible-core, the reference these tests compare with")


def lab(tmp_path: Path) -> Path:
    """hosts.ini and hosts.yml side by side, with group_vars/ and host_vars/."""
    (tmp_path / "hosts.ini").write_text(INI)
    (tmp_path / "hosts.yml").write_text(YAML)
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def run_ansible_inventory(tmp_path: Path, *args: str) -> dict[str, Any]:
    """`ansible-inventory ARGS` as JSON, with no ansible.cfg of this machine, failing on
    any source it cannot parse (it warns and goes on by default)."""
    assert ANSIBLE_INVENTORY is not None
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "ansible.cfg").write_text("")
    env = {**os.environ, "HOME": str(home), "ANSIBLE_CONFIG": str(home / "ansible.cfg"),
           "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1",
           "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "1", "ANSIBLE_NOCOLOR": "1",
           "LC_ALL": "C.UTF-8"}
    done = subprocess.run([str(ANSIBLE_INVENTORY), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def as_script(listing: Path) -> Path:
    """An inventory script beside LISTING that prints it: how Ansible reads --list JSON."""
    script = listing.with_suffix(".sh")
    script.write_text(f'#!/bin/sh\ncd "$(dirname "$0")" && exec cat {listing.name}\n')
    script.chmod(0o755)
    return script


def hosts_and_vars(listing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """ansible-inventory --list -> host -> its resolved variables (every listed host)."""
    hostvars = listing["_meta"]["hostvars"]
    hosts = {h for name, group in listing.items() if name != "_meta"
             for h in group.get("hosts", [])}
    return {host: hostvars.get(host, {}) for host in sorted(hosts)}


def plain(value: Any) -> Any:
    if isinstance(value, Node):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Seq | list):
        return [plain(v) for v in value]
    return value


def napilab_vars(path: Path) -> dict[str, dict[str, Any]]:
    from napilab.harness.inventory.inventory import ansible_variables

    return {h: plain(v) for h, v in sorted(ansible_variables(path).items())}


def host_keys(host: Host) -> dict[str, Any]:
    return {key: getattr(host, key) for key in EXPECTED["sut"]}


def sources(tmp_path: Path) -> dict[str, Path]:
    """Every form of the one inventory: INI, YAML, and ansible-inventory's JSON of the
    INI (beside group_vars/ as in the issue, elsewhere, and --export's)."""
    found = {"INI": tmp_path / "hosts.ini", "YAML": tmp_path / "hosts.yml"}
    elsewhere = tmp_path / "json"
    elsewhere.mkdir()
    for name, where, extra in (("--list JSON", tmp_path / "list.json", ()),
                               ("--list JSON elsewhere", elsewhere / "list.json", ()),
                               ("--list --export JSON", elsewhere / "export.json",
                                ("--export",))):
        listing = run_ansible_inventory(tmp_path, "-i", "hosts.ini", "--list", *extra)
        where.write_text(json.dumps(listing, indent=1))
        found[name] = where
    return found


@needs_ansible
def test_every_host_and_variable_as_ansible_resolves_them(tmp_path: Path) -> None:
    found = sources(lab(tmp_path))
    reference = hosts_and_vars(run_ansible_inventory(tmp_path, "-i", "hosts.ini", "--list"))
    assert sorted(reference) == sorted(EXPECTED)
    assert reference["sut"]["napilab_iface"] == "eth1"  # the case
    assert run_ansible_inventory(tmp_path, "-i", "hosts.ini", "--host", "sut") == \
        reference["sut"]
    for name, path in found.items():
        readable = as_script(path) if path.suffix == ".json" else path
        ansible = hosts_and_vars(run_ansible_inventory(tmp_path, "-i", str(readable), "--list"))
        assert ansible == reference, f"Ansible reads {name} otherwise"
        assert napilab_vars(path) == ansible, f"napilab reads {name} otherwise than Ansible"
        hosts = load_inventory(path).hosts
        assert {h: host_keys(hosts[h]) for h in sorted(hosts)} == EXPECTED, name


def test_napilab_host_keys_from_ini_and_yaml(tmp_path: Path) -> None:
    """The same without ansible-core: napilab's reading of both forms, key by key."""
    lab(tmp_path)
    for name in ("hosts.ini", "hosts.yml"):
        hosts = load_inventory(tmp_path / name).hosts
        assert {h: host_keys(hosts[h]) for h in sorted(hosts)} == EXPECTED, name


def test_plan_summary_tunes_the_same_nic_from_every_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's report: `napilab plan P -i hosts.ini --summary` tuned eth0 where the
    --list JSON of the same inventory tuned eth1."""
    lab(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ssh/config of this machine
    inventories = [tmp_path / "hosts.ini", tmp_path / "hosts.yml"]
    if ANSIBLE_INVENTORY is not None:
        listing = run_ansible_inventory(tmp_path, "-i", "hosts.ini", "--list")
        (tmp_path / "list.json").write_text(json.dumps(listing))
        inventories.append(tmp_path / "list.json")
    outputs = []
    for inventory in inventories:
        done = run_cli(capsys, "plan", str(SEED_000), "-i", str(inventory), "--summary")
        assert done.code == 0, done.err
        outputs.append(done.out.splitlines())
    hosts = outputs[0].index("hosts (as ssh_config resolves them):") + 1
    assert outputs[0][hosts:hosts + 2] == ["  sut      ssh root@198.51.100.20:2222",
                               "  peer     ssh ops@198.51.100.21:2201"]
    assert "  sut      + ethtool eth1/channels/combined = 1" in outputs[0]
    assert all(out == outputs[0] for out in outputs[1:])


@needs_ansible
def test_host_ranges_expand_as_ansible_expands_them() -> None:
    from ansible.plugins.inventory import expand_hostname_range

    for pattern in ("web[01:05:2]", "web[1:10:3]", "db-[a:e:2]-x", "r[x:B]", "n[:3]",
                    "r[a:b]-[08:10]", "h[1:3].lab", "x[8:11]"):
        assert expand_range(pattern) == expand_hostname_range(pattern), pattern
    for bad in ("web[01:5]", "web[5]", "web[1:]", "web[c:a]"):
        with pytest.raises(ValueError):
            expand_range(bad)


def test_misspelt_napilab_variables_are_errors_where_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ansible takes any variable; napilab names the file, line, variable and the
    variables it reads, once however many hosts inherit it (exit 2)."""
    lab(tmp_path)
    path = tmp_path / "hosts.ini"
    path.write_text(INI.replace("sut napilab_iface=eth1", "sut napilab_ifcae=eth1")
                    .replace("napilab_cpus=4", "napilab_port=2200"))
    (tmp_path / "group_vars" / "lab.yml").write_text("# cpus\nnapilab_cpu: 16\n")
    code, _, err = run_cli(capsys, "validate", str(SEED_000), "-i", str(path))
    assert code == 2, err
    allowed = ("napilab_boot, napilab_connect_timeout, napilab_cpus, napilab_data_address, "
               "napilab_host_key_policy, napilab_iface, napilab_known_hosts, napilab_netns, "
               "napilab_transport")
    assert f"{path}:5:5: rt.hosts.sut.napilab_ifcae: unknown napilab variable; did you mean "\
           f"'napilab_iface'? (napilab reads {allowed})" in err
    assert f"{path}:31:1: gen.vars.napilab_port: not a napilab variable: napilab reads " \
           "ansible_port for this" in err
    assert f"{tmp_path / 'group_vars' / 'lab.yml'}:2:1: group_vars.lab.napilab_cpu: unknown " \
           "napilab variable; did you mean 'napilab_cpus'?" in err
    assert err.count("napilab_port") == 1  # four hosts inherit it: said once
    listing = tmp_path / "list.json"
    listing.write_text(json.dumps({"_meta": {"hostvars": {"sut": {"napilab_ifcae": "eth1"}}},
                                   "all": {"children": ["lab"]}, "lab": {"hosts": ["sut"]}},
                                  indent=1))
    code, _, err = run_cli(capsys, "validate", str(SEED_000), "-i", str(listing))
    assert code == 2, err
    assert f"{listing}:5:5: _meta.hostvars.sut.napilab_ifcae: unknown napilab variable" in err


def test_ansible_connection_and_napilab_connect_timeout(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts:\n"
                    "    a: {ansible_connection: ansible.builtin.local, napilab_netns: ns-a}\n"
                    "    b: {ansible_connection: paramiko, napilab_connect_timeout: 2.5}\n"
                    "    c: {ansible_connection: local, napilab_transport: ssh}\n"
                    "    d: {ansible_connection: winrm}\n")
    with pytest.raises(InputError) as exc:
        load_inventory(path)
    assert str(exc.value) == (f"{path}:6:29: all.hosts.d.ansible_connection: 'winrm': "
                              "napilab connects over SSH (ssh, paramiko, smart) or runs "
                              "commands on this machine (local); napilab_transport overrides it")
    path.write_text(path.read_text().replace("winrm", "smart"))
    hosts = load_inventory(path).hosts
    assert (hosts["a"].transport, hosts["a"].netns, hosts["a"].address) == ("local", "ns-a",
                                                                           None)
    assert (hosts["b"].transport, hosts["b"].connect_timeout) == ("ssh", 2.5)
    assert (hosts["c"].transport, hosts["d"].transport) == ("ssh", "ssh")
    path.write_text("all:\n  hosts:\n    a: {napilab_connect_timeout: 0}\n")
    with pytest.raises(InputError, match=r"all.hosts.a.napilab_connect_timeout: 0 is out of "
                                         r"range 0.5..3600"):
        load_inventory(path)


def test_ini_sections_ansible_refuses_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    for text, message in (
            ("[lab:children]\ndut\n", r"hosts:2:1: dut: \[lab:children\] names 'dut', a group "
                                      "that has no section"),
            ("[lab:vars]\nx=1\n", r"hosts:1:1: lab: \[lab:vars\] is for a group that has no "
                                  "section"),
            ("[a]\nh\n[a:children]\nb\n[b]\nh2\n[b:children]\na\n",
             r"hosts:8:1: b: group 'a' under 'b' makes a loop of groups")):
        path.write_text(text)
        with pytest.raises(InputError, match=message):
            load_inventory(path)
