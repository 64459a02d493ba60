"""``bat version``: the installed bat-cli version."""

from __future__ import annotations

from invoke import Context

from bat.tasks._options import command


@command()
def version(c: Context) -> None:
    """Print the installed bat-cli version (from the package metadata)."""
    from bat.version import version_line

    print(version_line())
