"""bat's configuration layers, on Invoke's ``Config``.

Lowest to highest: built-in defaults (each collection's ``ns.configure``) <
``/etc/bat.yaml`` < ``~/.bat.yaml`` < ``./bat.yaml`` < ``BAT_*`` environment variables <
the file given with ``-f`` < command-line flags. Invoke does all of this once the prefix
is ``bat``, except the project file (the program loads ``./bat.yaml`` itself, because
Invoke only looks for one next to a ``tasks.py`` it discovered).

Invoke lets a malformed file or an uncastable variable escape as a raw exception, reads
``BAT_*`` booleans loosely (any non-empty word is true) and takes any key in a file. The
overrides here read every file and every variable through the settings' schema
(:mod:`bat.cli.settings_schema`) as it is loaded, so the merged configuration only ever
holds values of the right type, and turn each problem into a
:class:`~bat.errors.ConfigError` naming the file or variable and the key.
"""

from __future__ import annotations

import os
from typing import Any

from invoke import Collection, Config
from invoke.config import merge_dicts
from invoke.env import Environment
from invoke.exceptions import AmbiguousEnvVar, UncastableEnvVar, UnknownFileType
from invoke.util import yaml

from bat.cli.settings_schema import Invalid, Schema, boolean, shown
from bat.errors import ConfigError
from bat.input_files import load_json, load_yaml


class BatConfig(Config):
    """Invoke configuration with bat's file names (``bat.yaml``) and ``BAT_`` variables."""

    prefix = "bat"
    env_prefix = "BAT"
    # The command tree whose defaults make the schema; None: bat's own (bat.tasks.ns).
    namespace: Collection | None = None

    @classmethod
    def bound_to(cls, namespace: Collection | None) -> type[BatConfig]:
        """This class, reading settings by the schema of ``namespace``'s defaults."""
        if namespace is None:
            return cls
        return type(cls.__name__, (cls,), {"namespace": namespace})

    def settings_schema(self) -> Schema:
        """The schema of every setting of the command tree (cheap: a walk of small dicts)."""
        namespace = type(self).namespace
        if namespace is None:
            from bat.tasks import ns as namespace
        return Schema.from_defaults(namespace_defaults(namespace), Config.global_defaults())

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
        """Invoke's loading of one file, then every key of it checked by the schema.

        Checked before any merge: a section of the wrong shape (``init: 5``) would make
        Invoke's merge fail with a traceback, and a value of the wrong type must never
        reach a command.
        """
        try:
            super()._load_file(prefix, absolute=absolute, merge=False)
        except UnknownFileType:
            path = getattr(self, f"_{prefix}_path", None) or "the configuration file"
            raise ConfigError(
                f"{path}: unsupported configuration file type (use .yaml, .yml, .json or .py)"
            ) from None
        except PermissionError as exc:
            raise ConfigError(f"{exc.filename}: cannot read configuration file") from None
        except UnicodeDecodeError as exc:
            path = self._file_tried(prefix, absolute)
            raise ConfigError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        if getattr(self, f"_{prefix}_found"):
            path = getattr(self, f"_{prefix}_path")
            data = getattr(self, f"_{prefix}")
            self._set(f"_{prefix}", self._checked(path, data))
        if merge:
            self.merge()

    def _checked(self, path: str, data: dict) -> dict:
        """The file's data with every value read by its kind; a ConfigError if one is wrong."""

        def where(dotted: str) -> str:
            line = _yaml_line(path, dotted) if path.endswith((".yaml", ".yml")) else None
            return f"{path}: {dotted}" + (f" (line {line})" if line else "")

        try:
            return self.settings_schema().check_layer(data, where)
        except Invalid as exc:
            raise ConfigError(str(exc)) from None

    def _file_tried(self, prefix: str, absolute: bool) -> str:
        """The file Invoke was reading for ``prefix`` (the first candidate that exists)."""
        if absolute:
            return str(getattr(self, f"_{prefix}_path"))
        start = getattr(self, f"_{prefix}_prefix") or ""
        for suffix in self._file_suffixes:
            candidate = os.path.expanduser(f"{start}{self.file_prefix or self.prefix}.{suffix}")
            if os.path.isfile(candidate):
                return candidate
        return "a configuration file"

    def load_shell_env(self) -> None:
        """Invoke's reading of ``BAT_*`` variables, each read strictly by its setting's kind.

        Like Invoke, only variables that name an existing key are read (the keys of every
        command group: bat's root collection holds all their defaults).
        """
        self.merge()
        loader = _StrictEnvironment(self._config, self._env_prefix, self.settings_schema())
        try:
            data = loader.load()
        except (UncastableEnvVar, AmbiguousEnvVar) as exc:
            raise ConfigError(f"environment: {exc}") from None
        self._set(_env=data)
        self.merge()


class _StrictEnvironment(Environment):
    """Invoke's ``BAT_*`` reader with bat's conversions: by the schema, strict booleans.

    Invoke's own conversion makes every string but ``""`` and ``"0"`` a true boolean and
    lets ``int("abc")`` fail without naming the variable.
    """

    def __init__(self, config: Any, prefix: str, schema: Schema) -> None:
        super().__init__(config=config, prefix=prefix)
        self._schema = schema

    def _path_set(self, key_path: Any, value: str) -> None:
        dotted = ".".join(key_path)
        variable = self._prefix + self._to_env_var(key_path)
        kind = self._schema.kind(dotted)
        old = self._path_get(key_path)
        try:
            if kind is not None:
                new = kind.read(value)
            elif isinstance(old, bool):
                new = boolean(value)
            else:
                new = self._cast(old, value)
        except Invalid as exc:
            raise ConfigError(f"environment: {variable} ({dotted}): {exc}") from None
        except UncastableEnvVar:
            raise ConfigError(
                f"environment: {variable} ({dotted}): a {type(old).__name__} setting "
                "cannot be set from the environment (use a configuration file)"
            ) from None
        except (TypeError, ValueError):
            raise ConfigError(
                f"environment: {variable} ({dotted}): expected a {type(old).__name__}, "
                f"got {shown(value)}"
            ) from None
        node = self.data
        for key in key_path[:-1]:
            node = node.setdefault(key, {})
        node[key_path[-1]] = new


def namespace_defaults(collection: Collection) -> dict:
    """The ``ns.configure`` defaults of a collection and of every collection under it."""
    merged: dict = {}
    for sub in collection.collections.values():
        merge_dicts(merged, namespace_defaults(sub))
    merge_dicts(merged, collection.configuration())
    return merged


def _yaml_line(path: str, dotted: str) -> int | None:
    """The line of ``dotted``'s deepest key found in a YAML file, for an error message.

    Walks the composed node tree along the one path only: aliases are never expanded
    and nothing is built, so a hostile file costs no more than it took to read.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            node = yaml.compose(handle, Loader=yaml.SafeLoader)
    except (OSError, ValueError, yaml.YAMLError):
        return None
    line = None
    for part in dotted.split("."):
        if not isinstance(node, yaml.MappingNode):
            break
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                line, node = key.start_mark.line + 1, value
                break
        else:
            break
    return line


def _mapping(path: Any, data: Any) -> dict:
    """An empty file is an empty mapping; anything but a mapping at the top is an error."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not a {kind}")
    return data
