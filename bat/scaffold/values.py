"""Checks for the values a user writes into an agent (port, model, provider, image names).

``init.agent`` and ``set.env`` share them, so a value refused by one is refused by the
other with the same words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bat.errors import InputError
from bat.ports import port_number, url_port_problem
from bat.provider_keys import key_variable


@dataclass(frozen=True)
class Provider:
    """A model provider BAT-ADK supports: its default model; its API-key variable comes
    from bat's one table (:mod:`bat.provider_keys`)."""

    name: str
    default_model: str

    @property
    def api_key_env(self) -> str | None:
        return key_variable(self.name)


PROVIDERS: dict[str, Provider] = {
    provider.name: provider
    for provider in (
        Provider("openai", "gpt-4.1-mini"),
        Provider("anthropic", "claude-sonnet-4-5"),
        Provider("deepseek", "deepseek-chat"),
        Provider("nvidia", "meta/llama-3.3-70b-instruct"),
        Provider("ollama", "llama3.2"),
    )
}

_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")
_REGISTRY = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9._-]+)*")
_REPO_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO = re.compile(rf"{_REPO_PART}(?:/{_REPO_PART})*")


def port(value: object) -> int:
    """A TCP port 1-65535, by bat's one rule (:mod:`bat.ports`): the string a flag or
    variable gives, or a number; never a boolean from YAML (``port: yes``)."""
    try:
        return port_number(value)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def provider(value: str) -> Provider:
    """One of the providers BAT-ADK knows."""
    name = str(value).strip().lower()
    if name not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise InputError(f"unknown model provider {value!r}: use one of {known}")
    return PROVIDERS[name]


def model(value: str) -> str:
    """A model name: one word of the characters model names use.

    ``gpt-4.1-mini``, ``meta/llama-3.3-70b-instruct``, ``qwen2.5:7b`` and
    ``claude-3@20240229`` pass; ``=``, quotes, ``$``, ``#``, spaces and control characters
    do not, as each would change how ``.env`` or ``config.yaml`` reads the value back.
    """
    text = str(value).strip()
    if not _MODEL.fullmatch(text):
        raise InputError(
            f"invalid model name {value!r}: give one word of letters, digits and . _ - : / @ + "
            "such as gpt-4.1-mini"
        )
    return text


def docker_registry(value: str) -> str:
    """A registry host (``localhost:5000``, ``ghcr.io/team``) without a scheme."""
    text = str(value).strip().rstrip("/")
    if "://" in text:
        raise InputError(f"invalid Docker registry {value!r}: leave out the scheme (no http://)")
    if not _REGISTRY.fullmatch(text):
        raise InputError(f"invalid Docker registry {value!r}: expected host[:port][/path]")
    problem = url_port_problem(f"//{text}")
    if problem:
        raise InputError(f"invalid Docker registry {value!r}: {problem}")
    return text


def docker_repo(value: str) -> str:
    """An image repository name: lower-case path components (``team/agent``)."""
    text = str(value).strip()
    if not _REPO.fullmatch(text):
        raise InputError(
            f"invalid Docker repository {value!r}: use lower-case letters, digits and . _ -, "
            "with / between parts"
        )
    return text
