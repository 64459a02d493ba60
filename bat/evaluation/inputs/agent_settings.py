"""What an agent's own files say about things an evaluation depends on.

An evaluation reads the agent's settings the way bat-adk does, so it reaches the agent
where the agent listens and knows what the agent will record:

* ``.env``: ``KEY=value`` lines (the agent's defaults; the shell wins over them);
* ``config.yaml``, or the file ``CONFIG_PATH`` names (relative to the agent's root, as
  for the agent itself; blueprint repositories keep one per agent in a sub-folder).
  Like bat-adk, ``$VAR`` and ``${VAR}`` in it are replaced from the environment the agent
  will get before it is parsed (unset ones stay literal). From it: ``endpoint`` (the
  port, ``endpoint.port`` or a port in ``endpoint.url``), ``telemetry`` (privacy level,
  outputs), ``checkpoints``;
* a ``telemetry_privacy_floor="..."`` passed to ``AgentApplication`` in the code, which
  can only raise the privacy level;
* whether the project runs on bat-adk (its ``pyproject.toml`` depends on ``bat-adk``):
  bat-adk writes spans to every ``local`` telemetry output, which is how the evaluation
  knows whether an agent's spans will come at all.

The user's files are never edited: to send the agent's spans into the run directory, the
agent is started with a copy of its config (``CONFIG_PATH``) whose ``local`` telemetry
output points there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bat.atomic import write_private
from bat.dotenv import dotenv_line
from bat.errors import InputError
from bat.evaluation.inputs.variables import expand_like_bat_adk
from bat.ports import port_number, port_problem, url_port_problem

DEFAULT_PORT = 9900  # bat-adk's A2A_APPLICATION_DEFAULT_PORT
PRIVACY_LEVELS = ["none", "content", "names", "full"]
_FLOOR = re.compile(r"telemetry_privacy_floor\s*=\s*['\"](\w+)['\"]")
_BAT_ADK = re.compile(r"""["']bat[-_]adk\b""", re.IGNORECASE)


