"""The judge cache: re-judging an unchanged run costs no HTTP call.

A judgement is reused only when everything that decided it is unchanged: the judge
(``provider:model``), the server (``base_url``), the rubric version and the exact prompt
(system and user messages, hashed). One small JSON file per judgement, named by the hash
of that key and written atomically, so a run interrupted while judging keeps every
judgement already paid for, and concurrent workers never see half a file.

The file keeps the judge's raw reply, not the parsed scores: a hit is parsed again, so
a parser fix applies to cached replies too. Only replies that parsed are stored, so a
failed judgement is tried again next time. No API key is ever part of a file, nor a
password of ``base_url``: the key of a file is a hash (so judges at URLs that differ only
in their credentials keep separate caches), the URL written for humans has no
credentials, and the files are readable by their owner only (a reply is the judge's
text about the agent's answers).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bat.atomic import json_text, write_private
from bat.errors import InputError
from bat.evaluation.log.bounds import reported_count
from bat.evaluation.log.files import read_regular

CACHE_SCHEMA = "bat.judge-cache/1"


def cache_key(label: str, base_url: str, rubric_version: str, prompt_sha256: str) -> str:
    """The hex digest naming one judgement's file (``base_url`` is hashed, never kept)."""
    material = json.dumps([label, base_url, rubric_version, prompt_sha256])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class JudgeCache:
    """Cached replies under ``folder`` (created at the first write)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._made = False

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> str | None:
        """The judge's cached reply, or None (absent or unreadable: judge again)."""
        found = self.entry(key)
        return None if found is None else found[0]

    def entry(self, key: str, episode: str = "") -> tuple[str, tuple[int, int]] | None:
        """The cached reply and the (prompt, completion) tokens it took when it was made
        for ``episode`` (0 in a file written before bat kept them, and 0 when it was made
        for another episode: reusing it cost nothing), or None."""
        try:  # a FIFO in the cache folder is never opened (read_regular)
            data = json.loads(read_regular(self.path(key)).decode("utf-8"))
        except (OSError, ValueError, InputError):
            return None
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        reply = data.get("reply")
        if not isinstance(reply, str):
            return None
        tokens = data.get("tokens")
        tokens = tokens if isinstance(tokens, dict) and data.get("episode") == episode else {}
        return reply, (
            reported_count(tokens.get("prompt_tokens")),
            reported_count(tokens.get("completion_tokens")),
        )

    def put(self, key: str, reply: str, tokens: tuple[int, int] = (0, 0), **meta: str) -> None:
        """Store a reply and the tokens it took; ``meta`` (judge, base_url,
        rubric_version, ...) is for humans, but its ``episode`` (the one the judgement was
        made for) decides whose cost the tokens are (:meth:`entry`)."""
        if not self._made:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._made = True
        taken = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
        record = {"schema": CACHE_SCHEMA, "key": key, **meta, "tokens": taken, "reply": reply}
        write_private(self.path(key), json_text(record, ensure_ascii=False, indent=1))
