"""What a secret is, and how bat keeps secrets off disk and off the console.

Why one module: an evaluation handles API keys (the judge's, read from a variable),
passwords in URLs (``http://user:pass@host/v1``), keys in query strings
(``?api_key=...``) and the values of ``env`` maps given to the agent. Every file bat
writes about a run (run.json, episodes, the judge cache, metrics, the report) and every
line it prints must be free of them, while the requests themselves still use the real
values. So there are two tools, used wherever text leaves bat:

* :func:`display_url` strips the credentials out of a URL before it is written or
  printed (the user name and password, and the values of query parameters whose names
  look like keys);
* :class:`Scrubber` replaces every *known* secret value (a judge's key echoed by its
  server, say) with ``[redacted]`` in a text or in JSON-like data.

The secrets of the current command are also remembered here (:func:`remember`), so
that writers far from the configuration (``run.json``'s writer) scrub with
:func:`scrub_data` without every caller passing them along. Values shorter than
``MIN_SECRET_CHARS`` are never treated as secrets: replacing ``1`` or ``on`` everywhere
would corrupt the text around them, and a value that short protects nothing.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4
# Names of query parameters and variables whose values are credentials.
_SECRET_NAME = re.compile(
    r"key|token|secret|passw|pwd|auth|credential|signature|^sig$|session|cookie",
    re.IGNORECASE,
)


def secret_name(name: str) -> bool:
    """Whether a query parameter or variable called ``name`` holds a credential."""
    return _SECRET_NAME.search(name) is not None


def display_url(url: str | None) -> str | None:
    """``url`` as it may be written or printed: no user name or password, and the
    values of key-like query parameters replaced. The real URL is still the one used."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return REDACTED  # not a URL we can take apart: show none of it
    netloc = parts.netloc
    if "@" in netloc:
        host = f"[{host}]" if host and ":" in host else host or ""
        netloc = host + (f":{port}" if port is not None else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(name, REDACTED if secret_name(name) else value) for name, value in pairs],
            safe="[]",
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str | None) -> list[str]:
    """The secret values inside ``url``: its password (or a lone user name, which is a
    token in ``https://TOKEN@host``), the Basic credentials made of them, and key-like
    query values; each also as written (percent-encoded)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    found: list[str] = []
    if password is not None:
        found.append(password)
        if user is not None:  # what a client sends for it (requests does): Basic base64
            pair = f"{unquote(user)}:{unquote(password)}".encode()
            found.append(base64.b64encode(pair).decode("ascii"))
    elif user:
        found.append(user)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if secret_name(name):
            found.append(value)
    return _with_encodings(found)


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of an ``env`` map that are secret: the value of every variable whose
    name looks like a credential (``OPENAI_API_KEY``, ``HF_TOKEN``, ``DB_PASSWORD``...),
    and the credentials of a URL in any value. Other values are settings
    (``PYTHONPATH``, ``MODEL_PROVIDER=openai``): hiding them everywhere they occur would
    corrupt the text around them (a path, a model name, the word ``status``)."""
    found = []
    for name, value in env.items():
        value = str(value)
        if secret_name(name):
            found.append(value)
        found += url_secrets(value) if "://" in value else []
    return found


def _with_encodings(values: Iterable[str]) -> list[str]:
    """Each value, decoded and percent-encoded: a URL may carry either form."""
    out: list[str] = []
    for value in values:
        for form in (value, unquote(value), quote(unquote(value), safe="")):
            if form not in out:
                out.append(form)
    return out


class Scrubber:
    """Replaces known secret values with ``[redacted]``, in text and in JSON-like data;
    ``urls`` that hold credentials are first replaced by their :func:`display_url`, so a
    message naming one reads ``http://host/v1``, not ``http://user:[redacted]@host/v1``."""

    def __init__(self, secrets: Iterable[str | None] = (), urls: Iterable[str | None] = ()) -> None:
        unique = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}
        # Longest first: a secret that contains another is replaced whole.
        self.secrets = tuple(sorted(unique, key=len, reverse=True))
        shown = {url: display_url(url) or "" for url in urls if url and display_url(url) != url}
        self.urls = tuple(sorted(shown.items(), key=lambda item: len(item[0]), reverse=True))
        # each secret and URL as it reads inside a JSON string (for found_in_json)
        self._json_needles = tuple(
            json.dumps(needle, ensure_ascii=False)[1:-1]
            for needle in (*self.secrets, *(url for url, _ in self.urls))
        )

    def __bool__(self) -> bool:
        return bool(self.secrets or self.urls)

    def adding(self, secrets: Iterable[str | None] = (), urls: Iterable[str | None] = ()):
        """A scrubber of this one's secrets and URLs and of ``secrets`` and ``urls`` too."""
        return Scrubber([*self.secrets, *secrets], [*(url for url, _ in self.urls), *urls])

    def text(self, text: str) -> str:
        for url, shown in self.urls:
            if url in text:
                text = text.replace(url, shown)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def found_in_json(self, text: str) -> bool:
        """Whether JSON ``text`` may hold a secret or a URL with credentials. A string
        holding a secret holds it escaped the way JSON escapes it (character by
        character), so the check is one search per secret in the text: files that hold
        none (nearly all) are written as serialized, without walking their data."""
        return any(needle in text for needle in self._json_needles)

    def data(self, value: Any) -> Any:
        """``value`` with every string in it scrubbed (mapping keys too); the shape and
        every number, boolean and null are kept."""
        if not self:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value


def config_secrets(resolved: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value a resolved evaluation configuration holds or names: passwords
    and keys in its URLs, its ``env`` maps' values, and each judge's API key (read from
    ``env``, the shell over the agent's ``.env``, then the judge's own ``env``)."""
    config = resolved.config
    found = url_secrets(resolved.agent_url)
    found += env_secrets(config.evaluation.agent.env)
    for model in config.models:
        found += url_secrets(model.base_url) + env_secrets(model.env)
    for judge in config.judges:
        found += url_secrets(judge.base_url) + env_secrets(judge.env)
        if judge.api_key_env:
            key = {**(env or {}), **judge.env}.get(judge.api_key_env)
            found += [key, key.strip()] if key else []
    found += url_secrets(_prices_url(config))
    return found


def _prices_url(config: Any) -> str | None:
    """``evaluation.update_prices`` when it is a URL of the user's (it may hold a token)."""
    update = getattr(config.evaluation, "update_prices", False)
    return update if isinstance(update, str) else None


def config_urls(resolved: Any) -> list[str | None]:
    """Every URL of a resolved evaluation configuration (some may hold credentials)."""
    config = resolved.config
    return [
        resolved.agent_url,
        *(model.base_url for model in config.models),
        *(judge.base_url for judge in config.judges),
        _prices_url(config),
    ]
