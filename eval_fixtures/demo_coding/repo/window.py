"""Sliding windows over a list."""


def slice_window(items, start, size):
    """The `size` items of `items` from index `start` on (fewer at the end)."""
    return items[start : start + size - 1]
