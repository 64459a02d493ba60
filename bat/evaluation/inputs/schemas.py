"""JSON Schemas of bat's files, made from the pydantic models that read or write them.

``bat eval.schema NAME`` prints one; ``docs/schemas/<NAME>.schema.json`` holds each of
them (``python -m bat.evaluation.inputs.schemas docs/schemas`` writes them again), and
``bat eval.init`` puts the eval.yaml one beside the starter eval.yaml, for editors.

A schema of a file bat reads (an input file: mode ``"validation"``) says what bat
*accepts*, which is sometimes more than the model's own types say: a ``models:`` entry
written ``"provider:model"``, a ``judge:`` that is one judge or a list, bat-cli
2026.10's key names, ``env`` values that are numbers, a block left empty. Those are
added by the ``fix`` function of the entry, after pydantic's schema is made. A schema
cannot say everything bat checks (duplicate ids, a ``PORT`` that must match
``agent_url``, a regex that must compile, ``2.0`` as a count: JSON Schema reads it as
the integer 2); bat's own checks stay the reference, and the schema never refuses what
bat accepts. A schema of a file bat writes (mode ``"serialization"``, by alias) says
what is in it.

Nothing here imports Invoke, and the models are imported only when a schema is made.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bat.evaluation.log import layout, outcome


@dataclass(frozen=True)
class Entry:
    """How one file's schema is made: the pydantic model (``"module:Class"``), the mode
    (``"validation"``: what bat accepts, for files it reads; ``"serialization"``: what
    it writes), a title and a one-line description (``bat eval.schema`` lists these),
    and optionally the name of a function of this module that adjusts the schema."""

    model: str
    mode: Literal["validation", "serialization"]
    title: str
    description: str
    fix: str | None = None


# The registry: NAME -> how its schema is made. Adding a file is one line here; then run
# `python -m bat.evaluation.inputs.schemas docs/schemas` to write its docs/schemas/NAME.schema.json.
# One entry a line: Entry("module:Model", mode, title, description[, fix]).
# fmt: off
SCHEMAS: dict[str, Entry] = {
    "eval.yaml": Entry("bat.evaluation.inputs.config:EvalConfig", "validation", "bat eval.yaml", "eval/eval.yaml: what to evaluate, with which models and judges", "_eval_yaml"),  # noqa: E501
    "tasks.json": Entry("bat.evaluation.inputs.dataset:TaskSpec", "validation", "bat tasks.json", "the dataset: a JSON list of tasks, or {\"tasks\": [...]}", "_tasks_json"),  # noqa: E501
    layout.RUN_FILE: Entry("bat.evaluation.log.run:RunRecord", "serialization", "bat run.json", "one run: <output_dir>/<run-id>/run.json (bat.run/1)"),  # noqa: E501
    "episode": Entry("bat.evaluation.log.episode:EpisodeResult", "serialization", "bat episode", "one episode of a run: <model>/episodes/<task>__try<k>.json (bat.episode/2)"),  # noqa: E501
    "scores": Entry("bat.evaluation.log.episode:JudgeScores", "serialization", "bat judge scores", "the judges' scores of one episode: the episode file's scores key"),  # noqa: E501
    layout.SUMMARY_FILE: Entry("bat.evaluation.log.summary:Summary", "serialization", "bat summary.json", "one model of a run, per task: <model>/summary.json (bat.summary/2)"),  # noqa: E501
    layout.METRICS_FILE: Entry("bat.evaluation.log.summary:Metrics", "serialization", "bat metrics.json", "one model of a run, per episode and in total: <model>/metrics.json (bat.metrics/2)"),  # noqa: E501
    layout.GATES_FILE: Entry("bat.evaluation.log.gates:GatesFile", "serialization", "bat gates.json", "what the gates of a run said: <output_dir>/<run-id>/gates.json (bat.gates/1)"),  # noqa: E501
    "export.json": Entry("bat.evaluation.present.export.json_doc:ExportDocument", "serialization", "bat export.json", "a run in one document: bat eval.export --to json:PATH (bat.export/1)"),  # noqa: E501
    layout.CARD_FILE: Entry("bat.evaluation.log.card:Card", "serialization", "bat card.json", "the benchmark card of a run: what exactly was measured, <run-id>/card.json (bat.card/1)"),  # noqa: E501
}
# fmt: on

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def names() -> list[str]:
    return list(SCHEMAS)


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the file ``name`` (a key of ``SCHEMAS``)."""
    entry = SCHEMAS[name]
    module, _, attr = entry.model.partition(":")
    model = getattr(importlib.import_module(module), attr)
    generated = model.model_json_schema(by_alias=True, mode=entry.mode)
    if entry.fix:
        generated = globals()[entry.fix](generated)
    body = _tidy(generated)
    body.pop("title", None)
    body.pop("description", None)
    return {"$schema": DRAFT, "title": entry.title, "description": entry.description, **body}


