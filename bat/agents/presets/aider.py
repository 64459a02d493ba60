"""aider (PyPI ``aider-chat``), one ``aider --message`` per turn.

A turn runs::

    aider --message MESSAGE --yes-always --no-auto-commits --no-dirty-commits --no-gitignore
          --map-tokens 0 --no-pretty --no-fancy-input --no-check-update
          --no-show-release-notes --analytics-disable --no-show-model-warnings
          --chat-history-file HOME/.aider.chat.history.md
          --input-history-file HOME/.aider.input.history
          [--model openai/MODEL] [--restore-chat-history]

aider edits files through *edit blocks in its reply text*, not tool calls: there are no
events, so a turn's tool calls are none, what it did to the files is the workspace diff
bat reads anyway, and the reply is what it printed, less its own banner and token lines.
``--yes-always`` answers its questions (create this file? run this?) without a person;
it never commits (bat reads changes on its own index), never adds ``.aider*`` to
``.gitignore``, and keeps its histories in the private HOME, not the workspace, so the
diff holds only the agent's edits. A later turn restores the chat history of the
episode's HOME (``--restore-chat-history``): aider has no session ids.

The model: aider calls models through litellm; a ``base_url`` (bat's scripted model,
any OpenAI chat server) goes to ``OPENAI_API_BASE`` with ``--model openai/MODEL``; a
model without one is given as named. ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps litellm from
downloading its model list at start.

Errors are read from litellm's words on stdout and stderr (``AuthenticationError``,
``RateLimitError``, ``APIConnectionError``...). Not run for real by bat's tests (it is
not installed by .ci/coding_agents.sh): its command and its reading are unit-tested.
"""

from __future__ import annotations

import re
from typing import Any

from bat.agents.kinds import CliAgent, Invocation, Option, TurnInput, TurnOutput
from bat.agents.presets._reading import (
    MAX_TEXT,
    check_choice,
    check_common,
    common_options,
    kind_of,
    shown,
)
from bat.evaluation.log.episode import AgentError, Usage

EDIT_FORMATS = ("default", "whole", "diff", "udiff")
FLAGS = [
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--map-tokens",
    "0",
    "--no-pretty",
    "--no-fancy-input",
    "--no-check-update",
    "--no-show-release-notes",
    "--analytics-disable",
    "--no-show-model-warnings",
]
HISTORY = ".aider.chat.history.md"
# aider's own lines around the reply: its banner, its notes, its token report.
OWN_LINE = re.compile(
    r"^(Aider v\d|Model:|Main model:|Weak model:|Editor model:|Git repo:|Repo-map:|Use /help|"
    r"Added .* to the chat|Restored previous conversation history|Tokens: |Cost: |"
    r"Applied edit to |Creating empty file |Warning: |Newer aider version)"
)
TOKENS = re.compile(r"^Tokens: ([\d.]+)(k?) sent.*?, ([\d.]+)(k?) received", re.M)
LITELLM = re.compile(r"litellm\.(\w+Error)\b[:\s]*([^\n]*)")
LITELLM_KINDS = {
    "AuthenticationError": "authentication_failed",
    "PermissionDeniedError": "authentication_failed",
    "RateLimitError": "rate_limited",
    "APIConnectionError": "model_error",
    "ServiceUnavailableError": "model_error",
    "InternalServerError": "model_error",
    "BadRequestError": "model_error",
    "NotFoundError": "model_error",
    "Timeout": "model_error",
}


class Aider(CliAgent):
    name = "aider"
    summary = "aider, one --message per turn; edits read from the workspace, reply as text"
    executable = "aider"
    key_variables = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    output = "text"
    options = (
        common_options("aider")[0],
        Option("edit_format", "default", f"--edit-format: {', '.join(EDIT_FORMATS)}"),
        common_options("aider")[1],
    )
    variables = (
        ("OPENAI_API_BASE", "the model's address (the models: entry's base_url)"),
        ("OPENAI_API_KEY", "its key"),
        ("LITELLM_LOCAL_MODEL_COST_MAP", "litellm's model list from the package, not fetched"),
    )
    install = "pip install aider-chat (or: uv tool install aider-chat)"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_common(options)
        check_choice(options, "edit_format", EDIT_FORMATS)

    def invocation(self, turn: TurnInput) -> Invocation:
        options = {**self.defaults(), **turn.options}
        self.check_options(options)
        home = turn.home
        argv = [options["executable"], "--message", turn.message, *FLAGS]
        argv += ["--chat-history-file", str(home / HISTORY)]
        argv += ["--input-history-file", str(home / ".aider.input.history")]
        if options["edit_format"] != "default":
            argv += ["--edit-format", options["edit_format"]]
        model = turn.model
        env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        if model.model:
            named = model.model
            if model.base_url and not named.startswith("openai/"):
                named = f"openai/{named}"
            argv += ["--model", named]
        if model.base_url:
            env["OPENAI_API_BASE"] = model.base_url
        for key in self.key_variables:
            if model.env.get(key):
                env[key] = model.env[key]
        if turn.index > 0:
            argv += ["--restore-chat-history"]
        argv += options["extra_args"]
        return Invocation(argv=argv, env=env)

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        text = stdout[-4 * MAX_TEXT :]
        lines = [line for line in text.splitlines() if not OWN_LINE.match(line)]
        reply = "\n".join(lines).strip()[:MAX_TEXT]
        usage = None
        found = list(TOKENS.finditer(text))
        if found:
            sent = sum(_tokens(m.group(1), m.group(2)) for m in found)
            received = sum(_tokens(m.group(3), m.group(4)) for m in found)
            usage = Usage(
                prompt_tokens=sent,
                completion_tokens=received,
                total_tokens=sent + received,
                model_calls=len(found),
            )
        error = _error(text + "\n" + stderr[-4 * MAX_TEXT :])
        return TurnOutput(reply="" if error else reply, usage=usage, error=error)


def _tokens(number: str, thousands: str) -> int:
    try:
        value = float(number) * (1000 if thousands else 1)
    except ValueError:
        return 0
    return int(value) if 0 <= value < 1e12 else 0


def _error(text: str) -> AgentError | None:
    """The last litellm error aider printed, as bat's kind; None when there was none."""
    found = list(LITELLM.finditer(text))
    if not found:
        return None
    name, said = found[-1].group(1), found[-1].group(2)
    kind = LITELLM_KINDS.get(name) or kind_of(None, said)
    return AgentError(kind=kind, message=shown(f"{name}: {said}"))
