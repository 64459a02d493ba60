"""ChatModelClient scaffolds in an agent's ``src/llm_clients/`` (``bat add.client``).

The package's ``__init__.py`` re-exports every client between two marker lines. bat
rewrites only what lies between the markers, so whatever a developer adds around them
survives ``add.client``; a file without markers gets the block appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bat.atomic import write_text_atomic
from bat.errors import UsageError
from bat.scaffold.names import ClientName, parse_client_list
from bat.scaffold.render import render_file, write_files

CLIENTS_DIR = Path("src/llm_clients")
BEGIN = "# >>> bat: clients (maintained by `bat add.client`) >>>"
END = "# <<< bat: clients <<<"
_HEADER = '''"""The LLM clients of this agent: one ChatModelClient per role."""

'''


def client_files(clients: list[ClientName]) -> dict[str, str]:
    """``{src/llm_clients/<name>_client.py: source}`` for each client."""
    return {
        f"{CLIENTS_DIR.as_posix()}/{client.module}.py": render_file(
            "client/client.py.j2", {"client": client}
        )
        for client in clients
    }


def exports_block(clients: list[ClientName], *, standalone: bool = False) -> str:
    """The marked block importing every client; with ``standalone``, a whole ``__init__.py``."""
    ordered = sorted(clients, key=lambda client: client.module)
    lines = [BEGIN]
    lines += [f"from .{client.module} import {client.class_name}" for client in ordered]
    lines.append("")
    names = ", ".join(f'"{client.class_name}"' for client in ordered)
    lines.append(f"__all__ = [{names}]")
    lines.append(END)
    block = "\n".join(lines) + "\n"
    return _HEADER + block if standalone else block


@dataclass
class AddedClients:
    """The client modules written and the exports file updated."""

    written: list[Path]
    exports: Path


def add_clients(
    names: list[str] | str, *, root: Path = Path("."), force: bool = False
) -> AddedClients:
    """Add one client scaffold per name to the agent at ``root``; all checks come first."""
    package = root / CLIENTS_DIR
    if not package.is_dir():
        raise UsageError(
            f"{package}/ not found: run bat add.client from an agent's root folder "
            "(the one bat init.agent created)"
        )
    clients = parse_client_list(names)
    if not clients:
        raise UsageError("no client name given (e.g. bat add.client planner,executor)")
    existing = [c for c in clients if (package / f"{c.module}.py").exists()]
    if existing and not force:
        listed = ", ".join(f"{CLIENTS_DIR / c.module}.py" for c in existing)
        raise UsageError(f"{listed} already exists (use --force to overwrite)")
    written = write_files(root, client_files(clients))
    exports = package / "__init__.py"
    _update_exports(exports, _clients_in(package))
    return AddedClients(written=written, exports=exports)


def _clients_in(package: Path) -> list[ClientName]:
    found = (ClientName.from_module(path.stem) for path in package.glob("*_client.py"))
    return [client for client in found if client is not None]


def _update_exports(path: Path, clients: list[ClientName]) -> None:
    block = exports_block(clients)
    if not path.exists():
        write_text_atomic(path, _HEADER + block)
        return
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start != -1 and end > start:
        after = text[end + len(END) :]
        updated = text[:start] + block + after.removeprefix("\n")
    else:
        updated = text + ("" if text.endswith("\n") or not text else "\n") + "\n" + block
    write_text_atomic(path, updated)
