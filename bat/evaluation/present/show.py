"""``bat eval.show``: the resolved configuration, as text for people or JSON for scripts.

The dataset is checked (every task validated) but its tasks are not kept: a report on
a million-task dataset must not need the memory a run of it does.
"""

from __future__ import annotations

import json
from typing import Any

from bat.evaluation.inputs.config import ResolvedConfig
from bat.evaluation.inputs.dataset import DatasetCheck, DatasetFacts, check_dataset
from bat.figures import counted
from bat.secrets import display_url


def warnings_of(resolved: ResolvedConfig, dataset: DatasetCheck | None = None) -> list[str]:
    """What is worth knowing before a run, from the one set of checks every command
    makes (:func:`~bat.evaluation.inputs.preflight.project_checks`): raises
    ``InputError`` for what ``eval.run`` would refuse. Pass the ``dataset`` when it is
    checked already: a large one takes seconds to read."""
    from bat.evaluation.inputs.preflight import project_checks

    if dataset is None:
        dataset = check_dataset(resolved.dataset, unknown_keys=resolved.unknown_keys)
    return project_checks(resolved, dataset).warnings


def resolved_view(
    resolved: ResolvedConfig, dataset: DatasetCheck | None = None, team_prices: Any = None
) -> dict[str, Any]:
    """Everything a run would use, with defaults filled in and paths made concrete; URLs
    without their credentials and ``env`` maps by name only (this is printed).
    ``team_prices``: bat.yaml's ``eval.prices``, under eval.yaml's."""
    evaluation = resolved.evaluation
    agent = evaluation.agent
    if dataset is None:
        dataset = check_dataset(resolved.dataset, unknown_keys=resolved.unknown_keys)
    return {
        "file": str(resolved.file),
        "dataset": {
            "path": str(resolved.dataset),
            "tasks": dataset.count,
            "sha256": dataset.sha256,
            "simulated_users": dataset.facts.simulated.count,  # tasks with a user
        },
        "output_dir": str(resolved.output_dir),
        "run_name": evaluation.run_name,
        "k": evaluation.k,
        "episodes_per_model": dataset.count * evaluation.k,
        "concurrency": evaluation.concurrency,
        "timeouts_s": {
            "agent_startup": evaluation.agent_startup_timeout_s,
            "agent_shutdown": evaluation.agent_shutdown_timeout_s,
            "turn": evaluation.turn_timeout_s,
        },
        "agent": {
            "url": display_url(resolved.agent_url),
            "url_from": resolved.agent_url_source,
            "started_by_bat": agent.start,
            "command": agent.command if agent.start else None,
            "root": str(resolved.root),
            "env": sorted(agent.env),
            "spans_file": str(agent.spans_file) if agent.spans_file else None,
            "extra_spans": [str(path) for path in resolved.extra_spans],
            "max_restarts": agent.max_restarts,
            "image": agent.image,
            "replicas": agent.replicas,
            "adapter": agent.adapter,
            # A command-line agent's options and workspace (bat.agents); option values
            # are shown by name only where they may hold a secret (env).
            "options": sorted(agent.options) if agent.adapter != "a2a" else [],
            "workspace": (
                agent.workspace.model_dump(mode="json") if agent.adapter != "a2a" else None
            ),
            "workspace_from_groups": agent.adapter != "a2a"
            and "workspace" not in agent.model_fields_set
            and _belt_folder(resolved.dataset),
        },
        "models": [
            {
                "label": resolved.model_label(m),
                "folder": resolved.model_dir(m),
                "provider": m.provider,
                "model": m.model,
                "base_url": display_url(m.base_url),
                "script": m.script,
                "env": sorted(m.env),
            }
            for m in resolved.config.models
        ]
        or [
            {
                "label": "agent-default",
                "note": "the agent's own MODEL settings"
                if agent.adapter == "a2a"
                else "the CLI's own default model and keys",
            }
        ],
        "qualitative": evaluation.qualitative,
        "judges": [
            {
                **judge.model_dump(mode="json"),
                "base_url": display_url(judge.base_url),
                "env": sorted(judge.env),
            }
            for judge in resolved.config.judges
        ],
        "user": _user_model(resolved),
        "prices": price_view(resolved, team_prices),
    }


