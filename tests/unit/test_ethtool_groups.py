"""ethtool's rings, rss, ntuple and priv-flags groups (harness.knobs.kinds.ethtool.ethtool): the
parsers against the outputs under tests/data/ethtool/, the profile grammar's errors, the
plan's commands, and apply -> read back -> restore through a scripted host whose
`ethtool` answers as ethtool prints (and refuses as the captured veth refusals say)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import HostError, InputError, SettingMismatch
from napilab.harness.hosts.host_records import JournalRecord
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.knobs.kinds.ethtool import show
from napilab.harness.profile.plan import Plan, bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.records import codec
from napilab.harness.transport.transport import CommandResult
from napilab.runners.base import ParseError
from tests.fakes import FakeHost, FakeTransport

DATA = Path(__file__).parents[1] / "data" / "ethtool"
VETH = DATA / "6.1-veth-6.18.44-fc-v1098"
SRC = DATA / "from-source"
PROFILE = """\
name: nic
hosts:
  sut: {host: sut, iface: eth0}
setup:
  sut:
    ethtool: {eth0: GROUPS}
workload:
  tool: ping
  duration: 1
  client: {role: sut}
  server: {role: sut}
"""
INVENTORY = "hosts:\n  sut: {transport: local, iface: eth0, cpus: 4}\n"


def bound(tmp_path: Path, groups: str) -> Plan:
    (tmp_path / "p.yaml").write_text(PROFILE.replace("GROUPS", groups))
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    return bind(load_profile(tmp_path / "p.yaml"), load_inventory(tmp_path / "inv.yaml"))


# --- parsers against the stored outputs ------------------------------------------------

CASES = sorted(p for p in DATA.rglob("*.expected.json")
               if "parser" in json.loads(p.read_text()).get("ethtool", {}))


@pytest.mark.parametrize("expected", CASES, ids=lambda p: str(p.relative_to(DATA)))
def test_parser_reads_the_stored_output(expected: Path) -> None:
    doc = json.loads(expected.read_text())["ethtool"]
    text = expected.with_name(expected.name.replace(".expected.json", ".txt")).read_text()
    parse = getattr(show, doc["parser"])
    if "error_contains" in doc:
        with pytest.raises(ParseError) as info:
            parse(text)
        assert doc["error_contains"] in info.value.reason
        return
    got = parse(text)
    assert json.loads(json.dumps(got)) == doc["parsed"]
    if "table_spec" in doc:
        table = [int(n) for n in got["indir"].split()]
        assert show.table_spec(table) == doc["table_spec"]
        if doc["table_spec"] is not None:  # the arguments write this very table back
            assert show.spec_table(" ".join(doc["table_spec"]), len(table)) == table


def test_the_weight_table_is_ethtools() -> None:
    """ethtool -X weight 1 1 2 0 over 128 entries: 32, 32 and 64 entries, queue 3 none."""
    table = show.rss((SRC / "virtio_net_x_weight1120.txt").read_text())["indir"].split()
    assert [table.count(q) for q in "0123"] == [32, 32, 64, 0]
    assert show.spec_table("weight 1 1 2 0", 128) == [int(q) for q in table]
    assert show.spec_table("equal 2 start 2", 4) == [2, 3, 2, 3]
    assert show.spec_table("weight 200", 128) is None  # more weight than entries


def test_a_cut_table_and_a_rule_count_that_disagrees_are_refused() -> None:
    text = (SRC / "virtio_net_x_equal4.txt").read_text().splitlines()
    with pytest.raises(ParseError, match="row 16 follows 8 entries"):
        show.rss("\n".join([text[0], text[1], text[3]]))
    with pytest.raises(ParseError, match="`Total 3 rules` but 2 listed"):
        show.ntuple_rules((SRC / "ixgbe_n_two_rules.txt").read_text().replace("Total 2", "Total 3"))
    with pytest.raises(ParseError, match=re.escape("not `NAME: on|off`")):
        show.priv_flags("Private flags for eth0:\nlegacy-rx: maybe\n")


# --- a scripted NIC ----------------------------------------------------------------------


class FakeNic(FakeTransport):
    """A host whose eth0 driver has rings, RSS over 4 queues (a 128-entry table), n-tuple
    rules (the driver picks locations from 2045 down) and private flags; `lacks` names
    the -g/-x/-n/--show-priv-flags groups it refuses, with the captured veth refusal."""

    def __init__(self, *, table: list[int], rules: dict[str, tuple[str, str]] | None = None,
                 lacks: Sequence[str] = ()) -> None:
        super().__init__(FakeHost({}), name="sut")
        self.rings = {"rx": "256", "tx": "256", "tx-push": "off"}
        self.table, self.hfunc = list(table), "toeplitz"
        self.rules = dict(rules or {})  # loc -> (flow, queue)
        self.flags = {"legacy-rx": "off"}
        self.lacks = set(lacks)
        self.ethtool: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        if argv[0] != "ethtool":
            return super().run(argv, timeout=timeout, env=env, stdin=stdin, check=check)
        self.ethtool.append(list(argv))
        code, out, err = self._ethtool(list(argv[1:]))
        result = self._result(argv, code, out, err)
        return result.check() if check else result

    def _refusal(self, case: str) -> tuple[int, str, str]:
        expected = json.loads((VETH / f"{case}_stderr.expected.json").read_text())
        return expected["ethtool"]["exit_code"], "", (VETH / f"{case}_stderr.txt").read_text()

    def _ethtool(self, args: list[str]) -> tuple[int, str, str]:
        flag, iface, rest = args[0], args[1], args[2:]
        assert iface == "eth0", args
        refusals = {"-g": "veth_g", "-G": "veth_G_rx512", "-x": "veth_x", "-X": "veth_X_equal2",
                    "-n": "veth_n", "-N": "veth_N_add", "--show-priv-flags": "veth_privflags",
                    "--set-priv-flags": "veth_set_privflags"}
        if flag.lower() in self.lacks or flag in self.lacks:
            return self._refusal(refusals[flag])
        handler = {"-g": self._g, "-G": self._set_g, "-x": self._x, "-X": self._set_x,
                   "-n": self._n, "-N": self._set_n, "--show-priv-flags": self._flags,
                   "--set-priv-flags": self._set_flags}.get(flag)
        if handler is None:
            raise AssertionError(f"unexpected ethtool {args}")
        return handler(rest)

    def _g(self, rest: list[str]) -> tuple[int, str, str]:
        r = self.rings
        return 0, ("Ring parameters for eth0:\nPre-set maximums:\nRX:\t\t\t4096\nRX Mini:\t\t"
                   "n/a\nRX Jumbo:\t\tn/a\nTX:\t\t\t4096\nCurrent hardware settings:\n"
                   f"RX:\t\t\t{r['rx']}\nRX Mini:\t\tn/a\nRX Jumbo:\t\tn/a\nTX:\t\t\t{r['tx']}\n"
                   f"RX Buf Len:\t\tn/a\nCQE Size:\t\tn/a\nTX Push:\t\t{r['tx-push']}\n"
                   "TCP data split:\t\tn/a\n"), ""

    def _set_g(self, rest: list[str]) -> tuple[int, str, str]:
        self.rings.update(dict(zip(rest[::2], rest[1::2], strict=True)))
        return 0, "", ""

    def _x(self, rest: list[str]) -> tuple[int, str, str]:
        rows = [f"{i:5d}: " + "".join(f" {q:5d}" for q in self.table[i:i + 8])
                for i in range(0, len(self.table), 8)]
        funcs = "".join(f"    {f}: {'on' if f == self.hfunc else 'off'}\n"
                        for f in ("toeplitz", "xor", "crc32"))
        return 0, ("RX flow hash indirection table for eth0 with 4 RX ring(s):\n"
                   + "\n".join(rows) + "\nRSS hash key:\n6d:5a\nRSS hash function:\n" + funcs), ""

    def _set_x(self, rest: list[str]) -> tuple[int, str, str]:
        if rest[0] == "hfunc":
            self.hfunc = rest[1]
        else:  # ethtool's fill_indir_table, written out here independently of napilab's
            words = rest[1:rest.index("start")] if "start" in rest else rest[1:]
            start = int(rest[rest.index("start") + 1]) if "start" in rest else 0
            size, numbers = len(self.table), [int(w) for w in words]
            if rest[0] == "equal":
                self.table = [start + i % numbers[0] for i in range(size)]
            else:
                bounds = [size * sum(numbers[:j + 1]) // sum(numbers) for j in range(len(numbers))]
                self.table = [start + next(j for j, b in enumerate(bounds) if i < b)
                              for i in range(size)]
        return 0, "", ""

    def _n(self, rest: list[str]) -> tuple[int, str, str]:
        out = [f"4 RX rings available\nTotal {len(self.rules)} rules\n"]
        for loc, (flow, queue) in sorted(self.rules.items()):
            port = flow.split()[-1]
            out.append(f"Filter: {loc}\n\tRule Type: TCP over IPv4\n\tSrc IP addr: 0.0.0.0 mask:"
                       " 255.255.255.255\n\tDest IP addr: 0.0.0.0 mask: 255.255.255.255\n\t"
                       "TOS: 0x0 mask: 0xff\n\tSrc port: 0 mask: 0xffff\n\tDest port: "
                       f"{port} mask: 0x0\n\tAction: Direct to queue {queue}\n")
        return 0, "\n".join(out) + "\n", ""

    def _set_n(self, rest: list[str]) -> tuple[int, str, str]:
        if rest[0] == "delete":
            if rest[1] not in self.rules:
                return 1, "", "rmgr: Cannot delete RX class rule: No such file or directory\n"
            del self.rules[rest[1]]
            return 0, "", ""
        words = dict(zip(rest[::2], rest[1::2], strict=True))
        flow = f"{words['flow-type']} dst-port {words['dst-port']}"
        loc = words.get("loc") or str(min([2046, *map(int, self.rules)]) - 1)
        self.rules[loc] = (flow, words["action"])
        return 0, "" if "loc" in words else f"Added rule with ID {loc}\n", ""

    def _flags(self, rest: list[str]) -> tuple[int, str, str]:
        return 0, "Private flags for eth0:\n" + "".join(
            f"{n}: {v}\n" for n, v in self.flags.items()), ""

    def _set_flags(self, rest: list[str]) -> tuple[int, str, str]:
        self.flags[rest[0]] = rest[1]
        return 0, "", ""


def writes(nic: FakeNic) -> list[str]:
    return [" ".join(a) for a in nic.ethtool if a[1] in ("-G", "-X", "-N", "--set-priv-flags")]


EQUAL4 = [i % 4 for i in range(128)]


# --- apply, read back, restore ------------------------------------------------------------

def test_rings_apply_read_back_restore(tmp_path: Path) -> None:
    plan = bound(tmp_path, "{rings: {rx: 1024, tx-push: on}}")
    nic = FakeNic(table=EQUAL4)
    settings = HostSettings(HostSession(nic), "r1")
    changes = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert [(c.target, c.original, c.effective, c.state) for c in changes] == [
        ("eth0/rings/rx", "256", "1024", "taken"), ("eth0/rings/tx-push", "off", "on", "taken")]
    settings.restore()
    assert nic.rings == {"rx": "256", "tx": "256", "tx-push": "off"}
    assert writes(nic) == ["ethtool -G eth0 rx 1024", "ethtool -G eth0 tx-push on",
                           "ethtool -G eth0 tx-push off", "ethtool -G eth0 rx 256"]


def test_rss_restores_the_users_table_not_the_default(tmp_path: Path) -> None:
    """The host's table was set by its user (weight 1 1 2 0): restore writes that table
    back with the arguments that give it, never `-X default`."""
    user = show.rss((SRC / "virtio_net_x_weight1120.txt").read_text())["indir"]
    nic = FakeNic(table=[int(q) for q in user.split()])
    nic.hfunc = "xor"
    plan = bound(tmp_path, "{rss: {equal: 4, hfunc: toeplitz}}")
    settings = HostSettings(HostSession(nic), "r1")
    changes = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert nic.table == EQUAL4 and nic.hfunc == "toeplitz"
    assert [c.state for c in changes] == ["taken", "taken"]
    journal = json.loads(nic.fake.files["/var/tmp/napilab/journal-r1-sut.json"])
    assert journal["entries"][0]["original"] == user  # the whole table, 128 entries
    settings.restore()
    assert " ".join(map(str, nic.table)) == user and nic.hfunc == "xor"
    assert writes(nic) == ["ethtool -X eth0 equal 4", "ethtool -X eth0 hfunc toeplitz",
                           "ethtool -X eth0 hfunc xor", "ethtool -X eth0 weight 32 32 64"]


def test_rss_a_table_ethtool_cannot_write_back_is_refused_before_any_write(
        tmp_path: Path) -> None:
    custom = show.rss((SRC / "virtio_net_x_custom.txt").read_text())["indir"]
    nic = FakeNic(table=[int(q) for q in custom.split()])
    plan = bound(tmp_path, "{rings: {rx: 512}, rss: {weight: [1, 1]}}")
    with pytest.raises(HostError, match=r"sut: eth0's RSS indirection table .* cannot restore"):
        HostSettings(HostSession(nic), "r1").apply(plan.settings(plan.profile.variants[0])["sut"])
    assert writes(nic) == []


def test_rss_a_table_the_driver_ignores_is_a_mismatch(tmp_path: Path) -> None:
    nic = FakeNic(table=EQUAL4)
    nic._set_x = lambda rest: (0, "", "")  # type: ignore[method-assign]
    plan = bound(tmp_path, "{rss: {weight: [1, 0, 0, 0]}}")
    with pytest.raises(SettingMismatch, match=r"eth0/rss/indir: wrote 'weight 1 0 0 0', reads "
                                        r"'equal 4 \(128 entries\)'"):
        HostSettings(HostSession(nic), "r1").apply(plan.settings(plan.profile.variants[0])["sut"])


def test_ntuple_restore_deletes_only_napilabs_rule(tmp_path: Path) -> None:
    nic = FakeNic(table=EQUAL4, rules={"2045": ("tcp4 dst-port 22", "0")})
    plan = bound(tmp_path, "{ntuple: [{flow-type: tcp4, dst-port: 5001, action: 2}]}")
    settings = HostSettings(HostSession(nic), "r1")
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.target, change.original, change.effective, change.state) == (
        "eth0/ntuple/tcp4 dst-port 5001", "none", "action 2 loc 2044", "taken")
    settings.restore()
    assert nic.rules == {"2045": ("tcp4 dst-port 22", "0")}  # the host's own rule stays
    assert writes(nic)[-1] == "ethtool -N eth0 delete 2044"


def test_ntuple_with_loc_and_restore_after_a_crash(tmp_path: Path) -> None:
    """`napilab restore` (a new session, no memory of the ID) deletes the flow's rule."""
    nic = FakeNic(table=EQUAL4, rules={"7": ("tcp4 dst-port 22", "0")})
    plan = bound(tmp_path, "{ntuple: [{flow-type: tcp4, dst-port: 5001, action: 3, loc: 9}]}")
    HostSettings(HostSession(nic), "r1").apply(plan.settings(plan.profile.variants[0])["sut"])
    assert nic.rules["9"] == ("tcp4 dst-port 5001", "3")
    path = "/var/tmp/napilab/journal-r1-sut.json"
    doc = codec.parse(nic.fake.files[path], JournalRecord, path)
    HostSettings.from_journal(HostSession(nic), doc, path).restore()
    assert nic.rules == {"7": ("tcp4 dst-port 22", "0")} and path not in nic.fake.files