@dataclass
class AgentSettings:
    """What the agent's own files say about things the evaluation depends on."""

    config_path: Path | None
    config: dict[str, Any] = field(default_factory=dict)  # as written (for the copy)
    privacy: str = "none"
    privacy_source: str = "default"
    checkpoints: bool = False
    endpoint_host: str | None = None
    endpoint_port: int | None = None
    endpoint_source: str | None = None  # where the port was read, for messages
    endpoint_problem: str | None = None  # a port written there that is not one
    telemetry_outputs: int = 0  # outputs the agent's own config has
    uses_bat_adk: bool = False
    missing_config: Path | None = None  # a CONFIG_PATH that names no file

    @classmethod
    def read(cls, root: Path, env: dict[str, str]) -> AgentSettings:
        """Read the config file (``CONFIG_PATH`` or ``config.yaml``) and the agent's code.

        ``env`` is the environment the agent will be started with (its ``.env``, the
        shell, ``evaluation.agent.env``).
        """
        from bat.input_files import parse_yaml

        named = env.get("CONFIG_PATH")
        path: Path | None = (root / named) if named else root / "config.yaml"
        raw: dict[str, Any] = {}
        expanded: dict[str, Any] = {}
        missing = None
        # exists(), not is_file(): a FIFO or a folder there is an error to name, not "none"
        if path is not None and path.exists():
            # The bounded reader: the agent's file is input too (no alias bomb, no device).
            text = _text(path)
            raw = _mapping(parse_yaml(text, path))
            expanded = _mapping(parse_yaml(expand_like_bat_adk(text, env), path))
        else:
            missing = path if named else None
            path = None
        telemetry = _mapping(expanded.get("telemetry"))
        level, source = _privacy_word(telemetry.get("privacy")), f"{path}: telemetry.privacy"
        floor = _privacy_floor(root)
        if floor is not None and PRIVACY_LEVELS.index(floor[0]) > PRIVACY_LEVELS.index(level):
            level, source = floor[0], f"{floor[1]}: telemetry_privacy_floor"
        host, port, endpoint_problem = _endpoint(_mapping(expanded.get("endpoint")))
        outputs = telemetry.get("output")
        return cls(
            config_path=path,
            config=raw,
            privacy=level,
            privacy_source=source,
            checkpoints=bool(expanded.get("checkpoints", False)),
            endpoint_host=host,
            endpoint_port=port,
            endpoint_source=f"{path}: endpoint" if port is not None else None,
            endpoint_problem=f"{path}: {endpoint_problem}" if endpoint_problem else None,
            telemetry_outputs=len(outputs) if isinstance(outputs, list) else 0,
            uses_bat_adk=_uses_bat_adk(root),
            missing_config=missing,
        )

    @property
    def writes_spans(self) -> bool:
        """Whether the agent, started with our config copy, will write spans at all.

        bat-adk writes them to the copy's ``local`` output; another agent that reads a
        config.yaml of its own and has telemetry outputs there presumably honours ours.
        An agent with neither never writes a span, and nobody should wait for one.
        """
        return self.config_path is not None and (self.uses_bat_adk or self.telemetry_outputs > 0)

    def problems_for(self, needs_tool_names: bool, needs_tool_args: bool) -> list[str]:
        """Settings that would make the dataset's tool checks meaningless."""
        problems = []
        if needs_tool_names and self.privacy == "full":
            problems.append(
                f"{self.privacy_source} is 'full', which redacts tool names, but the dataset "
                "checks tool calls; lower it (e.g. 'none') for the evaluation"
            )
        elif needs_tool_args and self.privacy in ("content", "names", "full"):
            problems.append(
                f"{self.privacy_source} is {self.privacy!r}, which redacts tool arguments, but "
                "the dataset checks args_subset; lower it to 'none' for the evaluation"
            )
        return problems

    def config_copy(self, spans_file: Path) -> str | None:
        """The agent's config file with its local span output sent to ``spans_file``.

        The copy keeps ``${VAR}`` references as written: the agent expands them itself,
        and no value from the environment (an API key) is written into the run folder.
        """
        if self.config_path is None:
            return None
        import yaml

        config = json.loads(json.dumps(self.config))  # a deep copy of plain data
        telemetry = _mapping(config.get("telemetry"))
        outputs = [
            o
            for o in telemetry.get("output") or []
            if isinstance(o, dict) and o.get("type") != "local"
        ]
        outputs.append({"type": "local", "file_path": str(spans_file)})
        telemetry["output"] = outputs
        config["telemetry"] = telemetry
        return (
            "# A copy made by bat eval for one run; the agent's own config.yaml is untouched.\n"
            + yaml.safe_dump(config, sort_keys=False)
        )


def agent_address(
    settings: AgentSettings | None,
    dotenv: dict[str, str],
    agent_env: dict[str, str] | None = None,
    *,
    names: tuple[str, str] = ("evaluation.agent.env", ".env"),
) -> tuple[str, int, str]:
    """``(host, port, where the port came from)`` of a started agent, read as bat-adk does.

    The port: config.yaml's ``endpoint`` (``port``, or a port in ``url``), then ``PORT``
    of ``evaluation.agent.env`` (set for this agent on purpose), then ``PORT`` of ``.env``,
    then 9900. The host: the endpoint's when it is an IPv4 loopback address, else
    127.0.0.1. bat-adk binds every interface, and an agent bat starts runs on this machine
    whatever name (``localhost``, a public one) its card advertises; ``localhost`` may
    resolve to ``::1`` first, where such an agent does not listen. ``names`` say where
    ``agent_env`` and ``dotenv`` come from, in the returned source and in errors.

    Every ``PORT`` written there must be a port, even one that another source overrides:
    the agent started by hand reads it. An empty one counts as unset.
    """
    port, source = None, "the default port"
    if settings is not None and settings.endpoint_port is not None:
        port, source = settings.endpoint_port, settings.endpoint_source
    for values, name in zip((agent_env or {}, dotenv), names, strict=True):
        value = values.get("PORT", "").strip()
        if not value:
            continue
        problem = port_problem(value)
        if problem:
            line = dotenv_line(Path(name), "PORT")
            where = f" (line {line})" if line else ""
            raise InputError(f"{name}: PORT{where}: {problem}")
        if port is None:
            port, source = int(value), f"{name}: PORT"
    host = settings.endpoint_host if settings else None
    if not (host and re.fullmatch(r"127(\.\d{1,3}){3}", host)):
        host = "127.0.0.1"
    return host, port or DEFAULT_PORT, source


