"""The netdev CI's result JSON (NIPA, github.com/linux-netdev/nipa) of a suite of cases
(reports.ci.suite): the document an executor leaves for each branch it tested and NIPA's
results collector fetches, stores and shows (contest/remote/lib/fetcher.py,
Fetcher._run_test: {executor, branch, start, end, results, link}; each result as
contest/remote/vmksft-p.py writes it: {test, group, result, link, time}; read by
contest/results-collector.py: result_flatten takes group, test and result, which is
"pass" or anything else, insert_result_psql branch, executor, start and end, and the
branch's last 17 characters are its date), read at linux-netdev/nipa 95a2926
(2026-08-20).

Every case is one test (NIPA's stability table keys a test by group, test and subtest);
its `result` is "pass", "fail" or "skip" as reports.ci.suite maps the outcomes (an error
is "fail": NIPA has no fourth). Names go through NIPA's own `namify` (fetcher.py: runs
of anything but letters and digits become one "-"). `time` is the seconds the case's
trials took, left out when not known; `link` is where the case's output is: the run
directory (or a failed trial's raw/TRIAL) under `--link URL`, else as a file:// URL.
The executor's manifest (results.json: url, branch, executor per run) stays the
publishing job's: it knows the URL it serves this file at."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal

from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord
from napilab.reports.ci.suite import CiSuite, Outcome

Result = Literal["pass", "fail", "skip"]
RESULTS: dict[Outcome, Result] = {"passed": "pass", "failure": "fail", "skipped": "skip",
                                  "error": "fail"}


class NipaTest(FrozenRecord, frozen=True):
    """One test of a NIPA result (a case of the suite)."""

    WHAT = "a NIPA test"

    test: str
    group: str
    result: Result
    link: str
    time: float | None = None  # seconds


class NipaRun(FrozenRecord, frozen=True):
    """An executor's result of one branch, as NIPA's results collector reads it."""

    WHAT = "a NIPA result"

    executor: str
    branch: str
    start: str  # str() of an aware UTC datetime, as NIPA's executors write it
    end: str
    # always written, empty too: the collector reads a result without it as one still
    # under way (results-collector.py, psql_json_split)
    results: list[NipaTest]
    link: str = ""


@dataclass(frozen=True)
class NipaTarget:
    """What NIPA needs that a run does not say: the executor's name, the branch tested
    and the URL the run directory is served at (None: a default, module doc)."""

    executor: str | None = None
    branch: str | None = None
    link: str | None = None


DEFAULT = NipaTarget()


def namify(what: str) -> str:
    """NIPA's name rule (contest/remote/lib/fetcher.py `namify`)."""
    if not what:
        return "no-name"
    name = re.sub(r"[^0-9a-zA-Z]+", "-", what)
    return name[:-1] if name.endswith("-") else name


def _when(seconds: float) -> str:
    return str(dt.datetime.fromtimestamp(seconds, dt.UTC))


def nipa_run(suite: CiSuite, target: NipaTarget = DEFAULT) -> NipaRun:
    start = suite.started if suite.started is not None else suite.ended
    end = suite.ended if suite.ended is not None else start
    if start is None or end is None:
        raise InputError(f"{suite.run_dir}: the run has no start or end time, which a "
                         "NIPA result needs")
    base = (target.link or suite.run_dir.resolve().as_uri()).rstrip("/")
    group = namify(f"napilab-{suite.profile}")
    tests, seen = [], set()
    for c in suite.cases:
        name = stem = namify(f"{c.group}-{c.name}" if c.group else c.name)
        k = 1
        while name in seen:  # namify made two names one: "rtt.avg", "rtt_avg"
            k += 1
            name = f"{stem}-{k}"
        seen.add(name)
        tests.append(NipaTest(test=name, group=group, result=RESULTS[c.outcome],
                              link=f"{base}/{c.path}" if c.path else base, time=c.seconds))
    # the branch's last 17 characters are its date in NIPA (YYYY-MM-DD--HH-MM)
    branch = target.branch or (f"{namify(suite.profile)}-"
                               f"{dt.datetime.fromtimestamp(start, dt.UTC):%Y-%m-%d--%H-%M}")
    return NipaRun(executor=target.executor or f"napilab-{namify(suite.profile)}",
                   branch=branch, start=_when(start), end=_when(end), results=tests,
                   link=base)


def nipa_json(suite: CiSuite, target: NipaTarget = DEFAULT) -> str:
    return codec.encode(nipa_run(suite, target), indent=1).decode() + "\n"
