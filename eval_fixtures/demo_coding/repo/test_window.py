"""Checks of window.py; run with `python test_window.py` or `python -m pytest -q`."""

from window import slice_window


def test_a_full_window():
    assert slice_window([1, 2, 3, 4, 5], 1, 3) == [2, 3, 4]


def test_a_window_at_the_end():
    assert slice_window([1, 2, 3], 2, 5) == [3]


if __name__ == "__main__":
    test_a_full_window()
    test_a_window_at_the_end()
    print("2 passed")
