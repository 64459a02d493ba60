"""The installed bat-cli version, read from package metadata (never hard-coded).

``bat --version`` and ``bat version`` give one answer through :func:`version_line`: the
version, or (from a source checkout that is not installed) the same error and exit 1.
"""

from __future__ import annotations

DISTRIBUTION = "bat-cli"


def installed_version() -> str | None:
    """The version of the installed ``bat-cli`` distribution, or None from a bare checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


def version_line() -> str:
    """``bat-cli VERSION``; an OperationError when no version is installed to report."""
    from bat.errors import OperationError

    found = installed_version()
    if found is None:
        raise OperationError(
            "bat-cli version unavailable: running from a source checkout that is not "
            "installed (pip install -e . installs it)"
        )
    return f"bat-cli {found}"
