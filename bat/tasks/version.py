"""``bat version``: the installed bat-cli version."""

from __future__ import annotations

from invoke import Context

from bat.tasks._options import command


@command()
def version(c: Context) -> None:
    """Print the installed bat-cli version (from the package metadata)."""
    from bat.errors import OperationError
    from bat.version import installed_version

    found = installed_version()
    if found is None:
        raise OperationError(
            "bat-cli version unavailable: running from a source checkout that is not "
            "installed (pip install -e . installs it)"
        )
    print(f"bat-cli {found}")
