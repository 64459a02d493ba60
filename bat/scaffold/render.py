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
from bat.errors import OperationError

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


def write_files(target: Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``files`` under ``target`` (creating folders); return the paths written."""
    written = []
    for relative, text in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
        written.append(path)
    return written
