"""Talking to a chat model over HTTP (a judge, a simulated user's model): two wire
protocols, retries, and the API key kept secret.

The judges (:mod:`bat.evaluation.judging.client`: the judgement's JSON schema asked for)
and the simulated users (:mod:`bat.evaluation.run.simulated_user`) share it; it sits in
the run's layer because a simulated user talks during the episodes.

Why plain HTTP and not a provider SDK: the two protocols are one POST each, and every
server people run judges on (OpenAI, vLLM, llama.cpp, LM Studio, Ollama) speaks one of
them. The HTTP is httpx's, as for bat's A2A client: one stack, one set of exceptions. A
judge's worker threads share one ``httpx.Client`` (thread-safe; at most
``judge.concurrency`` connections, kept alive between requests). httpx is imported when
the first request is made, so importing the package costs nothing until then.

* OpenAI-compatible chat completions, ``{base_url}/chat/completions``, for every provider
  except a native Ollama (``provider: ollama`` with a ``base_url`` not ending in ``/v1``),
  which gets ``{base_url}/api/chat``.
* Temperature 0, and structured output (a JSON schema) where the protocol has it. A
  server that refuses the schema with a 400 is asked again without it, once, and never
  with it again: the parser does not depend on it.
* Every answer must be in, whole, within ``judge.timeout_s`` of its request (a server
  sending a byte now and then cannot hold a worker for ever); redirects are followed.
* Retries on 429, 5xx, connection errors and timeouts, up to ``max_retries`` times:
  ``Retry-After`` (seconds or an HTTP date) when the server gives one, at most
  ``judge.max_retry_after_s`` (a longer request is capped, and the console and the
  episode's judge error say so), else exponential backoff with jitter (so concurrent
  workers do not retry in lockstep). A wait ends at once when the client is cancelled
  (Ctrl-C: :meth:`JudgeClient.cancel`). The sleep is injectable, so tests of the retry
  schedule take no time.
* The API key is sent in the ``Authorization`` header and nowhere else. Every error
  message built here, and every reply, is scrubbed of it and of the other secrets bat
  knows (a password in ``base_url``, ``bat.secrets``): a server that echoes
  the header it got cannot get the key written. Messages name the URL without its
  credentials; requests still go to the real one.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from bat import secrets

if TYPE_CHECKING:
    from bat.evaluation.inputs.config import JudgeSpec, UserModelSpec

OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434"
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
RETRY_AFTER_MAX_S = 300.0  # a server asking for longer gets this; the run must end someday
REDACTED = secrets.REDACTED
MAX_ANSWER_BYTES = 16 * 2**20  # a server streaming without end must not fill the memory


def endpoint(spec: JudgeSpec) -> tuple[str, str, str]:
    """``(protocol, base_url, url)``: protocol ``ollama`` (native) or ``openai``."""
    native = spec.provider.strip().lower() == "ollama"
    default = OLLAMA_BASE_URL if native else OPENAI_BASE_URL
    base = (spec.base_url or default).rstrip("/")
    if native and not base.endswith("/v1"):
        return "ollama", base, f"{base}/api/chat"
    return "openai", base, f"{base}/chat/completions"


def scrub(text: str, values: tuple[str, ...] | list[str]) -> str:
    """``text`` with every secret of ``values`` replaced by ``[redacted]``."""
    return secrets.Scrubber(values).text(text)


def retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


def backoff_s(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Exponential backoff with jitter: half the step fixed, half random."""
    step = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt)
    return step / 2 + step / 2 * rand()


class ChatError(Exception):
    """A chat answer that could not be had; the message is a short reason, fit for an
    episode file (the judges call it ``ChatError``)."""


def excerpt(text: str, limit: int = 120) -> str:
    """A short, one-line excerpt of a reply for an error message."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def chat_body(
    protocol: str,
    model: str,
    messages: list[dict[str, str]],
    *,
    schema: dict[str, Any] | None = None,
    temperature: float = 0,
    seed: int | None = None,
) -> dict[str, Any]:
    """The JSON body of one chat request in ``protocol``: with ``schema``, the answer's
    JSON schema asked for (a judgement), else free text (a simulated user's message)."""
    if protocol == "ollama":
        options: dict[str, Any] = {"temperature": temperature}
        if seed is not None:
            options["seed"] = seed
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": False,
            "options": options,
        }
        if schema is not None:
            body["format"] = schema
        return body
    body = {"model": model, "messages": messages, "temperature": temperature, "stream": False}
    if seed is not None:
        body["seed"] = seed
    if schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "bat_judgement", "strict": True, "schema": schema},
        }
    return body