def test_ntuple_a_flow_with_a_rule_already_is_left_alone(tmp_path: Path) -> None:
    nic = FakeNic(table=EQUAL4, rules={"100": ("tcp4 dst-port 5001", "1")})
    plan = bound(tmp_path, "{ntuple: [{flow-type: tcp4, dst-port: 5001, action: 2}]}")
    with pytest.raises(HostError, match="eth0 has a rule for tcp4 dst-port 5001 already "
                                        r"\(location 100\)"):
        HostSettings(HostSession(nic), "r1").apply(plan.settings(plan.profile.variants[0])["sut"])
    assert nic.rules == {"100": ("tcp4 dst-port 5001", "1")} and writes(nic) == []


def test_priv_flags_apply_read_back_restore(tmp_path: Path) -> None:
    nic = FakeNic(table=EQUAL4)
    plan = bound(tmp_path, "{priv-flags: {legacy-rx: on}}")
    settings = HostSettings(HostSession(nic), "r1")
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.original, change.effective, change.state) == ("off", "on", "taken")
    settings.restore()
    assert nic.flags == {"legacy-rx": "off"}


@pytest.mark.parametrize(("groups", "lacks", "said"), [
    ("{rings: {rx: 512}}", "-g", "`ethtool -g eth0` failed: netlink error: Operation not "
     "supported"),
    ("{rss: {equal: 2}}", "-x", "`ethtool -x eth0` failed: Cannot get RX ring count: "
     "Operation not supported"),
    ("{ntuple: [{flow-type: udp4, dst-port: 53, action: 1}]}", "-n", "`ethtool -n eth0` "
     "failed: Cannot get RX rings: Operation not supported rxclass: Cannot get RX class rule "
     "count: Operation not supported RX classification rule retrieval failed"),
    ("{priv-flags: {legacy-rx: on}}", "--show-priv-flags", "`ethtool --show-priv-flags eth0` "
     "failed: netlink error: Operation not supported"),
])
def test_a_driver_without_the_feature_is_named(tmp_path: Path, groups: str, lacks: str,
                                               said: str) -> None:
    nic = FakeNic(table=EQUAL4, lacks=[lacks])
    plan = bound(tmp_path, groups)
    with pytest.raises(HostError) as info:
        HostSettings(HostSession(nic), "r1").apply(plan.settings(plan.profile.variants[0])["sut"])
    assert str(info.value).startswith(f"sut: {said}")
    assert "driver does not offer" in (info.value.hint or "")
    assert writes(nic) == []


