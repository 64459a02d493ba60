"""The installed bat-cli version, read from package metadata (never hard-coded)."""

from __future__ import annotations

DISTRIBUTION = "bat-cli"


def installed_version() -> str | None:
    """The version of the installed ``bat-cli`` distribution, or None from a bare checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None