@dataclass(frozen=True)
class Reply:
    """A chat answer's text and the tokens the server says it took (0 when it says none)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatClient:
    """One model's HTTP client, shared by the worker threads that ask it: a judge's
    (``schema``: the judgement's JSON schema, asked for until the server refuses it),
    or a simulated user's model. ``who`` names it in every message."""

    def __init__(
        self,
        spec: JudgeSpec | UserModelSpec,
        key: str | None,
        *,
        sleep: Callable[[float], Any] | None = None,
        rand: Callable[[], float] = random.random,
        notice: Callable[[str], None] | None = None,
        who: str = "judge",
        schema: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.who = who
        self._schema = schema
        self.protocol, self.base_url, self.url = endpoint(spec)
        self._key = key
        # Shown in messages instead of the URLs requests go to (which may hold a password).
        self.shown_url = secrets.display_url(self.url) or ""
        self.shown_base_url = secrets.display_url(self.base_url) or ""
        self._secrets = secrets.Scrubber(
            [key, *secrets.url_secrets(spec.base_url), *secrets.env_secrets(spec.env)]
        )
        self._cancelled = threading.Event()
        self._sleep = sleep or self._wait
        self._notice = notice
        self._capped = 0  # Retry-After waits cut to judge.max_retry_after_s
        self._rand = rand
        self._structured = schema is not None  # until the server refuses the schema
        self._lock = threading.Lock()
        self._requests = 0
        self._http: Any = None  # the httpx.Client (see _client)

    @property
    def requests_made(self) -> int:
        """HTTP requests sent so far, retries included."""
        return self._requests

    def scrub(self, text: str) -> str:
        """``text`` fit to be written or printed: the URLs without credentials, and no
        secret value this judge has or bat knows of."""
        text = text.replace(self.url, self.shown_url).replace(self.base_url, self.shown_base_url)
        return self._secrets.text(text)  # and the writer of the scores: the rest

    def chat(self, system: str, user: str) -> str:
        """The judge's reply text, scrubbed (it is cached and quoted in episodes); a
        ChatError (scrubbed) when it cannot be had."""
        return self.ask(system, user).text

    def ask(self, system: str, user: str) -> Reply:
        """:meth:`chat`'s reply with the tokens it took (what the judgement cost)."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            reply = self._chat(messages, structured=self._structured)
        except ChatError as exc:
            raise ChatError(self.scrub(str(exc))) from None
        return Reply(self.scrub(reply.text), reply.prompt_tokens, reply.completion_tokens)

    def converse(
        self, messages: list[dict[str, str]], *, temperature: float, seed: int | None
    ) -> Reply:
        """The model's next message to ``messages`` (no schema asked for), scrubbed, with
        its tokens; a ChatError (scrubbed) when it cannot be had."""
        try:
            reply = self._chat(messages, structured=False, temperature=temperature, seed=seed)
        except ChatError as exc:
            raise ChatError(self.scrub(str(exc))) from None
        return Reply(self.scrub(reply.text), reply.prompt_tokens, reply.completion_tokens)

    @property
    def _stopped(self) -> str:
        return "judging was stopped" if self.who == "judge" else f"{self.who} requests were stopped"

    def cancel(self) -> None:
        """End every retry wait now, and make none again (Ctrl-C: threads must not linger)."""
        self._cancelled.set()

    def _wait(self, seconds: float) -> None:
        if self._cancelled.wait(seconds):
            raise ChatError(self._stopped)

    def _retry_wait(self, asked: float | None, attempt: int) -> tuple[float, str]:
        """How long to wait before the next try, and a note when ``Retry-After`` was capped."""
        if asked is None:
            return backoff_s(attempt, self._rand), ""
        cap = self.spec.max_retry_after_s
        if asked <= cap:
            return asked, ""
        note = (
            f"the server asked to wait {asked:g} s (Retry-After); waited {cap:g} s "
            f"({self.who}.max_retry_after_s)"
        )
        with self._lock:
            self._capped += 1
            first = self._capped == 1
        if first and self._notice is not None:
            self._notice(f"{self.who} {self.spec.label}: {note}")
        return cap, note

    def close(self) -> None:
        with self._lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def _client(self) -> Any:
        """The httpx.Client the worker threads share, made at the first request."""
        with self._lock:
            if self._http is None:
                import httpx

                size = self.spec.concurrency
                self._http = httpx.Client(
                    timeout=httpx.Timeout(self.spec.timeout_s),
                    limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                    follow_redirects=True,
                )
            return self._http

    def _chat(
        self,
        messages: list[dict[str, str]],
        *,
        structured: bool,
        temperature: float = 0,
        seed: int | None = None,
    ) -> Reply:
        """One chat, retried as the module says; ``structured`` asks for the judgement's
        schema until the server refuses it."""
        import httpx

        http = self._client()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        timeout = self.spec.timeout_s
        attempt = 0
        capped = ""
        while True:
            if self._cancelled.is_set():
                raise ChatError(self._stopped)
            structured = structured and self._structured
            body = chat_body(
                self.protocol,
                self.spec.model,
                messages,
                schema=self._schema if structured else None,
                temperature=temperature,
                seed=seed,
            )
            with self._lock:
                self._requests += 1
            wait: float | None = None
            try:
                answer = self._post(http, body, headers)
            except (httpx.TimeoutException, _Overdue):
                failure = f"no answer within {timeout:g} s"
            except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
                failure = f"connection failed: {_short(self.scrub(_said(exc)))}"
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise ChatError(f"request failed: {_short(self.scrub(_said(exc)))}") from None
            else:
                code = answer.status
                if code == 200:
                    return self._content(answer)
                if code == 400 and structured:
                    self._structured = False  # the server may not know the schema option
                    continue
                detail = _short(self.scrub(answer.text), 200)
                if code != 429 and code < 500:
                    raise ChatError(f"HTTP {code} from {self.url}: {detail}")
                failure = f"HTTP {code}: {detail}" if detail else f"HTTP {code}"
                wait = retry_after_s(answer.retry_after)
            if attempt >= self.spec.max_retries:
                tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
                raise ChatError(f"{failure} (gave up after {tries}{capped})")
            seconds, note = self._retry_wait(wait, attempt)
            capped = f"; {note}" if note else capped
            self._sleep(seconds)
            attempt += 1

    def _post(self, http: Any, body: dict[str, Any], headers: dict[str, str]) -> _Answer:
        """POST ``body``; the whole answer must be in within ``judge.timeout_s``.

        httpx's timeouts bound each read, not the answer: a server sending a byte every
        few seconds would hold a worker, and so the run, for ever. The body is read as
        it comes, and the clock checked between reads; a connection left mid-answer is
        closed, not reused.
        """
        timeout = self.spec.timeout_s
        deadline = time.monotonic() + timeout
        with http.stream("POST", self.url, json=body, headers=headers) as response:
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if time.monotonic() > deadline:
                    raise _Overdue(f"the answer took over {timeout:g} s")
                if len(data) > MAX_ANSWER_BYTES:
                    raise ChatError(
                        f"the {self.who} server's answer is over {MAX_ANSWER_BYTES:,} "
                        "bytes (a chat answer is far smaller)"
                    )
            return _Answer(
                response.status_code,
                response.headers.get("Retry-After"),
                bytes(data),
                response.encoding or "utf-8",
            )

    def _content(self, answer: _Answer) -> Reply:
        """The assistant's text out of a 200 answer of either protocol, with its tokens."""
        try:
            data = json.loads(answer.text)
        except (ValueError, RecursionError):  # not JSON, or nested past what Python reads
            raise ChatError(
                f"the {self.who} server's answer is not JSON: {excerpt(self.scrub(answer.text))}"
            ) from None
        try:
            if self.protocol == "ollama":
                content = data["message"]["content"]
            else:
                message = data["choices"][0]["message"]
                content = message.get("content")
                if content is None and message.get("refusal"):
                    raise ChatError(f"the {self.who} refused: {_short(str(message['refusal']))}")
        except (KeyError, IndexError, TypeError, AttributeError):  # a field of another shape
            error = data.get("error") if isinstance(data, dict) else None
            if error:
                raise ChatError(
                    f"the {self.who} server answered an error: {_short(str(error))}"
                ) from None
            raise ChatError(
                f"unexpected answer from the {self.who} server: {excerpt(str(data))}"
            ) from None
        if not isinstance(content, str):
            raise ChatError(f"the {self.who}'s answer holds no text")
        return Reply(content, *_tokens(data, self.protocol))


@dataclass(frozen=True)
class _Answer:
    """A judge server's answer, read whole: status, ``Retry-After`` and body (its text in
    the charset the server names, else UTF-8; a byte that is not one is replaced)."""

    status: int
    retry_after: str | None
    body: bytes
    encoding: str

    @property
    def text(self) -> str:
        return self.body.decode(self.encoding, errors="replace")


def _tokens(data: dict[str, Any], protocol: str) -> tuple[int, int]:
    """(prompt, completion) tokens of an answer: OpenAI's ``usage``, Ollama's counts;
    0 for what the server leaves out or gives in another shape."""
    if protocol == "ollama":
        counts = (data.get("prompt_eval_count"), data.get("eval_count"))
    else:
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        counts = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    return tuple(
        n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0 for n in counts
    )


class _Overdue(Exception):
    """The answer was still coming in when ``judge.timeout_s`` was up."""


def _said(exc: BaseException) -> str:
    """What an exception says, or its name when it says nothing."""
    return str(exc) or type(exc).__name__


def _short(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