def schema_text(name: str) -> str:
    """``schema(name)`` as the text of its file (JSON, indent 2, a final newline)."""
    return json.dumps(schema(name), indent=2, ensure_ascii=False) + "\n"


def file_name(name: str) -> str:
    return f"{name}.schema.json"


def write_schemas(folder: Path) -> list[Path]:
    """Write ``<name>.schema.json`` of every entry into ``folder``; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = folder / file_name(name)
        path.write_text(schema_text(name), encoding="utf-8")
        written.append(path)
    return written


# --- what every schema gets ------------------------------------------------------------

# Keywords whose value maps names to schemas (the names are not keywords).
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")
# Constraints pydantic leaves under its own names when a validator runs first
# (``Annotated[float, BeforeValidator(...), Field(gt=0)]``): JSON Schema ignores those.
_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def _tidy(node: Any) -> Any:
    """Pydantic's schema made plain: its ``gt``/``le`` as JSON Schema keywords (the
    tighter bound kept), no generated titles (``"title": "Max Restarts"``), no
    ``format: path`` (not a JSON Schema format)."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _tidy(item) for name, item in value.items()}
        elif key in ("default", "const", "enum", "examples", "required"):
            out[key] = value
        elif key == "description" and isinstance(value, str):
            out[key] = value.replace("``", "`")
        elif key == "title" or (key == "format" and value == "path"):
            continue
        elif key in _BOUNDS and isinstance(value, int | float):
            continue  # below
        else:
            out[key] = _tidy(value)
    for key, keyword in _BOUNDS.items():
        value = node.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        tighter = min if keyword.endswith("aximum") else max
        out[keyword] = tighter(out[keyword], value) if keyword in out else value
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or ``null`` (a key written with nothing after it)."""
    return {"anyOf": [schema, {"type": "null"}]}


def _anchored(pattern: str) -> str:
    return f"^(?:{pattern})$"


def _caseless(word: str) -> str:
    """A regex matching ``word`` in any case (JSON Schema regexes have no ``(?i)``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else _escape(c) for c in word)


def _escape(char: str) -> str:
    return "\\" + char if char in ".^$*+?()[]{}|\\/-" else char


# --- eval.yaml -------------------------------------------------------------------------