def price_view(resolved: ResolvedConfig, team_prices: Any = None) -> dict[str, Any]:
    """What each model, judge and user model of a run costs per million tokens and where
    that price comes from (eval.yaml, bat.yaml, genai-prices and its version), or null:
    unpriced. Looked up as the run will (nothing said, nothing fetched: a newer table
    ``update_prices`` asks for is fetched by the run only)."""
    from bat.evaluation.cost import AGENT_DEFAULT, LIBRARY, PriceBook, library_version

    quiet = PriceBook(resolved.config.prices, team_prices)
    config = resolved.config
    paid = [("model", m or AGENT_DEFAULT) for m in resolved.models]
    paid += [("judge", judge) for judge in config.judges]
    paid += [("user", config.user)] if config.user is not None else []
    found = []
    for role, spec in paid:
        price = quiet.price_of(spec)
        label = "agent-default" if spec is AGENT_DEFAULT else f"{spec.provider}:{spec.model}"
        found.append({"role": role, "label": label, "price": price and price.record()})
    return {
        "library": LIBRARY,
        "version": library_version(),
        "update": config.evaluation.update_prices is not False,
        "currency": quiet.currency,
        "models": found,
    }


def _user_model(resolved: ResolvedConfig) -> dict[str, Any] | None:
    """eval.yaml's ``user:`` as shown (None: there is none); ``env`` by name only."""
    spec = resolved.config.user
    if spec is None:
        return None
    return {
        "label": spec.shown,
        **spec.model_dump(mode="json"),
        "base_url": display_url(spec.base_url),
        "env": sorted(spec.env),
    }


def describe(
    resolved: ResolvedConfig,
    *,
    as_json: bool = False,
    dataset: DatasetCheck | None = None,
    team_prices: Any = None,
) -> str:
    view = resolved_view(resolved, dataset, team_prices)
    if as_json:
        return json.dumps(view, indent=2)
    agent, timeouts = view["agent"], view["timeouts_s"]
    start = (
        f"started by bat: {agent['command']} (in {agent['root']})"
        if agent["started_by_bat"]
        else "already running (bat starts and stops nothing)"
    )
    if agent["image"]:
        several = f", {agent['replicas']} replicas" if agent["replicas"] > 1 else ""
        start = f"started by bat from image {agent['image']}{several} (Docker engine)"
    lines = [
        f"configuration  {view['file']}",
        f"dataset        {view['dataset']['path']} ({view['dataset']['tasks']} tasks)",
        f"output         {view['output_dir']}"
        + (f" (run name {view['run_name']})" if view["run_name"] else ""),
        f"attempts       k = {view['k']} ({view['episodes_per_model']} episodes per model), "
        f"concurrency {view['concurrency']}",
        f"timeouts       start-up {timeouts['agent_startup']:g} s, "
        f"shutdown {timeouts['agent_shutdown']:g} s, turn {timeouts['turn']:g} s",
        f"agent          {agent['url']} (from {agent['url_from']}), {start}",
    ]
    if agent["adapter"] != "a2a":
        space = agent["workspace"]
        ref = f" at {space['ref']}" if space["ref"] else ""
        where = space["source"]
        if agent["workspace_from_groups"]:
            where, ref = "its belt group's working_dir (or fixture_repo)", ""
        options = f" (options: {', '.join(agent['options'])})" if agent["options"] else ""
        lines[-2:] = [
            f"timeouts       turn {timeouts['turn']:g} s",
            f"agent          {agent['adapter']}, a command-line agent run per turn{options}",
            f"workspaces     a copy of {where}{ref} per episode, kept: {space['keep']}",
        ]
    if agent["env"]:
        lines.append(f"agent env      {', '.join(agent['env'])}")
    lines.append("models")
    for model in view["models"]:
        extra = f" in {model['folder']}/" if model.get("folder") else ""
        extra += f" at {model['base_url']}" if model.get("base_url") else ""
        extra += f", scripted by bat from {model['script']}" if model.get("script") else ""
        extra += f" (env: {', '.join(model['env'])})" if model.get("env") else ""
        lines.append(
            f"  - {model['label']}{extra}" if "note" not in model else f"  - {model['note']}"
        )
    judges = (
        ", ".join(
            f"{j['provider']}:{j['model']}"
            + (f" (scripted by bat from {j['script']})" if j.get("script") else "")
            for j in view["judges"]
        )
        or "(none set)"
    )
    state = judges if view["qualitative"] else f"off (qualitative: false; judge: {judges})"
    lines.append(f"judge          {state}")
    user_line = _user_line(view["user"], view["dataset"]["simulated_users"])
    if user_line:
        lines.append(user_line)
    lines += _price_lines(view["prices"])
    return "\n".join(lines)


