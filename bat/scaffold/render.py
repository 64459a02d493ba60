"""Rendering bat's Jinja2 templates into files.

Templates live in the repository's top-level ``templates/`` folder. The wheel ships it as
``bat/scaffold/templates``; an editable install or a plain checkout reads the folder
itself. A file ending in ``.j2`` is rendered (the suffix dropped); any other file is
copied as it is. Undefined variables are errors (``StrictUndefined``), so a template can
never silently render an empty value.

Rendering happens in memory first and files are written only when every template
rendered, each one atomically: a broken template or a bad value leaves nothing half-made.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bat.atomic import write_text_atomic
from bat.errors import InputError, OperationError, UsageError

TEMPLATE_SUFFIX = ".j2"


def templates_root() -> Path:
    """The folder holding bat's templates, wherever bat is running from."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parents[1] / "templates"):
        if (candidate / "agent").is_dir():
            return candidate
    raise OperationError(f"bat's templates are missing (looked in {here / 'templates'})")


def _environment(root: Path) -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_tree(name: str, context: Mapping[str, Any]) -> dict[str, str]:
    """Render every file of ``templates/<name>/`` -> ``{relative output path: text}``."""
    root = templates_root()
    env = _environment(root)
    files: dict[str, str] = {}
    for source in sorted((root / name).rglob("*")):
        if not source.is_file() or "__pycache__" in source.parts:
            continue
        relative = source.relative_to(root / name).as_posix()
        if relative.endswith(TEMPLATE_SUFFIX):
            files[relative[: -len(TEMPLATE_SUFFIX)]] = _render(env, f"{name}/{relative}", context)
        else:
            files[relative] = source.read_text(encoding="utf-8")
    return files


def render_file(template: str, context: Mapping[str, Any]) -> str:
    """Render one template, named relative to the templates folder."""
    root = templates_root()
    return _render(_environment(root), template, context)


def _render(env: Any, template: str, context: Mapping[str, Any]) -> str:
    import jinja2

    try:
        return env.get_template(template).render(**context)
    except jinja2.TemplateError as exc:
        raise OperationError(f"template {template} failed to render: {exc}") from None


def write_files(
    target: Path, files: Mapping[str, str], modes: Mapping[str, int] | None = None
) -> list[Path]:
    """Write ``files`` under ``target`` (creating folders); return the paths written.

    ``modes`` gives the permission bits of a new file by its relative path (``.env``:
    0600); an existing file keeps its own.
    """
    written = []
    for relative, text in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text, mode=(modes or {}).get(relative), follow_links=True)
        written.append(path)
    return written


def require_file_slots(target: Path, relatives: Mapping[str, object] | list[str]) -> None:
    """Refuse, before anything is written, a path that could not take a file.

    A folder where a file goes (``Dockerfile/``), or a file where a folder goes (``src``
    as a file), would otherwise fail half-way through writing, as ``File exists``.
    """
    for relative in relatives:
        path = target / relative
        if path.exists() and not path.is_file():
            raise UsageError(f"{path}: exists and is not a file; bat needs to write a file there")
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise UsageError(f"{parent}: is a file where bat needs a folder (to write {path})")
            if parent == target:
                break


def existing_text(path: Path) -> str | None:
    """The UTF-8 text of ``path``, or None when there is no such file.

    A file that is not UTF-8 is an :class:`InputError` naming its line, never a
    traceback, and never overwritten by a guess at what it held.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path} (line {line}): byte 0x{data[exc.start]:02x} is not UTF-8 text; "
            "bat leaves the file as it is"
        ) from None
