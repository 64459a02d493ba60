"""Checks of window.py; run with `python3 test_window.py` (or pytest)."""

from window import slice_window


def test_a_full_window():
    assert slice_window([1, 2, 3, 4, 5], 1, 3) == [2, 3, 4]


def test_a_window_at_the_end():
    assert slice_window([1, 2, 3], 2, 5) == [3]


if __name__ == "__main__":
    tests = [check for name, check in sorted(globals().items()) if name.startswith("test_")]
    for check in tests:
        check()
    print(f"{len(tests)} passed")
