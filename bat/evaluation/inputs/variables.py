"""``${VAR}`` in the values of files: eval.yaml's way (strict) and bat-adk's way (lenient).

eval.yaml says ``${VAR}`` or ``${VAR:-default}`` where a value comes from the shell or
the agent's ``.env``: an API key in ``models[].env``, a port in ``agent_url``. A variable
that is unset (and has no default) is an error naming it, because a run with the literal
text ``${OPENAI_API_KEY}`` as a key would fail much later, and less clearly.

bat-adk expands ``$VAR`` and ``${VAR}`` in its config.yaml with ``os.path.expandvars``
and leaves unset ones as they are; :func:`expand_like_bat_adk` does the same against a
given environment, so bat reads an agent's config.yaml as the agent itself will.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_BRACED = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")
_ADK = re.compile(r"\$(?:(?P<bare>[A-Za-z0-9_]+)|\{(?P<braced>[^}]*)\})")


class UnsetVariable(Exception):
    """``${name}`` names a variable that is not set and has no default."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with every ``${VAR}`` / ``${VAR:-default}`` replaced from ``env``.

    The default applies when the variable is unset or empty (as in a POSIX shell); an
    unset variable without a default raises :class:`UnsetVariable`. A ``$`` not followed
    by ``{NAME`` is left as it is.
    """

    def replace(match: re.Match[str]) -> str:
        value = env.get(match["name"])
        if match["default"] is not None and not value:
            return match["default"]
        if value is None:
            raise UnsetVariable(match["name"])
        return value

    return _BRACED.sub(replace, text)


def expand_like_bat_adk(text: str, env: Mapping[str, str]) -> str:
    """``os.path.expandvars`` semantics against ``env``: unset variables stay literal."""

    def replace(match: re.Match[str]) -> str:
        name = match["bare"] or match["braced"]
        return env.get(name, match[0])

    return _ADK.sub(replace, text)