# What an editor shows for a key (hover, completion): the starter eval.yaml's comments.
_EVAL_YAML_KEYS = {
    "": {
        "evaluation": "what to evaluate and how hard to push",
        "models": "models to evaluate the agent with (the agent is started once per model "
        'with MODEL, MODEL_PROVIDER, BASE_URL); "provider:model" or a mapping; none: '
        "once, with the agent's own settings",
        "judge": 'the LLM judge of qualitative scoring: "provider:model", a mapping, or a '
        "list of them",
        "gates": "what a run must meet to pass (exit 1 when one fails): 'FIGURE OP NUMBER' "
        "or a mapping (docs/ci.md)",
        "user": "the model that plays the simulated users of the tasks with a user: "
        '"provider:model", a mapping, or script: (bat\'s scripted model); none: no task '
        "may have a user",
        "compat": "switches for moving a bat-cli project over step by step",
        "prices": "per-million-token prices by 'provider:model' or model name, over "
        "bat.yaml's and genai-prices' (docs/eval.md#cost): for an unlisted or self-hosted "
        "model, or to override",
    },
    "PriceEntry": {
        "input": "price per million prompt tokens",
        "output": "price per million completion tokens",
        "cached_input": "price per million cached prompt tokens (default: input)",
        "currency": "three capital letters (default USD); one currency per run",
        "note": "shown beside the price, e.g. illustrative",
    },
    "CompatSection": {
        "unknown_keys": "warn: keys bat does not read (bat-cli ignored them) in eval.yaml "
        "and the dataset are left out with a warning naming each; refuse (default): errors",
    },
    "GateSpec": {
        "name": "the gate's name in tables (default: the gate as written)",
        "gate": "FIGURE OP NUMBER, e.g. 'pass_hat_3 >= 0.8', 'judge.accuracy >= 0.7', "
        "'latency.p90 < 5'",
        "must_pass": "every attempt of these tasks passes: ids, globs or tag:NAME",
        "baseline": "a run (id or folder) this one must not regress from",
        "max_drop": "with baseline: the largest pass-rate drop allowed (0.05 = 5 points)",
        "alpha": "with baseline: McNemar's p under this is a significant regression",
        "model": "one model's label, or all (every model pooled); default: each model",
        "tasks": "only these tasks: ids, globs or tag:NAME; default: every task",
    },
    "EvaluationSection": {
        "run_name": "added to the run folder's name",
        "dataset": "the tasks: a JSON list of tasks (bat eval.schema tasks.json)",
        "output_dir": "one folder per run is made in here",
        "agent_url": "where the agent answers; default: the port of config.yaml's endpoint, "
        "else PORT of ./.env, else 9900 (${VAR} and ${VAR:-default} are replaced)",
        "agent_startup_timeout_s": "seconds the agent may take until its card answers",
        "agent_shutdown_timeout_s": "SIGTERM, then SIGKILL after this many seconds",
        "k": "attempts per task (reliability: pass@k, pass^k)",
        "qualitative": "also score each episode with the LLM judge",
        "concurrency": "episodes running at the same time",
        "turn_timeout_s": "a turn without a final answer by then is a timeout",
        "max_infra_failures": "infrastructure failures a run may have and still be "
        "trusted (more: exit status 3)",
        "max_cost": "the run's budget, in its prices' currency: no new episode starts once "
        "the cost spent and in flight reach it (the run ends partial, exit 3; --max-cost "
        "wins)",
        "warm_latency": "leave the first wave of episodes after each agent start (its cold "
        "start) out of the latency figures and the ETA; false: count them",
        "extra_spans": "span files of the agents this one calls",
        "update_prices": "true (genai-prices' URL) or a URL: fetch a newer price table once "
        "before the run; false (default): the installed table",
        "agent": "how the agent is started, or that it is already running",
    },
    "AgentSpec": {
        "start": "false: evaluate the agent already running at agent_url",
        "command": "how to start the agent (run in root)",
        "root": "the agent's folder",
        "env": "extra environment for the agent",
        "spans_file": "with start: false, the span file the agent writes",
        "max_restarts": "if the agent dies, restart it up to this often per model",
        "image": "start the agent from this container image on the Docker engine "
        "(DOCKER_HOST), instead of command",
        "replicas": "with image: this many containers share the episodes (the first on "
        "agent_url's port)",
        "adapter": "a2a (an A2A server), command (any program) or a coding CLI's preset "
        "(claude-code, codex, ...): bat agents lists them",
        "options": "the adapter's options (bat agents info NAME)",
        "workspace": "a command-line agent's episodes each run in a copy of this",
    },
    "WorkspaceSpec": {
        "source": "the folder (or git repository URL) each episode gets a working copy of",
        "ref": "for a git repository: the commit, tag or branch to check out (HEAD)",
        "keep": "which workspaces are kept after the verdict: failed, always or never",
        "resources": "files or folders copied into every workspace before the agent starts",
    },
    "ResourceSpec": {
        "kind": "belt's file or dir (bat tells them apart itself)",
        "source": "the file or folder, relative to the current folder",
        "dest": "where in the workspace",
        "version": "recorded beside its sha256",
    },
    "ModelSpec": {
        "name": "its folder in a run and its label (default: provider_model)",
        "base_url": "an OpenAI-compatible server",
        "env": "extra environment for the agent with this model (no PORT: bat sets it)",
        "script": "a rule file of the scripted model: bat serves it on 127.0.0.1 and points "
        "the agent at it (offline, no key; provider openai or ollama)",
    },
    "JudgeSpec": {
        "provider": "ollama speaks Ollama's /api/chat; any other, OpenAI-compatible chat "
        "completions at base_url",
        "api_key_env": "the variable holding the key (shell or ./.env)",
        "env": "variables for the judge (its key), over the shell and .env",
        "prompts": "agent-specific instructions added to each dimension's rubric",
        "budget_chars": "characters of the episode shown to the judge "
        "(bat-cli: max_trajectory_chars)",
        "mode": "bat-cli's; outcome is accepted with a warning",
        "concurrency": "requests at once",
        "timeout_s": "per request: the whole answer must be in by then",
        "max_retries": "on 429, 5xx, connection errors, timeouts",
        "max_retry_after_s": "a longer Retry-After is cut to this",
        "script": "a rule file of the scripted model: bat serves it on 127.0.0.1 as the judge "
        "while the run is judged (offline, no key; provider openai or ollama)",
    },
    "UserModelSpec": {
        "provider": "ollama speaks Ollama's /api/chat; any other, OpenAI-compatible chat "
        "completions at base_url",
        "model": "the model's name at the provider",
        "base_url": "an OpenAI-compatible server (or Ollama's); default: the provider's",
        "api_key_env": "the variable holding the key (shell or ./.env)",
        "env": "variables for the user model (its key), over the shell and .env",
        "temperature": "sent with every request (0 to 2)",
        "seed": "sent with every request: a provider that honours it repeats itself",
        "concurrency": "requests at once",
        "timeout_s": "per request: the whole answer must be in by then",
        "max_retries": "on 429, 5xx, connection errors, timeouts",
        "max_retry_after_s": "a longer Retry-After is cut to this",
        "script": "a rule file of the scripted model, matched against the agent's last "
        "message: bat serves it on 127.0.0.1 as the user model (offline, no key; provider "
        "openai or ollama)",
    },
}


