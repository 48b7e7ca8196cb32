"""Where the traffic went (reports.ab.queue_traffic): received packets by queue from
qstats rows, and the per-queue settings that name queues which carried under 10%."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from napilab.reports.ab import queue_traffic


@dataclass(frozen=True)
class Row:
    variant: str
    host: str
    kind: str
    target: str


def samples(per_queue: dict[str, dict[int, float]]) -> pd.DataFrame:
    rows = []
    for variant, packets in per_queue.items():
        for trial, share in ((1, 0.4), (2, 0.6)):  # two trials, summed
            rows += [{"variant": variant, "trial": trial, "host": "a", "source": "qstats",
                      "metric": f"data0.rx_packets.q{q}", "value": n * share}
                     for q, n in packets.items()]
            rows.append({"variant": variant, "host": "a", "source": "qstats",
                         "metric": "data0.rx_packets", "value": sum(packets.values()) * share})
            rows.append({"variant": variant, "host": "a", "source": "ping",
                         "metric": "rx_packets.q9", "value": 1e9})  # not qstats: ignored
    return pd.DataFrame(rows)


def test_packets_by_queue_busiest_first() -> None:
    found = queue_traffic.carried(samples({"steered": {0: 3.0, 1: 997.0, 2: 0.0}}))
    assert found == ["steered: a data0 received 1000 packets, by queue q1 99.7%, q0 0.3%"]


def test_a_per_queue_setting_on_a_quiet_queue_is_a_confounder() -> None:
    data = samples({"steered": {0: 3.0, 1: 997.0}, "spread": {0: 500.0, 1: 500.0}})
    settings = [
        Row("steered", "a", "napi", "data0/queue-0/napi-8194/threaded"),
        Row("steered", "a", "irq_affinity", "queue 1 irq 48 (virtio10-input.1)"),
        Row("spread", "a", "napi", "data0/queue-0/napi-8194/threaded"),
        Row("steered", "a", "irq_affinity", "irq 45 (virtio10-config)"),  # whole device
        Row("steered", "a", "xps_rxqs", "data0/tx-0"),  # a tx queue: not judged
    ]
    assert queue_traffic.targeted(settings) == {
        ("steered", "a", "napi"): {0}, ("steered", "a", "irq_affinity"): {1},
        ("spread", "a", "napi"): {0}}
    (warning,) = queue_traffic.missed(data, settings)
    assert warning.startswith("variant steered sets napi on queue(s) 0 of a data0, which "
                              "received 0.3% of its packets (by queue: q1 99.7%, q0 0.3%)")
    assert queue_traffic.missed(data[data["variant"] == "spread"], settings) == []


def test_no_qstats_no_judgement() -> None:
    settings = [Row("v", "a", "napi", "data0/queue-3/napi-1/threaded")]
    assert queue_traffic.missed(pd.DataFrame(), settings) == []
    assert queue_traffic.carried(pd.DataFrame()) == []


def test_without_qstats_the_drivers_own_counters_say_it() -> None:
    """A driver that reports no qstats (vmxnet3, ixgbe) counts per queue in `ethtool -S`:
    its rx_packets.qN rows say where the traffic went, and the line says so. An
    interface with qstats keeps them, whatever ethtool_stats also holds."""
    driver = samples({"steered": {0: 301.0, 1: 0.0}})
    driver["source"] = driver["source"].replace({"qstats": "ethtool_stats"})
    assert queue_traffic.carried(driver) == [
        "steered: a data0 received 301 packets, by queue q0 100.0% (ethtool -S)"]
    settings = [Row("steered", "a", "irq_affinity", "queue 1 irq 43 (data0-rxtx-1)")]
    (warning,) = queue_traffic.missed(driver, settings)
    assert "queue(s) 1 of a data0, which received 0.0% of its packets" in warning
    both = pd.concat([samples({"steered": {0: 3.0, 1: 997.0}}), driver])
    assert queue_traffic.carried(both) == [
        "steered: a data0 received 1000 packets, by queue q1 99.7%, q0 0.3%"]
