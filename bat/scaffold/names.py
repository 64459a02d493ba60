"""Names of generated things, derived one way everywhere.

An agent called ``Weather-Bot`` is the directory ``Weather-Bot``, the Python project
``weather-bot``, the identifier ``weather_bot`` and the class prefix ``WeatherBot``; a
client called ``planner`` is ``src/llm_clients/planner_client.py`` holding
``PlannerClient``. Deriving all of them here keeps ``init.agent``, ``add.client`` and the
templates in agreement.

Runs are named here too, when a user names one on the command line (``--run``,
``--resume``, ``eval.compare -a/-b``): :func:`check_run_reference` refuses what no run
folder can be called before the name reaches the file system, so the answer is one
clean "invalid run" instead of "File name too long" (exit 1) or a control character
echoed raw to the terminal.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from dataclasses import dataclass

from bat.errors import InputError

_AGENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_CLIENT_NAME = re.compile(r"[a-z][a-z0-9_]*")
_MAX_NAME = 64
_MAX_FOLDER_BYTES = 255  # the longest file name ext4, APFS and NTFS allow
# A project with one of these names could not depend on bat-adk (or would shadow it).
_RESERVED_AGENT_NAMES = {"bat", "bat-adk", "bat-cli", "src", "test", "tests"}


@dataclass(frozen=True)
class AgentName:
    """Every spelling of an agent's name that the templates need."""

    raw: str
    project: str
    identifier: str
    class_prefix: str
    title: str

    @classmethod
    def parse(cls, raw: str) -> AgentName:
        """Validate ``raw`` and derive its spellings, or raise :class:`InputError`."""
        if not raw or len(raw) > _MAX_NAME or not _AGENT_NAME.fullmatch(raw):
            raise InputError(
                f"invalid agent name {_shown(raw)}: use 1-{_MAX_NAME} letters, digits, '-' or '_', "
                "starting with a letter (e.g. weather-bot)"
            )
        if raw.endswith(("-", "_")):
            raise InputError(f"invalid agent name {_shown(raw)}: it must not end with '-' or '_'")
        project = re.sub(r"[-_]+", "-", raw).lower()
        if project in _RESERVED_AGENT_NAMES:
            raise InputError(f"invalid agent name {_shown(raw)}: '{project}' is reserved")
        words = project.split("-")
        return cls(
            raw=raw,
            project=project,
            identifier="_".join(words),
            class_prefix="".join(word.capitalize() for word in words),
            title=" ".join(word.capitalize() for word in words),
        )


@dataclass(frozen=True)
class ClientName:
    """A ChatModelClient scaffold's name, module and class."""

    name: str
    module: str
    class_name: str

    @classmethod
    def parse(cls, raw: str) -> ClientName:
        """Validate one client name (``-`` is read as ``_``), or raise :class:`InputError`."""
        name = raw.strip().replace("-", "_").lower()
        if name.endswith("_client") and name != "_client":
            name = name[: -len("_client")]
        if not name or len(name) > _MAX_NAME or not _CLIENT_NAME.fullmatch(name):
            raise InputError(
                f"invalid client name {_shown(raw)}: use lower-case letters, digits and '_', "
                "starting with a letter (e.g. planner)"
            )
        if keyword.iskeyword(name) or name.endswith("_"):
            raise InputError(f"invalid client name {_shown(raw)}")
        class_name = "".join(part.capitalize() for part in name.split("_") if part) + "Client"
        return cls(name=name, module=f"{name}_client", class_name=class_name)

    @classmethod
    def from_module(cls, module: str) -> ClientName | None:
        """The client a ``*_client.py`` module stem stands for, or None if it is not one."""
        if not module.endswith("_client"):
            return None
        try:
            return cls.parse(module[: -len("_client")])
        except InputError:
            return None


def check_run_reference(raw: str, source: str) -> str:
    """``raw`` if it can name a run (an id, a folder, or RUN:MODEL), else an InputError
    naming ``source`` (the flag or setting it came from).

    Only what no folder can be called is refused: control characters (and undecodable
    bytes), and a path part longer than a file name may be. Whether the run exists is
    for the caller to find out.
    """
    bad = next((c for c in raw if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        raise InputError(
            f"{source}: invalid run {_shown(raw)}: it holds the control character {bad!r}"
        )
    if any(len(part.encode("utf-8")) > _MAX_FOLDER_BYTES for part in raw.split("/")):
        raise InputError(
            f"{source}: invalid run {_shown(raw)}: a folder name is at most "
            f"{_MAX_FOLDER_BYTES} bytes"
        )
    return raw


def _shown(raw: str) -> str:
    """A name as an error message quotes it: escaped, and cut short (a name may be a
    pasted paragraph; the message must stay one readable line)."""
    text = repr(raw)
    return text if len(text) <= 80 else text[:79] + "…"


def parse_client_list(values: list[str] | tuple[str, ...] | str | None) -> list[ClientName]:
    """``["planner,executor", "critic"]`` -> three clients, in order, without repeats.

    The values may come from a configuration file (``init.agent.clients``), where YAML
    can make them anything: what is not text is an InputError, not a TypeError.
    """
    if values is None:  # "clients:" left empty in a file: the default, as if unset
        return []
    if isinstance(values, str) or not isinstance(values, list | tuple):
        values = [values]
    clients: list[ClientName] = []
    for value in values:
        if not isinstance(value, str):
            raise InputError(
                f"invalid client names {_shown(str(value))} (of type {type(value).__name__}): "
                "give names as text, separated by commas (init.agent.clients, --clients)"
            )
        for part in value.split(","):
            if not part.strip():
                continue
            client = ClientName.parse(part)
            if client not in clients:
                clients.append(client)
    given = ",".join(values)
    if not clients and given.strip():  # "," names nothing: not the same as leaving it out
        raise InputError(f"invalid client names {_shown(given)}: no name between the commas")
    return clients
