"""``bat version``: the installed bat-cli version."""

from __future__ import annotations

from invoke import Context

from bat.tasks._options import command


@command()
def version(c: Context) -> None:
    """Print the installed bat-cli version (from the package metadata)."""
    from bat.version import version_line

    print(version_line())


# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["version"]
