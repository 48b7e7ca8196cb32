"""bisect.json, a `napilab bisect`'s record (harness.records): what was asked (the
profile, the endpoints, the build, the metrics and threshold), every step with its phase,
its rounds of measurement and its verdict, and the answer. Every key is always written
(`omit_defaults=False`), and the file is written (fsynced, its directory too) before
each step's boot: a step found in phase `booting` by `--resume` is a kernel that took
the host (or napilab) down, and is never booted again. Version 1 is the first."""

from __future__ import annotations

import msgspec

from napilab.harness.records.codec import Document, Record

# a step's phase: what it was doing when it was last written
BUILDING, RUNNING, BOOTING, MEASURING, DONE = "building", "running", "booting", \
    "measuring", "done"
# a step's verdict, in git bisect's words (good: like the good endpoint; bad: like the
# bad one; skip: not decided, with the reason)
GOOD, BAD, SKIP = "good", "bad", "skip"
ENDPOINTS = "endpoints"  # the step that measures the bad endpoint against the good one


class Case(Record, omit_defaults=False):
    """One gated metric of one round: the gate's status of the candidate against the
    good endpoint (reports.nightly.check), its change and CI."""

    WHAT = "a bisect step's metric"

    metric: str
    status: str  # regression | improvement | within | inconclusive | skipped | error
    change: str = ""  # as printed: "-100.0%"
    ci: str = ""  # as printed: "[-100.0%, -99.1%]"
    good: float | None = None  # medians
    candidate: float | None = None
    reason: str = ""
    against: str = "good"  # the endpoint compared with: good, or bad (`--against both`)


class Round(Record, omit_defaults=False):
    """One napilab run of a step at one repeat."""

    WHAT = "a bisect round"

    repeat: int
    run: str | None = None  # its run directory, relative to the bisect's
    status: str = ""  # the round's reading: good | bad | inconclusive | other | failed
    cases: list[Case] = msgspec.field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


class Step(Record, omit_defaults=False):
    """A candidate: a commit of the range (its build's image) or an image of the list;
    step 0 is the endpoints' (the bad endpoint measured against the good one)."""

    WHAT = "a bisect step"

    number: int
    commit: str  # the commit's full sha, or the image list's entry
    subject: str = ""
    image: str | None = None  # the image booted (staged in the bisect's directory)
    phase: str = BUILDING
    verdict: str | None = None  # good | bad | skip (step 0: the endpoints' reading)
    reason: str = ""
    rounds: list[Round] = msgspec.field(default_factory=list)
    boots: int = 0  # boots the step's runs asked of the host (booting back included)
    consoles: list[str] = msgspec.field(default_factory=list)  # kept console logs
    seconds: float = 0.0


class Answer(Record, omit_defaults=False):
    """What git bisect said at the end."""

    WHAT = "a bisect answer"

    first_bad: str | None = None  # the commit (or image) named
    subject: str = ""
    candidates: list[str] = msgspec.field(default_factory=list)  # skips left these open
    text: str = ""  # git bisect's own last lines


class BisectLog(Document, omit_defaults=False):
    """bisect.json."""

    WHAT = "a bisect (bisect.json)"
    VERSION = 1

    id: str
    profile_name: str
    profile: str = ""  # the profile's path
    digest: str | None = None
    inventory: str = ""
    source: str = "git"  # git | images
    tree: str = ""  # the git tree walked (the image list's own tree in the bisect's dir)
    good: str = ""  # full sha or image entry
    bad: str = ""
    images: list[str] = msgspec.field(default_factory=list)  # the image list, in order
    good_image: str | None = None  # the endpoints' images, staged
    bad_image: str | None = None
    build: str = ""  # the build command (git form)
    image_path: str = ""  # the image the build leaves, relative to the tree
    role: str = ""  # the role whose host boots the candidates
    variant: str = ""  # the profile's variant the steps are made from
    metrics: list[str] = msgspec.field(default_factory=list)  # gated; [] the primary ones
    thresholds: list[str] = msgspec.field(default_factory=list)  # METRIC=PCT as given
    repeat: int = 0
    max_repeat: int = 0
    against: str = "good"  # good | both
    on_crash: str = SKIP  # skip | bad: a kernel that took the host down
    direction: dict[str, str] = msgspec.field(default_factory=dict)  # metric -> status
    started: float = 0.0
    steps: list[Step] = msgspec.field(default_factory=list)
    answer: Answer | None = None
    finished: float | None = None
