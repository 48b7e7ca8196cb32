"""The trace collector's pure parts: the stage files' headers, the HIST macro's
bucketing (the generated bpftrace arithmetic, run here as Python, against
histogram.bucket_of), percentiles within 3.2% of the exact value, the payload a host
decodes, and the parser's refusals."""

from __future__ import annotations

import base64
import gzip
import random
import re

import pytest

from napilab.runners.base import ParseError
from napilab.runners.collectors.trace import histogram, program, trace
from napilab.runners.collectors.trace.histogram import Histogram


def test_every_stage_names_its_probes_key_and_unit() -> None:
    stages = program.stages()
    assert len(stages) >= 15
    assert [s.id for s in stages.values()] == sorted(s.id for s in stages.values())
    for stage in stages.values():
        assert stage.needs and stage.says and stage.key in program.KEYS
        assert "HIST(" not in stage.body and "@hist[" in stage.body
        for probe in stage.needs:  # every probe it needs is one it attaches to, and back
            kind, _, name = probe.partition(":")
            assert f"{kind}:{name}" in stage.body, (stage.name, probe)
        attached = set(re.findall(r"^(?:k(?:ret)?probe|tracepoint):\S+", stage.body, re.M))
        assert {p.replace("kretprobe:", "kprobe:") for p in attached} <= set(stage.needs)


def _run_expansion(value: int) -> int:
    """The HIST expansion's bucket arithmetic, translated line by line into Python."""
    text = program.expand("HIST(0, VALUE);", 99).replace("VALUE", str(value))
    code = []
    for line in text.strip().splitlines():
        line = line.strip().replace("(uint64)", "").replace("$h", "h_")
        if line.startswith("@hist"):
            continue
        match = re.fullmatch(r"if \((.+?)\) \{ (.+) \}", line)
        if match:
            body = "; ".join(s.strip() for s in match[2].split(";") if s.strip())
            code.append(f"if {match[1]}: {body}")
        else:
            code.append(line.rstrip(";").replace("; ", "\n"))
    scope: dict[str, int] = {}
    exec("\n".join(code), {}, scope)
    return scope["h_b"]


@pytest.mark.parametrize("value", [0, 1, 15, 16, 17, 31, 32, 33, 1000, 4351, 4352,
                                   65535, 65536, 123_456_789, 2**33 + 12345])
def test_generated_bucket_is_the_lower_bound_python_computes(value: int) -> None:
    bucket = _run_expansion(value)
    assert bucket == histogram.bucket_of(value)
    assert bucket <= value < bucket + histogram.width(bucket)
    assert histogram.width(bucket) <= max(1, bucket / 16)


def test_percentiles_within_the_buckets_promise() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(9, 1.2)) for _ in range(20_000)]
    counts: dict[int, int] = {}
    for v in values:
        counts[histogram.bucket_of(v)] = counts.get(histogram.bucket_of(v), 0) + 1
    hist = Histogram(counts)
    ordered = sorted(values)
    for q in (0.5, 0.99, 0.999):
        exact = ordered[max(0, -(-int(q * len(values) * 1000) // 1000) - 1)]
        got = hist.quantile(q)
        assert got is not None and abs(got - exact) <= 0.032 * exact + 1
    assert Histogram({}).quantile(0.5) is None
    merged = histogram.merge([Histogram({16: 2}), Histogram({16: 1, 3: 4})])
    assert merged.counts == {16: 3, 3: 4}


def test_payload_decodes_to_the_chosen_stages_and_the_timeout() -> None:
    text = gzip.decompress(base64.b64decode(program.payload(("hardirq", "csd_latency"))))
    headers = [line for line in text.decode().splitlines() if line.startswith("//== ")]
    assert headers[0].split()[1:3] == ["hardirq", "tracepoint:irq:irq_handler_entry"]
    assert [h.split()[1] for h in headers] == ["hardirq", "csd_latency", "end"]
    assert f"interval:s:{program.TIMEOUT_S}" in text.decode()
    word = trace.TraceCollector().word({"stages": ["hardirq"]}, "start")
    assert word.startswith("@trace:") and trace.TraceCollector().word({}, "stop") == "@trace"


SECTION = """stage hardirq
stage csd_latency
absent napi_poll: kprobe:__napi_poll
{"type": "attached_probes", "data": {"probes": 4}}
{"type": "map", "data": {"@func": {"14,-2126819712": "rps_trigger_softirq"}}}
{"type": "map", "data": {"@hist": {"1,0,25,4096": 3, "1,1,25,8192": 1, \
"14,1,-2126819712,12288": 2}}}
{"type": "map", "data": {"@s_hardirq": {"0": 55}}}
stderr: WARNING: something bpftrace said
"""


def test_section_values_and_names() -> None:
    found = trace.parse(SECTION)
    assert found.stages == ("hardirq", "csd_latency")
    assert found.absent == {"napi_poll": "kprobe:__napi_poll"}
    assert found.names[("csd_latency", -2126819712 % 2**64)] == "rps_trigger_softirq"
    assert found.warnings == ("WARNING: something bpftrace said",)
    values = {(v.metric, v.cpu): v for v in trace.stage_values(found)}
    assert values[("hardirq_count", 0)].value == 3 and values[("hardirq_count", 1)].value == 1
    assert values[("hardirq_p50", None)].value == pytest.approx((4096 + 128) / 1000)
    assert values[("csd_latency_p99", None)].unit == "us"
    assert not any(m.startswith("napi_poll") for m, _ in values)  # absent: no row, not 0
    only_cpu1 = {v.metric: v.value for v in trace.stage_values(found, {1})}
    assert only_cpu1["hardirq_p50"] == pytest.approx((8192 + 256) / 1000)


@pytest.mark.parametrize("text, reason", [
    ("", "no `stage`"),
    ("stage nonsense\n", "unknown stage"),
    ("stage hardirq\n{\"type\": \"map\", \"data\": {\"@hist\": {\"99,0,0,1\": 1}}}\n",
     "unknown stage id"),
    ("stage hardirq\n{\"type\": \"map\", \"data\": {\"@hist\": {\"2,0,0,1\": 1}}}\n",
     "not started"),
    ("stage hardirq\n{\"type\": \"map\", \"data\": {\"@hist\": {\"1,0,1\": 1}}}\n",
     "ID,CPU,KEY,BUCKET"),
    ("stage hardirq\nsomething else\n", "neither"),
])
def test_section_refusals(text: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        trace.parse(text)
    assert reason in info.value.reason


def test_refusal_and_started() -> None:
    with pytest.raises(trace.TraceRefused, match="tracefs is not mounted"):
        trace.read_section("refused: tracefs is not mounted (mount ...)\n")
    started = trace.read_section("started\nstage hardirq\nabsent napi_poll: kprobe:x\n")
    assert isinstance(started, trace.Started) and started.stages == ("hardirq",)