def _price_lines(view: dict[str, Any]) -> list[str]:
    """Each model's price per million tokens, input/output, and where it is from."""
    newer = ", a newer table fetched by the run" if view["update"] else ""
    lines = [f"prices         per million tokens, input / output ({view['currency']}{newer})"]
    width = max((len(entry["label"]) for entry in view["models"]), default=0)
    for entry in view["models"]:
        price = entry["price"]
        shown = "unpriced (its cost is unknown)"
        if price is not None:
            note = f": {price['note']}" if price.get("note") else ""
            shown = f"{price['input']:g} / {price['output']:g}  from {price['source']}{note}"
        lines.append(f"  - {entry['role']:<5} {entry['label']:<{width}}  {shown}")
    return lines


def _user_line(user: dict[str, Any] | None, simulated: int) -> str | None:
    """The user model and the tasks it plays; None when neither is (most datasets)."""
    if user is None and not simulated:
        return None
    tasks = f"{counted(simulated, 'task')} with a simulated user"
    if user is None:
        return f"user model     (none set): {tasks}"
    where = f" at {user['base_url']}" if user["base_url"] else ""
    if user["script"] is not None:
        where = f", scripted by bat from {user['script']}"
    seed = f", seed {user['seed']}" if user["seed"] is not None else ""
    return (
        f"user model     {user['label']}{where} (temperature {user['temperature']:g}{seed}, "
        f"concurrency {user['concurrency']}): {tasks}"
    )


def plan(
    resolved: ResolvedConfig,
    selection: Any,
    gates: list[Any],
    shard: Any = None,
    extra: Any = None,
    team_prices: Any = None,
) -> tuple[str, list[str]]:
    """``eval.run --dry-run``: every input checked as ``eval.run`` checks it (the dataset,
    the agent's files, the judges' keys), then what would run — nothing is started and
    nothing is written. Returns the plan and the warnings worth saying. ``extra`` gives
    more lines for the chosen tasks (the cost estimate, ``bat.evaluation.estimate``);
    ``team_prices``: bat.yaml's, for the models' prices."""
    from bat.evaluation.inputs.preflight import preflight

    checked = preflight(resolved)
    total = len(checked.dataset.tasks)
    chosen = selection.apply(checked.dataset)
    count = len(chosen.tasks)
    summary = DatasetCheck(
        path=chosen.path,
        sha256=chosen.sha256,
        count=count,
        weak=[],
        facts=DatasetFacts.of(chosen.tasks),
    )
    models = len(resolved.models)
    episodes = models * count * resolved.evaluation.k
    lines = [describe(resolved, dataset=summary, team_prices=team_prices)]
    if not selection.empty:
        shown = ", ".join(task.id for task in chosen.tasks[:10])
        more = f" and {count - 10} more" if count > 10 else ""
        lines.append(
            f"tasks          {count} of {total} chosen by {selection.flags()}: {shown}{more}"
        )
    lines.append("gates          " + ("; ".join(g.title for g in gates) if gates else "(none)"))
    lines.append(
        f"plan           {counted(models, 'model')} × {counted(count, 'task')} × k = "
        f"{resolved.evaluation.k} = {counted(episodes, 'episode')}"
    )
    if shard is not None:
        k = resolved.evaluation.k
        mine = sum(
            shard.keeps(m, attempt, t, count, k)
            for m in range(models)
            for attempt in range(1, k + 1)
            for t in range(count)
        )
        those = counted(episodes, "episode")
        lines.append(f"shard          slice {shard}: {mine} of those {those}")
    if checked.agent_python is not None:  # what eval.run's first line will say
        lines.append(checked.agent_python.line())
    if extra is not None:
        lines += extra(chosen.tasks)
    lines.append("dry run: nothing was started or written")
    return "\n".join(lines), checked.warnings


def _belt_folder(path: Any) -> bool:
    from bat.evaluation.inputs.belt_groups import is_belt_folder

    return is_belt_folder(path)
