"""bat's configuration layers, on Invoke's ``Config``.

Lowest to highest: built-in defaults (each collection's ``ns.configure``) <
``/etc/bat.yaml`` < ``~/.bat.yaml`` < ``./bat.yaml`` < ``BAT_*`` environment variables <
the file given with ``-f`` < command-line flags. Invoke does all of this once the prefix
is ``bat``, except the project file (the program loads ``./bat.yaml`` itself, because
Invoke only looks for one next to a ``tasks.py`` it discovered).

Invoke lets a malformed file or an uncastable variable escape as a raw exception; the
overrides here turn each into a :class:`~bat.errors.ConfigError` naming the culprit.
"""

from __future__ import annotations

from typing import Any

from invoke import Config
from invoke.exceptions import AmbiguousEnvVar, UncastableEnvVar, UnknownFileType

from bat.errors import ConfigError
from bat.input_files import load_json, load_yaml


class BatConfig(Config):
    """Invoke configuration with bat's file names (``bat.yaml``) and ``BAT_`` variables."""

    prefix = "bat"
    env_prefix = "BAT"

    def _load_yaml(self, path: Any) -> Any:
        """Read through bat's bounded reader: a huge, endless or non-UTF-8 file, an alias
        bomb (which Invoke's merge would copy out for ever) and duplicate keys are each
        one error naming the file; a missing file stays FileNotFoundError (Invoke skips it)."""
        return _mapping(path, load_yaml(path, kind="a configuration file"))

    _load_yml = _load_yaml

    def _load_json(self, path: Any) -> Any:
        return _mapping(path, load_json(path, kind="a configuration file"))

    def _load_py(self, path: str) -> dict:
        try:
            return super()._load_py(path)
        except Exception as exc:  # a Python config file can fail in any way its code can
            raise ConfigError(f"{path}: cannot load: {type(exc).__name__}: {exc}") from None

    def _load_file(self, prefix: str, absolute: bool = False, merge: bool = True) -> None:
        try:
            super()._load_file(prefix, absolute=absolute, merge=merge)
        except UnknownFileType:
            path = getattr(self, f"_{prefix}_path", None) or "the configuration file"
            raise ConfigError(
                f"{path}: unsupported configuration file type (use .yaml, .yml, .json or .py)"
            ) from None
        except PermissionError as exc:
            raise ConfigError(f"{exc.filename}: cannot read configuration file") from None

    def load_shell_env(self) -> None:
        try:
            super().load_shell_env()
        except (UncastableEnvVar, AmbiguousEnvVar) as exc:
            raise ConfigError(f"environment: {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"a BAT_* environment variable has the wrong type: {exc}") from None


def _mapping(path: Any, data: Any) -> dict:
    """An empty file is an empty mapping; anything but a mapping at the top is an error."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not a {kind}")
    return data
