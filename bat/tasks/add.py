"""``bat add``: extend an existing agent (``add.client``)."""

from __future__ import annotations

from invoke import Collection, Context

from bat.tasks._options import command


@command(
    short={"force": "f"},
    variadic=True,  # `bat add.client a b c` means `bat add.client a,b,c`
    help={
        "names": "Client names, comma-separated (or several words): planner,executor",
        "force": "Overwrite client modules that already exist.",
    },
)
def client(c: Context, names: str, force: bool = False) -> None:
    """Add ChatModelClient scaffolds to src/llm_clients/ (run from the agent's root)."""
    from bat.scaffold.clients import add_clients

    added = add_clients(names, force=force)
    for path in added.written:
        print(f"Wrote {path}")
    print(f"Updated {added.exports}")


ns = Collection("add")
ns.add_task(client)

# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["client", "ns"]
