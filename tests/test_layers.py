"""The import graph of ``bat/``: no circle, and imports point down the layers.

Every ``import`` of a bat module by a bat module counts, at the top of a file or inside
a function (a lazy import is still a dependency; it only changes when it is paid).
The layers, lowest first, are the folders of docs/development.md ("Layout"); a module
may import its own layer and the ones below. An arrow back up is allowed only where
:data:`UPWARD` names it with the reason, and there are at most two.
"""

from __future__ import annotations

import ast
from pathlib import Path

BAT = Path(__file__).resolve().parents[1] / "bat"

# Lowest first. A module belongs to the longest prefix that names it.
LAYERS: list[tuple[str, ...]] = [
    (
        "bat.errors",
        "bat.atomic",
        "bat.terminal",
        "bat.figures",
        "bat.input_files",
        "bat.locate",
        "bat.secrets",
        "bat.dotenv",
        "bat.ports",
        "bat.numbers",
        "bat.version",
        "bat.uv_binary",
        "bat.agent_python",
        "bat.provider_keys",
    ),
    ("bat.scaffold", "bat.images"),
    ("bat.evaluation.log",),
    ("bat.agents",),  # the adapters' types, registry, workspaces: eval.yaml names one
    ("bat.evaluation.inputs",),
    (
        "bat.evaluation.stats",
        "bat.evaluation.cost",
        "bat.evaluation.verdict",
        "bat.evaluation.verdict_workspace",
    ),
    ("bat.evaluation.run", "bat.agents.cli_session"),  # a CLI's episodes, as the runner's
    ("bat.evaluation.judging",),
    ("bat.evaluation.present",),
    ("bat.evaluation",),  # pipeline, context, card, merge: the stages put together
    ("bat.doctor",),
    ("bat.tasks",),
    ("bat.cli",),
]

# The arrows back up, each with why it is not turned around.
UPWARD: dict[tuple[str, str], str] = {
    ("bat.evaluation.log.store", "bat.evaluation.stats"): (
        "a model folder written by an older bat (bat.metrics/1) is read as today's by "
        "summarizing its episodes again: the log reads its own old versions"
    ),
    ("bat.evaluation.log.batcli", "bat.evaluation.stats"): (
        "a bat-cli 2026.10 model folder is read by summarizing its episodes as ours: "
        "the log is the only reader of bat-cli's files"
    ),
}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(BAT.rglob("*.py")):
        parts = list(path.relative_to(BAT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the bat modules it imports (a name imported from a module counts as
    that module; one imported from a package, as the package or its submodule)."""
    known = modules()

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                found = owner(target) if target.startswith("bat.") else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def layer_of(module: str) -> int:
    best, level = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    assert level is not None, f"{module} is in no layer: add it to LAYERS"
    return level


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (source, target)
        for source, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(source)
    )


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_imports_point_down_the_layers():
    assert upward(import_graph()) == sorted(UPWARD)
    assert len(UPWARD) <= 2


def test_the_checks_can_fail():
    """A made-up graph with a circle and an arrow up is caught by both checks."""
    graph = {
        "bat.errors": {"bat.evaluation.run.runner"},
        "bat.evaluation.run.runner": {"bat.errors"},
    }
    assert cycles(graph) == [["bat.errors", "bat.evaluation.run.runner"]]
    assert upward(graph) == [("bat.errors", "bat.evaluation.run.runner")]


def test_evaluation_keeps_its_loose_modules_few():
    loose = sorted(p.name for p in (BAT / "evaluation").glob("*.py"))
    assert len(loose) <= 12, loose
