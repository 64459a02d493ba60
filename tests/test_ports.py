"""bat.ports: the one rule for a TCP port, and its one message."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.ports import port_number, port_problem, url_port_problem


@given(st.one_of(st.integers(-100, 70_000), st.text(max_size=8)))
def test_port_problem_accepts_exactly_the_ports(value):
    text = str(value).strip()
    number = int(text) if text.isascii() and text.isdigit() else None
    assert (port_problem(value) is None) is (number is not None and 0 < number < 65536)
    free = port_problem(value, any_free=True) is None
    assert free is (number is not None and 0 <= number < 65536)


@given(st.one_of(st.integers(1, 65535), st.integers(1, 65535).map(str)))
def test_a_port_reads_as_its_number(value):
    assert port_number(value) == int(value)
    assert port_number(f" {value}\n") == int(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "'0' is not a port number (1-65535)"),
        ("70000", "'70000' is not a port number (1-65535)"),
        ("٣", "'٣' is not a port number (1-65535)"),
        ("-1", "'-1' is not a port number (1-65535)"),
        ("9100.0", "'9100.0' is not a port number (1-65535)"),
        (9100.0, "9100.0 is not a port number (1-65535)"),
        (True, "True is not a port number (1-65535)"),
        (None, "None is not a port number (1-65535)"),
        ("x" * 100, f"'{'x' * 36}... is not a port number (1-65535)"),
    ],
)
def test_one_message_names_the_value_and_the_range(value, message):
    assert port_problem(value) == message
    with pytest.raises(ValueError) as refused:
        port_number(value)
    assert str(refused.value) == message


def test_zero_is_a_port_only_where_any_free_port_is_wanted():
    assert port_problem(0, any_free=True) is None
    assert port_number("0", any_free=True) == 0
    assert port_problem(65536, any_free=True) == (
        "'65536' is not a port number (0-65535, 0: any free port)"
    )


def test_thousands_of_digits_are_refused_at_once():
    """int() of that many digits would raise (Python's limit), not answer."""
    assert port_problem("9" * 10_000).endswith("... is not a port number (1-65535)")
    assert port_problem("0" * 10_000 + "80") is None  # leading zeros: still port 80


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:9900/", None),
        ("http://127.0.0.1/", None),
        ("http://127.0.0.1:/", None),
        ("https://user:pass@[::1]:8443/x", None),
        ("https://user:pass@[::1]/x", None),
        ("http://127.0.0.1:0", "'0' is not a port number (1-65535)"),
        ("http://127.0.0.1:70000", "'70000' is not a port number (1-65535)"),
        ("http://localhost:${PORT}", "'${PORT}' is not a port number (1-65535)"),
        ("http://[::1]:abc/", "'abc' is not a port number (1-65535)"),
        ("//registry.example:5000/team", None),
    ],
)
def test_the_port_written_in_a_url(url, problem):
    assert url_port_problem(url) == problem


def test_a_url_that_cannot_be_split_is_left_to_the_caller():
    with pytest.raises(ValueError):
        url_port_problem("http://[::1")
