"""The one rule for whole numbers written as text (``bat.numbers``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.numbers import DIGITS, whole_number


@pytest.mark.parametrize(("text", "number"), [("0", 0), (" 42 ", 42), ("007", 7), (5, 5)])
def test_ascii_digits_are_a_number(text, number):
    assert whole_number(text) == number


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("²", "got '²'"),  # isdigit() is true, int() raises
        ("٣", "got '٣'"),  # int() reads 3, no other program does
        ("1_0", "got '1_0'"),  # int() reads 10
        ("-1", "got '-1'"),
        ("+1", "got '+1'"),
        ("", "got ''"),
        ("9" * 5000, "a number of 5000 digits"),  # int() refuses it with a ValueError
        (True, "got True"),
        (1.5, "got 1.5"),
        ("x" * 500, "…"),
    ],
)
def test_anything_else_is_refused_in_words(text, says):
    with pytest.raises(ValueError, match="expected a whole number from 0") as caught:
        whole_number(text)
    assert says in str(caught.value)
    assert len(str(caught.value)) < 120


def test_the_range_is_the_callers():
    assert whole_number("3", lowest=1, highest=3) == 3
    with pytest.raises(ValueError, match="from 1 to 3, got 4"):
        whole_number("4", lowest=1, highest=3)
    with pytest.raises(ValueError, match="from 1, got 0"):
        whole_number("0", lowest=1)
    assert whole_number("0" * 100 + "1" * DIGITS) == int("1" * DIGITS)


@given(st.text(max_size=40))
def test_any_text_is_a_number_it_spells_or_a_value_error(text):
    try:
        number = whole_number(text)
    except ValueError as error:
        assert "\n" not in str(error)
    else:
        assert str(number) == (text.strip().lstrip("0") or "0")
