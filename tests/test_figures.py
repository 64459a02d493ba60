"""bat.figures: one spelling per kind of figure, the same in every place that prints one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.figures import MISSING, counted, integer, interval, number, percent, points, seconds

PERCENT = re.compile(r"(?P<number>\d+\.\d) %")


@pytest.mark.parametrize(
    ("rate", "shown"),
    [(0.875, "87.5 %"), (1.0, "100.0 %"), (0.0, "0.0 %"), (2 / 3, "66.7 %"), (None, MISSING)],
)
def test_percent(rate, shown):
    assert percent(rate) == shown


@given(st.floats(min_value=0.0, max_value=1.0))
def test_any_rate_prints_as_a_percentage_that_reads_back_within_its_precision(rate):
    shown = percent(rate)
    match = PERCENT.fullmatch(shown)
    assert match, shown
    # One decimal of a percentage: the rate read back is within half of 0.1 point.
    assert abs(float(match["number"]) / 100 - rate) <= 0.0005 + 1e-12


def test_interval_is_two_percentages():
    assert interval([0.254, 0.746]) == "25.4 % – 74.6 %"
    assert interval((0.0, 1.0)) == "0.0 % – 100.0 %"
    assert interval(None) == interval([]) == interval([0.5]) == MISSING


@pytest.mark.parametrize(
    ("change", "shown"),
    [(0.125, "+12.5 points"), (-1 / 3, "-33.3 points"), (0.0, "+0.0 points"), (None, MISSING)],
)
def test_points_are_signed(change, shown):
    assert points(change) == shown


@given(st.floats(min_value=-1.0, max_value=1.0))
def test_any_change_reads_back_within_its_precision(change):
    match = re.fullmatch(r"(?P<number>[+-]\d+\.\d) points", points(change))
    assert match
    assert abs(float(match["number"]) / 100 - change) <= 0.0005 + 1e-12


def test_seconds():
    assert seconds(1.234) == "1.23 s"
    assert seconds(0) == "0.00 s"
    assert seconds(125.5) == "125.50 s"
    assert seconds(None) == MISSING


def test_integer_and_counted_separate_thousands():
    assert integer(7) == "7"
    assert integer(12345) == "12,345"
    assert integer(-1234567) == "-1,234,567"
    assert counted(1, "run") == "1 run"
    assert counted(0, "run") == "0 runs"
    assert counted(2, "analysis", "analyses") == "2 analyses"
    assert counted(1500, "episode") == "1,500 episodes"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.875, "0.875"),
        (0.66666666, "0.6667"),
        (3.2e-07, "3.2e-07"),
        (2.5, "2.5"),
        (3.0, "3"),
        (999.94, "999.9"),
        (12345.6, "12,346"),
        (-2000.0, "-2,000"),
        (None, MISSING),
    ],
)
def test_number(value, shown):
    assert number(value) == shown


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_any_number_reads_back_within_four_significant_digits(value):
    shown = number(value)
    back = float(shown.replace(",", ""))
    # Four significant digits below a thousand; the nearest whole number above.
    tolerance = 0.5 if abs(value) >= 1000 else abs(value) * 5e-4 + 1e-300
    assert abs(back - value) <= tolerance, (value, shown)