def _endpoint(endpoint: dict[str, Any]) -> tuple[str | None, int | None, str | None]:
    """Host and port of bat-adk's ``endpoint`` block, and what is wrong with the port when
    one is written but is not a port (a ``${VAR}`` left unset, a word): it counts as unset.
    """
    host = port = problem = None
    url = endpoint.get("url")
    if isinstance(url, str) and url.strip():
        whole = url if "://" in url else f"http://{url}"
        try:
            host = urlsplit(whole).hostname
            # "${PORT}" left literal, a word, 0 (any free port: none bat could wait on)
            wrong = url_port_problem(whole)
        except ValueError:  # a broken [IPv6]
            wrong = "not a URL"
        if wrong:
            problem = f"endpoint.url {url!r}: {wrong}"
        else:
            port = urlsplit(whole).port
    value = endpoint.get("port")
    if isinstance(value, str) and value.strip() == "${PORT}":
        value = None  # PORT unset here: bat sets it when it starts the agent (the scaffold's way)
    if value is not None:
        try:
            port = port_number(value)
        except ValueError as exc:
            problem = f"endpoint.port: {exc}"
    return host, port, problem if port is None else None


def _text(path: Path) -> str:
    """A UTF-8 text file of at most 1 MiB; anything else is an InputError naming it."""
    from bat.input_files import CONFIG_LIMIT, read_text

    return read_text(path, limit=CONFIG_LIMIT, kind="an agent file")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _uses_bat_adk(root: Path) -> bool:
    """Whether the project's ``pyproject.toml`` (or requirements) names bat-adk."""
    from bat.input_files import CONFIG_LIMIT, read_bytes

    for name in ("pyproject.toml", "requirements.txt"):
        try:  # bounded: a FIFO here hung bat doctor and eval.run
            text = read_bytes(root / name, limit=CONFIG_LIMIT).decode("utf-8", "replace")
        except (OSError, InputError):
            continue
        if _BAT_ADK.search(text) or (name == "requirements.txt" and "bat-adk" in text):
            return True
    return False


def _privacy_word(value: Any) -> str:
    if isinstance(value, int) and 0 <= value < len(PRIVACY_LEVELS):
        return PRIVACY_LEVELS[value]
    if isinstance(value, str) and value.strip().lower() in PRIVACY_LEVELS:
        return value.strip().lower()
    return "none"


def _privacy_floor(root: Path) -> tuple[str, Path] | None:
    """A ``telemetry_privacy_floor="..."`` passed to AgentApplication in the agent's code."""
    candidates = (
        [root / "__main__.py", *sorted((root / "src").glob("**/*.py"))] if root.is_dir() else []
    )
    for path in candidates[:200]:
        try:
            match = _FLOOR.search(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if match and match.group(1).lower() in PRIVACY_LEVELS:
            return match.group(1).lower(), path
    return None


def write_config_copy(settings: AgentSettings, target: Path, spans_file: Path) -> Path | None:
    """Write the redirected config copy; None when the agent has no config file.

    The copy is private to its owner (0600) whatever the source's mode: an agent's config
    may hold keys, and the run folder is often shared or archived."""
    text = settings.config_copy(spans_file)
    if text is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    write_private(target, text)
    return target
