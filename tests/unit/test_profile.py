"""The profile model: variants as overlays, extends, trial order, binding."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
BASE = """\
name: base
hosts:
  sender: {host: a}
  receiver: {host: b, iface: eth1}
setup:
  receiver:
    netdev: {"${iface}": {gro_flush_timeout: 1000}}
    sysctl: {net.core.busy_read: 50}
workload:
  tool: ping
  duration: 2
  client: {role: sender, cpus: "0-1"}
  server: {role: receiver}
collect:
  softnet_stat: {cpus: "1"}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_variants_overlay_the_base(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", BASE + """\
variants:
  slow: {}
  fast:
    setup: {receiver: {netdev: {"${iface}": {gro_flush_timeout: 20000}}}}
    workload: {duration: 3}
baseline: fast
repeat: 2
""")
    profile = load_profile(path)
    assert profile.baseline == "fast"
    fast = profile.variant("fast")
    assert fast.workload.duration == 3
    assert fast.workload.client.cpus == "0-1"
    targets = {s.target: s.value for s in fast.settings}
    assert targets["${iface}/gro_flush_timeout"] == "20000"
    assert targets["net.core.busy_read"] == "50"
    assert {s.target: s.value for s in profile.variant("slow").settings}[
        "${iface}/gro_flush_timeout"] == "1000"
    assert [(t.variant, t.rep) for t in profile.trials()] == [
        ("fast", 1), ("slow", 1), ("fast", 2), ("slow", 2)]
    assert profile.variant("slow").collect[0].roles == ("sender", "receiver")
    assert profile.variant("slow").collect[0].cpus == (1,)


def test_orders(tmp_path: Path) -> None:
    text = BASE + "variants: {a: {}, b: {}, c: {}}\nrepeat: 3\n"
    blocked = load_profile(write(tmp_path, "b.yaml", text + "order: blocked\n"))
    assert [t.variant for t in blocked.trials()] == list("aaabbbccc")
    randomized = load_profile(write(tmp_path, "r.yaml", text + "order: randomized\nseed: 7\n"))
    first = [(t.variant, t.rep) for t in randomized.trials()]
    again = [(t.variant, t.rep) for t in load_profile(tmp_path / "r.yaml").trials()]
    assert first == again and sorted(first) == sorted((v, r) for v in "abc" for r in (1, 2, 3))
    assert first != [(t.variant, t.rep) for t in load_profile(
        write(tmp_path, "i.yaml", text)).trials()]
    unseeded = load_profile(write(tmp_path, "u.yaml", text + "order: randomized\n"))
    assert unseeded.seed is not None  # chosen and recorded


def test_extends_merges_and_detects_cycles(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE)
    write(tmp_path, "mid.yaml", "extends: base.yaml\nrepeat: 4\n")
    child = write(tmp_path, "child.yaml", "extends: mid.yaml\nname: child\n"
                  "workload: {duration: 9}\n")
    profile = load_profile(child)
    assert profile.name == "child" and profile.repeat == 4
    assert profile.variants[0].workload.duration == 9
    assert profile.variants[0].workload.tool == "ping"
    write(tmp_path, "x.yaml", "extends: y.yaml\n")
    write(tmp_path, "y.yaml", "extends: x.yaml\n")
    with pytest.raises(InputError, match="cycle"):
        load_profile(tmp_path / "x.yaml")


def test_error_in_parent_names_the_parent_file(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE.replace("duration: 2", "duration: fast"))
    child = write(tmp_path, "child.yaml", "extends: base.yaml\n")
    with pytest.raises(InputError) as exc:
        load_profile(child)
    assert f"{tmp_path / 'base.yaml'}:11:13: workload.duration" in str(exc.value)


def test_bind_resolves_iface_and_hosts(tmp_path: Path) -> None:
    inventory = write(tmp_path, "inv.yaml", "transport: local\nhosts:\n"
                      "  a: {address: 127.0.0.1, iface: eth0}\n"
                      "  b: {address: 127.0.0.1}\n")
    plan = bind(load_profile(write(tmp_path, "p.yaml", BASE)), load_inventory(inventory))
    settings = plan.settings(plan.profile.variants[0])
    assert [s.target for s in settings["b"]] == ["net.core.busy_read", "eth1/gro_flush_timeout"]
    assert plan.iface_of("sender") == "eth0"


def test_iface_placeholder_without_iface_is_an_error(tmp_path: Path) -> None:
    inventory = write(tmp_path, "inv.yaml", "hosts:\n  a: {}\n  b: {}\n")
    profile = load_profile(write(tmp_path, "p.yaml", BASE.replace(", iface: eth1", "")))
    with pytest.raises(InputError, match=r"uses \$\{iface\} but role 'receiver' has no iface"):
        bind(profile, load_inventory(inventory))


def test_shipped_profiles_validate() -> None:
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        if not path.name.startswith(("inventory", "_")):
            assert load_profile(path).variants, path