def test_a_write_the_driver_refuses_names_host_interface_and_ethtools_words(
        tmp_path: Path) -> None:
    nic = FakeNic(table=EQUAL4, lacks=["-G"])
    plan = bound(tmp_path, "{rings: {rx: 512}}")
    with pytest.raises(HostError, match=r"sut: cannot set ethtool eth0/rings/rx = '512': "
                                        r"`ethtool -G eth0 rx 512`: netlink error: Operation "
                                        "not supported"):
        HostSettings(HostSession(nic), "r1").apply(plan.settings(plan.profile.variants[0])["sut"])


# --- grammar, plan --------------------------------------------------------------------------

@pytest.mark.parametrize(("groups", "error"), [
    ("{rings: {rx: 512, rx_mini: 4}}", r"ethtool\.eth0\.rings\.rx_mini: unknown key; "
     r"expected one of \['cqe-size', .*'rx-mini'"),
    ("{rings: {tx-push: 1}}", "rings.tx-push: expected on or off, got 1"),
    ("{rings: {rx: -1}}", r"rings\.rx: expected an integer 0\.\.4294967295, got -1"),
    ("{rss: {equal: 4, weight: [1, 1]}}", "rss.weight: give either equal or weight, not both"),
    ("{rss: {weight: [0, 0]}}", "rss.weight: at least one weight must be non-zero"),
    ("{rss: {start: 2}}", "rss.start: start shifts an equal or weight table"),
    ("{rss: {hfunc: sha1}}", r"rss\.hfunc: 'sha1' is not one of \['crc32', 'toeplitz', 'xor'\]"),
    ("{ntuple: {flow-type: tcp4}}", "ntuple: expected a list of rules"),
    ("{ntuple: [{flow-type: tcp5, action: 1}]}", r"ntuple\[0\]\.flow-type: 'tcp5' is not one"),
    ("{ntuple: [{flow-type: tcp4, dst-ip: '::1', action: 1}]}",
     r"ntuple\[0\]\.dst-ip: expected an IPv4 address"),
    ("{ntuple: [{flow-type: tcp4, dst-port: 1}]}", r"ntuple\[0\]\.action: required key"),
    ("{ntuple: [{flow-type: tcp4, dst-port: 1, action: 1}, {flow-type: tcp4, dst-port: 1, "
     "action: 2}]}", r"ntuple\[1\]: a second rule for tcp4 dst-port 1"),
    ("{priv-flags: {legacy-rx: maybe}}", "priv-flags.legacy-rx: expected on or off"),
    ("{priv-flags: {'a b': on}}", "not a private flag name"),
])
def test_grammar_errors_name_the_place_and_what_is_allowed(tmp_path: Path, groups: str,
                                                           error: str) -> None:
    with pytest.raises(InputError, match=error) as info:
        bound(tmp_path, groups)
    assert "p.yaml:6" in str(info.value)


def test_plan_shows_the_ethtool_commands(tmp_path: Path) -> None:
    plan = bound(tmp_path, "{rings: {rx: 512}, rss: {weight: [1, 1], start: 2}, ntuple: "
                           "[{flow-type: tcp4, dst-port: 5001, action: 2}], priv-flags: "
                           "{legacy-rx: on}}")
    text = plan_text(plan)
    for line in ("apply    env LC_ALL=C ethtool -G eth0 rx 512",
                 "apply    env LC_ALL=C ethtool -X eth0 weight 1 1 start 2",
                 "apply    env LC_ALL=C ethtool -N eth0 flow-type tcp4 dst-port 5001 action 2",
                 "apply    env LC_ALL=C ethtool --set-priv-flags eth0 legacy-rx on",
                 "restore  env LC_ALL=C ethtool -N eth0 delete '<rule-id>'",
                 "restore  env LC_ALL=C ethtool -X eth0 '<equal-or-weight-of-the-original-table>'",
                 "restore  env LC_ALL=C ethtool -G eth0 rx '<original>'"):
        assert line in text
