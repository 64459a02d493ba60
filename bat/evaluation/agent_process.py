"""Starting and stopping the agent under test, and reading the settings the eval relies on.

The agent runs in its own process group with its output in the run directory. It is
ready when its agent card answers over HTTP (an open port is not enough: the server may
still be loading). It is always stopped, on success, error or Ctrl-C: SIGTERM to the
group, SIGKILL after the shutdown timeout.

The user's files are never edited: to send the agent's spans into the run directory,
it is started with a copy of its ``config.yaml`` (``CONFIG_PATH``) whose ``local``
telemetry output points there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.atomic import write_text_atomic
from bat.errors import InputError, OperationError
from bat.uv_binary import find_uv

CARD_PATH = "/.well-known/agent-card.json"
PRIVACY_LEVELS = ["none", "content", "names", "full"]
_FLOOR = re.compile(r"telemetry_privacy_floor\s*=\s*['\"](\w+)['\"]")


@dataclass
class AgentSettings:
    """What the agent's own files say about things the evaluation depends on."""

    config_path: Path | None
    config: dict[str, Any] = field(default_factory=dict)
    privacy: str = "none"
    privacy_source: str = "default"
    checkpoints: bool = False

    @classmethod
    def read(cls, root: Path, env: dict[str, str]) -> AgentSettings:
        """Read config.yaml (or CONFIG_PATH) and any ``telemetry_privacy_floor`` in the code."""
        import yaml

        named = env.get("CONFIG_PATH")
        path = (root / named) if named else root / "config.yaml"
        config: dict[str, Any] = {}
        if path.is_file():
            try:
                loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
            except yaml.YAMLError as exc:
                raise InputError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
            config = loaded if isinstance(loaded, dict) else {}
        else:
            path = None
        telemetry = config.get("telemetry") or {}
        level, source = _privacy_word(telemetry.get("privacy")), f"{path}: telemetry.privacy"
        floor = _privacy_floor(root)
        if floor is not None and PRIVACY_LEVELS.index(floor[0]) > PRIVACY_LEVELS.index(level):
            level, source = floor[0], f"{floor[1]}: telemetry_privacy_floor"
        return cls(
            config_path=path,
            config=config,
            privacy=level,
            privacy_source=source,
            checkpoints=bool(config.get("checkpoints", False)),
        )

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
        """The agent's config.yaml with its local span output sent to ``spans_file``."""
        if self.config_path is None:
            return None
        import yaml

        config = json.loads(json.dumps(self.config))  # a deep copy of plain data
        telemetry = config.get("telemetry") or {}
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


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=value`` pairs of a .env file (quotes and ``export`` handled; comments skipped)."""
    values: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return values
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if value[:1] in ("'", '"') and value.count(value[0]) >= 2:
            value = value[1 : value.index(value[0], 1)]
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0].strip()
        values[key.strip()] = value
    return values


def card_answers(url: str, timeout_s: float = 2) -> bool:
    """Whether an agent card is served at ``url`` (HTTP 200 with a JSON object)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url + CARD_PATH, timeout=timeout_s) as response:
            return response.status == 200 and isinstance(json.loads(response.read()), dict)
    except (OSError, ValueError, urllib.error.URLError):
        return False


class AgentProcess:
    """One started agent: ``start``, ``wait_ready``, ``alive``, ``stop``."""

    def __init__(
        self,
        command: str,
        *,
        root: Path,
        env: dict[str, str],
        log: Path,
        url: str,
        startup_timeout_s: float,
        shutdown_timeout_s: float,
    ) -> None:
        self.command = command
        self.root = root
        self.env = env
        self.log = log
        self.url = url
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if card_answers(self.url, timeout_s=1):
            raise OperationError(
                f"something already answers at {self.url}: stop it, or set "
                "evaluation.agent.start: false to evaluate the running agent"
            )
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise InputError(f"evaluation.agent.command cannot be parsed: {exc}") from None
        if not argv:
            raise InputError("evaluation.agent.command is empty")
        # `{python}` is the interpreter running bat: fixture agents and agents installed
        # next to bat start without knowing where that environment lives.
        argv = [sys.executable if word == "{python}" else word for word in argv]
        if argv[0] == "uv":  # the uv installed with bat, even when it is not on PATH
            argv[0] = find_uv() or "uv"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            try:
                self.proc = subprocess.Popen(
                    argv,
                    cwd=self.root,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise OperationError(
                    f"cannot start the agent: {argv[0]!r} not found (evaluation.agent.command)"
                ) from None
            except NotADirectoryError:
                raise InputError(f"agent root {self.root} is not a directory") from None

    def wait_ready(self) -> float:
        """Block until the agent card answers; return the seconds it took. Fails early on exit."""
        started = time.monotonic()
        deadline = started + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise OperationError(
                    f"the agent exited with status {self.proc.returncode} before it was ready; "
                    f"end of {self.log}:",
                    details=tail(self.log),
                )
            if card_answers(self.url, timeout_s=1):
                return time.monotonic() - started
            time.sleep(0.05)
        raise OperationError(
            f"the agent did not answer at {self.url}{CARD_PATH} within "
            f"{self.startup_timeout_s:g} s (evaluation.agent_startup_timeout_s); "
            f"end of {self.log}:",
            details=tail(self.log),
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left after the shutdown timeout."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            self.proc.wait()
            return
        deadline = time.monotonic() + self.shutdown_timeout_s
        while time.monotonic() < deadline:
            self.proc.poll()
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def tail(log: Path, lines: int = 15) -> list[str]:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ["(no log)"]
    return text.splitlines()[-lines:] or ["(the log is empty)"]


def write_config_copy(settings: AgentSettings, target: Path, spans_file: Path) -> Path | None:
    """Write the redirected config copy; None when the agent has no config.yaml."""
    text = settings.config_copy(spans_file)
    if text is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, text)
    return target