def _eval_yaml(schema: dict[str, Any]) -> dict[str, Any]:
    """What ``EvalConfig``'s validators accept besides its types (``config.py``)."""
    from bat.evaluation.inputs import config

    defs = schema["$defs"]
    evaluation = defs["EvaluationSection"]["properties"]
    agent = defs["AgentSpec"]["properties"]
    model = defs["ModelSpec"]["properties"]
    judge = defs["JudgeSpec"]["properties"]
    user = defs["UserModelSpec"]["properties"]
    prompts = defs["JudgePrompts"]["properties"]

    # "openai:gpt-4.1-mini" for {provider: openai, model: gpt-4.1-mini} (_split_model).
    defs["ProviderModel"] = {
        "type": "string",
        "pattern": r"^[^:]*[^\s:][^:]*:[\s\S]*\S",
        "description": "provider:model, such as openai:gpt-4.1-mini",
    }
    text_form = {"$ref": "#/$defs/ProviderModel"}
    model_entry = {"anyOf": [text_form, {"$ref": "#/$defs/ModelSpec"}]}
    judge_entry = {"anyOf": [text_form, {"$ref": "#/$defs/JudgeSpec"}]}

    # A block with every key commented out is null: its defaults (Block).
    schema["properties"]["evaluation"] = _nullable(schema["properties"]["evaluation"])
    evaluation["agent"] = _nullable(evaluation["agent"])
    judge["prompts"] = _nullable(judge["prompts"])
    schema["properties"]["models"] = {
        "anyOf": [{"type": "array", "items": model_entry}, {"type": "null"}],
        "description": 'models to evaluate the agent with: "provider:model" or a mapping',
    }
    schema["properties"]["judge"] = {
        "anyOf": [
            judge_entry["anyOf"][0],
            judge_entry["anyOf"][1],
            {"type": "array", "items": judge_entry, "minItems": 1},
            {"type": "null"},
        ],
        "description": 'the LLM judge: "provider:model", a mapping, or a list of them',
    }
    # One user model: "provider:model", a mapping, or an empty block (the defaults).
    schema["properties"]["user"] = {
        "anyOf": [text_form, {"$ref": "#/$defs/UserModelSpec"}, {"type": "null"}],
        "default": None,
    }
    evaluation["extra_spans"] = _nullable(evaluation["extra_spans"])
    gate_entry = {"anyOf": [{"type": "string", "pattern": r"[<>=]"}, {"$ref": "#/$defs/GateSpec"}]}
    schema["properties"]["gates"] = {
        "anyOf": [{"type": "array", "items": gate_entry}, {"type": "null"}]
    }

    # env maps: variable names; numbers, booleans and null become text (env_map).
    name = {"pattern": _anchored(config._ENV_NAME.pattern)}
    for owner in (agent, model, judge, user):
        owner["env"] = {
            "type": ["object", "null"],
            "propertyNames": dict(name),
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
        }
    model["env"]["propertyNames"] = {"allOf": [name, {"not": {"const": "PORT"}}]}

    # Paths are not empty; URLs are http(s) (or a ${VAR} replaced before they are read).
    path = {"type": "string", "pattern": r"\S"}
    for owner, key in (
        (evaluation, "dataset"),
        (evaluation, "output_dir"),
        (agent, "root"),
    ):
        owner[key] = {**owner[key], **path}
    agent["spans_file"] = {**_nullable(path), "default": None}
    evaluation["extra_spans"]["anyOf"][0]["items"] = path
    url = {"type": "string", "pattern": rf"^(?:{_caseless('http')}[sS]?://[^/?#]|[\s\S]*\$\{{)"}
    for owner, key in (
        (evaluation, "agent_url"),
        (model, "base_url"),
        (judge, "base_url"),
        (user, "base_url"),
    ):
        owner[key] = {**_nullable(url), "default": None}
    for owner in (judge, user):
        owner["api_key_env"] = {**_nullable({"type": "string", **name}), "default": None}
    model["name"] = {
        **_nullable({"type": "string", "pattern": _anchored(config._FOLDER_NAME.pattern)}),
        "default": None,
    }

    for definition, described in _EVAL_YAML_KEYS.items():
        properties = schema["properties"] if definition == "" else defs[definition]["properties"]
        for key, description in described.items():
            properties[key]["description"] = description

    # bat-cli 2026.10's names: max_trajectory_chars, the prompt names; one name each.
    judge["max_trajectory_chars"] = copy.deepcopy(judge["budget_chars"])
    defs["JudgeSpec"]["not"] = {"required": ["budget_chars", "max_trajectory_chars"]}
    pairs = config._PROMPT_NAMES
    for ours, theirs in pairs:
        prompts[theirs] = copy.deepcopy(prompts[ours])
    defs["JudgePrompts"]["allOf"] = [{"not": {"required": list(pair)}} for pair in pairs]
    return schema


