"""The judges' HTTP client: bat's chat client asking for the judgement's JSON schema.

The protocols, retries, time limits and the key kept secret are
:mod:`bat.evaluation.run.chat_client`'s, shared with the simulated users' model.
"""

from __future__ import annotations

from typing import Any

from bat.evaluation.judging.rubrics import JUDGEMENT_SCHEMA
from bat.evaluation.run.chat_client import (
    OLLAMA_BASE_URL,
    OPENAI_BASE_URL,
    ChatClient,
    backoff_s,
    endpoint,
    retry_after_s,
    scrub,
)


class JudgeClient(ChatClient):
    """One judge's HTTP client, shared by the worker threads that judge episodes."""

    def __init__(self, spec: Any, key: str | None, **options: Any) -> None:
        super().__init__(spec, key, schema=JUDGEMENT_SCHEMA, **options)


__all__ = [
    "OLLAMA_BASE_URL",
    "OPENAI_BASE_URL",
    "JudgeClient",
    "backoff_s",
    "endpoint",
    "retry_after_s",
    "scrub",
]
