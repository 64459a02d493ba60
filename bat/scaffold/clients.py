"""ChatModelClient scaffolds in an agent's ``src/llm_clients/`` (``bat add.client``).

The package's ``__init__.py`` re-exports every client between two marker lines. bat
rewrites only what lies between the markers, so whatever a developer adds around them
survives ``add.client`` and ``init.agent --force``; a file without markers gets the block
appended. A file whose markers are damaged (one missing, or out of order) is refused:
guessing where the block ends could delete the developer's code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bat.atomic import check_writable, write_text_atomic
from bat.errors import InputError, UsageError
from bat.scaffold.names import ClientName, parse_client_list
from bat.scaffold.render import existing_text, render_file, require_file_slots, write_files

CLIENTS_DIR = Path("src/llm_clients")
EXPORTS = CLIENTS_DIR / "__init__.py"
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
    ordered = sorted(set(clients), key=lambda client: client.module)
    lines = [BEGIN]
    lines += [f"from .{client.module} import {client.class_name}" for client in ordered]
    lines.append("")
    names = ", ".join(f'"{client.class_name}"' for client in ordered)
    lines.append(f"__all__ = [{names}]")
    lines.append(END)
    block = "\n".join(lines) + "\n"
    return _HEADER + block if standalone else block


def updated_exports(text: str | None, clients: list[ClientName], path: Path) -> str:
    """The exports file ``text`` (None: none yet) importing ``clients``; the rest kept."""
    block = exports_block(clients)
    if text is None:
        return _HEADER + block
    begins, ends = text.count(BEGIN), text.count(END)
    if begins == ends == 0:
        return text + ("" if text.endswith("\n") or not text else "\n") + "\n" + block
    start, end = text.find(BEGIN), text.find(END)
    if begins != 1 or ends != 1 or end < start:
        raise InputError(
            f"{path}: the bat marker lines are damaged (need one '{BEGIN}' line before one "
            f"'{END}' line); fix them so bat knows which lines are its own"
        )
    after = text[end + len(END) :]
    return text[:start] + block + after.removeprefix("\n")


def clients_in(package: Path) -> list[ClientName]:
    """The clients whose ``*_client.py`` module is in ``package``."""
    found = (ClientName.from_module(path.stem) for path in sorted(package.glob("*_client.py")))
    return [client for client in found if client is not None]


@dataclass
class AddedClients:
    """The client modules written and the exports file updated."""

    written: list[Path]
    exports: Path


def add_clients(
    names: list[str] | str, *, root: Path = Path("."), force: bool = False
) -> AddedClients:
    """Add one client scaffold per name to the agent at ``root``; all checks come first.

    Every check (names, existing modules, the exports file's encoding, markers and
    permissions) runs before the first write, so a refusal leaves the agent as it was.
    """
    package = root / CLIENTS_DIR
    if not package.is_dir():
        raise UsageError(
            f"{package}/ not found: run bat add.client from an agent's root folder "
            "(the one bat init.agent created)"
        )
    clients = parse_client_list(names)
    if not clients:
        raise UsageError("no client name given (e.g. bat add.client planner,executor)")
    files = client_files(clients)
    require_file_slots(root, files)
    existing = [c for c in clients if (package / f"{c.module}.py").exists()]
    if existing and not force:
        listed = ", ".join(f"{CLIENTS_DIR / c.module}.py" for c in existing)
        raise UsageError(f"{listed} already exists (use --force to overwrite)")
    exports = root / EXPORTS
    require_file_slots(root, {EXPORTS.as_posix(): ""})
    present = clients_in(package) + clients
    exports_text = updated_exports(existing_text(exports), present, exports)
    for relative in files:
        check_writable(root / relative)
    check_writable(exports)
    written = write_files(root, files)
    write_text_atomic(exports, exports_text, follow_links=True)
    return AddedClients(written=written, exports=exports)