# --- tasks.json ------------------------------------------------------------------------


# What an editor shows for a task's simulated user and the conversation's checks.
_USER_KEYS = {
    "instructions": "the persona the user model plays: what it knows, what it wants, what "
    "it must not say unless asked",
    "first_message": "the user's first message (after the fixed turns); default: the user "
    "model writes it",
    "max_turns": "user turns of the conversation in all, the fixed ones included: reaching "
    "it ends the conversation (max_turns)",
}
_CONVERSATION_KEYS = {
    "conversation_must_contain": "texts some reply of the agent holds (any turn, not only "
    "the last)",
    "conversation_must_not_contain": "texts no reply of the agent holds",
    "assertions": "statements about the conversation the judge decides pass or fail, each "
    "with its reason",
    "assertions_in_verdict": "the assertions decide the verdict too (each must pass)",
}


def _tasks_json(task: dict[str, Any]) -> dict[str, Any]:
    """A list of ``TaskSpec`` (or ``{"tasks": [...]}``), as ``load_dataset`` reads it."""
    from typing import get_args

    from bat.evaluation.inputs import dataset

    defs = task.pop("$defs")
    defs["TaskSpec"] = task
    expected = defs["TaskExpected"]["properties"]
    calls = defs["AgentCallExpectation"]

    # A turn is text, or {content|text|message: text, role: user} (_turn_text).
    defs["Turn"] = {
        "type": "object",
        "properties": {
            **{key: {"type": "string"} for key in dataset.TURN_TEXT_KEYS},
            "role": {"const": "user"},
        },
        "additionalProperties": False,
        "oneOf": [{"required": [key]} for key in dataset.TURN_TEXT_KEYS],
    }
    # belt's per-turn checks (TurnExpect): the workspace checks of `expected`, no_errors.
    defs["Turn"]["properties"]["expect"] = {"$ref": "#/$defs/TurnExpect"}
    defs["TurnExpect"] = {
        "type": "object",
        "description": (dataset.TurnExpect.__doc__ or "").split("\n\n")[0].replace("\n    ", " "),
        "properties": {
            key: copy.deepcopy(expected[key]) for key in dataset.TurnExpect.model_fields
        },
        "additionalProperties": False,
    }
    task["properties"]["turns"]["items"] = {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Turn"}]}
    # A task needs turns, or a simulated user to write them (TaskSpec._nobody_speaks).
    task["anyOf"] = [
        {"required": ["turns"], "properties": {"turns": {"minItems": 1}}},
        {"required": ["user"], "properties": {"user": {"$ref": "#/$defs/SimulatedUser"}}},
    ]
    described = defs["SimulatedUser"]["properties"]
    for key, text in _USER_KEYS.items():
        described[key]["description"] = text
    for key, text in _CONVERSATION_KEYS.items():
        expected[key]["description"] = text
    # assertions_in_verdict needs assertions to count (TaskExpected._assertions_to_count).
    defs["TaskExpected"]["if"] = {
        "properties": {"assertions_in_verdict": {"const": True}},
        "required": ["assertions_in_verdict"],
    }
    defs["TaskExpected"]["then"] = {
        "properties": {"assertions": {"minItems": 1}},
        "required": ["assertions"],
    }
    # Printable, no space at either end (the control characters are left to bat).
    task["properties"]["id"]["pattern"] = r"^\S(?:[^\x00-\x1f\x7f]*\S)?$"

    # Status words in any case, failed for error, ... (normalize_status); null: unchecked.
    words = [*get_args(outcome.Status), *outcome.STATUS_SYNONYMS]
    caseless = "|".join(_caseless(word) for word in words)
    expected["status"] = {
        "anyOf": [
            {"enum": words},
            {"type": "string", "pattern": rf"^\s*(?:{caseless})\s*$"},
            {"type": "null"},
        ],
        "default": "completed",
    }

    # bat-cli writes {agent, times}: `agent` is `name` (one of the two).
    calls["properties"]["agent"] = copy.deepcopy(calls["properties"]["name"])
    calls.pop("required", None)
    calls["oneOf"] = [{"required": ["name"]}, {"required": ["agent"]}]

    tasks = {"type": "array", "items": {"$ref": "#/$defs/TaskSpec"}, "minItems": 1}
    return {
        "anyOf": [
            tasks,
            {"type": "object", "properties": {"tasks": tasks}, "required": ["tasks"]},
        ],
        "$defs": defs,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bat.evaluation.inputs.schemas FOLDER``: write every schema into FOLDER."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bat.evaluation.inputs.schemas FOLDER", file=sys.stderr)
        return 2
    for path in write_schemas(Path(args[0])):
        print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
