"""`make test`'s budgets (tests/timed.py, tests/budgets.toml): seconds of the machine
they were measured on, scaled on a slower machine by how much slower it measured, never
below what is written."""

from __future__ import annotations

import math

import pytest

from tests import timed


def times(machine_factor: float | None, **parts: float) -> dict[str, float]:
    out = dict(parts)
    if machine_factor is not None:
        out[timed.SPEED] = timed.reference() * machine_factor
    return out


def test_a_part_over_one_and_a_half_budgets_fails_on_the_budgets_machine() -> None:
    unit = float(timed.budgets()["unit"]["budget"])  # type: ignore[arg-type]
    lines, over = timed.report(times(1.0, unit=unit * 1.4))
    assert over == [] and "budgets as written" in lines[1]
    lines, over = timed.report(times(1.0, unit=unit * 1.6))
    assert over == [f"unit took {unit * 1.6:.0f} s, over 1.5 x its budget of {unit:g} s"]


def test_a_slower_machine_scales_every_budget() -> None:
    unit = float(timed.budgets()["unit"]["budget"])  # type: ignore[arg-type]
    lines, over = timed.report(times(2.0, unit=unit * 2.9))
    assert over == [] and "2.00 x slower, each budget x 2.00" in lines[1]
    assert f"budget {unit * 2:5.0f} s" in lines[2]
    _, over = timed.report(times(2.0, unit=unit * 3.1))
    assert over == [f"unit took {unit * 3.1:.0f} s, over 1.5 x its budget of {unit * 2:g} s"]


@pytest.mark.parametrize("factor", [0.5, None])
def test_a_faster_or_unmeasured_machine_keeps_the_written_budgets(
        factor: float | None) -> None:
    unit = float(timed.budgets()["unit"]["budget"])  # type: ignore[arg-type]
    _, over = timed.report(times(factor, unit=unit * 1.6))
    assert len(over) == 1 and f"budget of {unit:g} s" in over[0]


def test_the_speed_measure_is_a_time() -> None:
    seconds = timed.speed()
    assert math.isfinite(seconds) and seconds > 0
