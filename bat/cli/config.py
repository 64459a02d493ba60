"""bat's configuration layers: read and checked by bat, handed to Invoke whole.

Lowest to highest: built-in defaults (each collection's ``ns.configure``) <
``/etc/bat.yaml`` < ``~/.bat.yaml`` < ``./bat.yaml`` < ``BAT_*`` environment variables <
the file given with ``-f`` < command-line flags (which tasks read before the
configuration: ``bat.tasks._options.setting``).

Why bat reads them itself: Invoke's own loading reads a file with no bound (an alias
bomb, ``/dev/zero``), takes any key, lets a malformed file escape as a traceback, and
reads ``BAT_*`` booleans loosely (``BAT_IMAGES_ACCEPT_NEW_HOST_KEY=false`` is true to
it). :mod:`bat.cli.settings` reads every file with bat's bounded reader and every
layer through pydantic models of the settings.

How the result reaches Invoke, using only its public API (invoke/config.py): a
``Config`` keeps one slot per layer, but only three slots can be filled from outside,
``load_defaults``, ``load_collection`` and ``load_overrides``; the file and environment
slots are filled only by Invoke's private loaders. The collection slot is no use: the
Executor refills it from the task's collection before every task. The defaults slot
lies under the collection's defaults, which would hide every setting. The overrides
slot lies above the defaults and under what tasks change while they run
(the run context, ``bat.tasks._chain``), which is where bat's layers belong; so bat merges its
layers in their order (:func:`read_settings`) and loads the result with
``load_overrides``. Tasks read ``c.config`` as before. The public loaders Invoke calls on
its own (``load_system``/``load_user`` from ``Config()`` and ``clone()``,
``load_shell_env`` before every task, ``load_project``/``load_runtime``) are overridden
to read nothing, so no file or variable ever reaches the configuration unchecked.

The reading happens once, when the command line is parsed (the ``-f`` path is known) and
a command is about to run: ``bat --help`` never reads a setting. pydantic (some 90 ms of
CPU to import, and the models some 30 more) is imported only when a settings file or a
``BAT_*`` variable of a key exists, so ``bat version`` on a machine without settings stays
as fast as ``--help``.

Another project's Invoke program that mounts bat's collections uses Invoke's own
``Config`` (``invoke.yaml``, ``INVOKE_*``) and nothing here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from invoke import Collection, Config
from invoke.config import merge_dicts

from bat.errors import UsageError

# Where the system and user files are; the project's is bat.* in the working folder.
# In each place the first of bat.yaml, bat.yml, bat.json, bat.py is read (Invoke's order).
SYSTEM_PREFIX = "/etc/bat"
USER_PREFIX = "~/.bat"
SUFFIXES = ("yaml", "yml", "json", "py")
ENV_PREFIX = "BAT_"


class BatConfig(Config):
    """Invoke's configuration, holding bat's settings as its override level.

    Invoke's own readers of files and variables read nothing here: bat reads all of
    them in :func:`read_settings`, and the program loads the result (``load_overrides``).
    """

    def load_system(self, merge: bool = True) -> None:
        """Reads nothing (so are ``load_user``, ``load_project`` and ``load_runtime``):
        :func:`read_settings` reads the files, through bat's bounded reader."""
        if merge:
            self.merge()

    load_user = load_project = load_runtime = load_system

    def load_shell_env(self) -> None:
        """Reads nothing: the ``BAT_*`` variables were read with the files, strictly."""


def read_settings(
    namespace: Collection, *, project_dir: Path, runtime: str | None
) -> dict[str, Any]:
    """bat's settings of every layer above the defaults, merged, for ``load_overrides``.

    ``runtime`` is the ``-f`` file: one that does not exist is a usage error (Invoke
    would skip it). A file or variable that cannot be used is a ConfigError naming it.
    """
    if runtime is not None and not os.path.exists(os.path.expanduser(runtime)):
        raise UsageError(f"{runtime}: no such configuration file (given with -f/--config)")
    defaults = namespace_defaults(namespace)
    files = settings_files(project_dir)
    variables = setting_variables(defaults, os.environ)
    if not files and not variables and runtime is None:
        return {}  # nothing to read: no need for pydantic
    from bat.cli import settings

    path = Path(os.path.expanduser(runtime)) if runtime is not None else None
    return settings.read_settings(defaults, files, variables, path)


def settings_files(project_dir: Path) -> list[Path]:
    """The system, user and project files that exist, lowest first."""
    found = []
    for prefix in (SYSTEM_PREFIX, os.path.expanduser(USER_PREFIX), str(project_dir / "bat")):
        for suffix in SUFFIXES:
            candidate = f"{prefix}.{suffix}"
            if os.path.exists(candidate):
                found.append(Path(candidate))
                break
    return found


def setting_variables(
    defaults: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, tuple[tuple[str, ...], str]]:
    """The ``BAT_*`` variables that name a key of ``defaults`` and are set:
    ``{"BAT_INIT_AGENT_PORT": (("init", "agent", "port"), "9100")}``.

    A key's variable is its path in upper case joined with ``_``, as Invoke names them;
    like Invoke, bat reads only variables that name a key.
    """
    found = {}
    for path in _leaf_paths(defaults):
        name = ENV_PREFIX + "_".join(path).upper()
        if name in environ:
            found[name] = (path, environ[name])
    return found


def _leaf_paths(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple]:
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from _leaf_paths(value, (*prefix, str(key)))
        else:
            yield (*prefix, str(key))


def namespace_defaults(collection: Collection) -> dict:
    """The ``ns.configure`` defaults of a collection and of every collection under it."""
    merged: dict = {}
    for sub in collection.collections.values():
        merge_dicts(merged, namespace_defaults(sub))
    merge_dicts(merged, collection.configuration())
    return merged
