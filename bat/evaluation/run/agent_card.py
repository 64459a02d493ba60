"""The agent card: where it is served, which protocol versions and bindings it offers.

Real agents differ in ways a 1.x client does not expect on its own:

* **Where.** a2a-sdk 0.3 and 1.x serve the card at ``/.well-known/agent-card.json``;
  a2a-sdk 0.2 agents, still common, serve it at ``/.well-known/agent.json`` only. Both are
  tried, in that order.
* **Which version.** a2a-sdk reads 0.3 cards (``url``, ``preferredTransport``,
  ``additionalInterfaces``) and speaks 0.3 through its compatibility transports. A 0.2
  card says ``protocolVersion: 0.2.x`` (or nothing): its JSON-RPC methods
  (``message/send``, ``message/stream``) are the ones 0.3 kept, so such interfaces are
  spoken as 0.3. Older versions (0.1's ``tasks/send``) cannot be spoken: that is said in
  so many words, not as "no agent answers".
* **Which binding.** JSON-RPC, HTTP+JSON (REST) and, when the ``grpc`` extra of a2a-sdk
  is installed, gRPC; the first interface of the card that bat can speak is used. A card
  offering only what bat cannot speak is a one-line error naming what it offers.
* **How it is read.** Over httpx, as every A2A request: the probe of a starting agent
  (:func:`card_answers`) with a client of its own, the card itself
  (:func:`fetch_card_document`) with the run's. Both are bounded: a card larger than
  ``CARD_LIMIT`` bytes is not read, and the probe gives each answer ``timeout_s``,
  whole. The probe follows a redirect only on the same origin (a starting agent on
  127.0.0.1 never sends bat elsewhere); the card's fetch follows none.
* **Which address.** A card may advertise ``http://localhost:PORT`` or a public name;
  bat talks to the address it was given (or started the agent on), keeping each
  interface's path. A gRPC interface keeps its own port (it is not the card's port).
  An interface address that is not a URL is an error naming it.

The project's own ``agent.json`` (read by ``bat build`` for the image's name and version)
is read strictly by :func:`read_card_file`: a file that is not UTF-8 JSON, repeats a key,
uses ``NaN``, or gives a non-text ``name``/``version`` is an error naming the file, the
key and the line, never silently replaced by a fallback.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bat.errors import OperationError

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
CARD_LIMIT = 4 << 20  # bytes: a card lists skills, never megabytes of them
PROBE_REDIRECTS = 10  # as many as urllib, which the probe used before, followed
JSONRPC, REST, GRPC = "JSONRPC", "HTTP+JSON", "GRPC"
GRPC_HINT = "pip install 'bat-cli[grpc]' (a2a-sdk's grpc extra)"


def card_answers(url: str, timeout_s: float = 2) -> bool:
    """Whether an agent card is served at ``url`` (HTTP 200 with a JSON object), at either
    well-known path. Synchronous: used while waiting for a starting agent, by doctor and
    after a crash; each answer must be whole within ``timeout_s`` and ``CARD_LIMIT``."""
    import httpx

    # Only an https:// agent needs certificates checked: loading the CA bundle takes
    # 40 ms or more, twenty times the probe itself, which a starting agent's wait repeats.
    secure = urlsplit(url).scheme == "https"
    with httpx.Client(trust_env=False, timeout=timeout_s, verify=secure) as http:
        for path in CARD_PATHS:
            try:
                body = _probe(http, url + path, timeout_s)
                if body is not None and isinstance(json.loads(body), dict):
                    return True
            except (httpx.HTTPError, httpx.InvalidURL, _Unread, ValueError, RecursionError):
                # Nothing listens, or garbage (JSON nested too deep to read included): the
                # other path will not differ.
                return False
    return False  # a 404 (or another answer) at both paths


def _probe(http: Any, url: str, timeout_s: float) -> bytes | None:
    """The body of a 200 answer at ``url``, or None for any other answer; a redirect is
    followed while it stays on the same origin (scheme, host and port)."""
    request = http.build_request("GET", url)
    for _ in range(PROBE_REDIRECTS + 1):
        response = http.send(request, stream=True)
        try:
            onward = response.next_request
            if onward is not None and _origin(onward.url) == _origin(request.url):
                request = onward
                continue
            if response.status_code != 200:
                return None
            return _body(response.iter_bytes(), url, time.monotonic() + timeout_s)
        finally:
            response.close()
    return None


def _origin(url: Any) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


class _Unread(Exception):
    """An answer too large (or, for the probe, too slow) to read: not a card."""


def _body(chunks: Any, url: str, deadline: float) -> bytes:
    """The bytes of ``chunks``, at most ``CARD_LIMIT`` of them, all in before ``deadline``."""
    data = bytearray()
    for chunk in chunks:
        data += _bounded(data, chunk, url)
        if time.monotonic() > deadline:
            raise _Unread(f"the agent card at {url} did not come in time")
    return bytes(data)


def _bounded(data: bytearray, chunk: bytes, url: str) -> bytes:
    """``chunk``, when ``data`` and it hold no more than ``CARD_LIMIT`` bytes."""
    if len(data) + len(chunk) > CARD_LIMIT:
        raise _Unread(f"the agent card at {url} is larger than {CARD_LIMIT >> 20} MB")
    return chunk


async def fetch_card(http: Any, url: str) -> Any:
    """The agent card at ``url``, from the first well-known path that has one."""
    card, _ = await fetch_card_document(http, url)
    return card


async def fetch_card_document(http: Any, url: str) -> tuple[Any, dict[str, Any]]:
    """The agent card at ``url`` and the JSON object it was read from, as served (for the
    run's benchmark card)."""
    import copy

    import httpx
    from a2a.client.card_resolver import parse_agent_card

    missing = []
    for path in CARD_PATHS:
        try:
            status, body = await _fetch(http, url + path)
        except httpx.HTTPError as exc:
            raise OperationError(
                f"no agent answers at {url} ({' '.join(str(exc).split()) or type(exc).__name__})"
            ) from None
        except _Unread as exc:
            raise OperationError(str(exc)) from None
        if status == 404:
            missing.append(path)
            continue
        if status != 200:
            raise OperationError(f"the agent card at {url}{path} answered HTTP {status}")
        try:
            document = json.loads(body)
            served = copy.deepcopy(document) if isinstance(document, dict) else {}
            return parse_agent_card(document), served
        except Exception as exc:  # JSON or protobuf parse errors, worded by their libraries
            raise OperationError(
                f"the agent card at {url}{path} cannot be read: {' '.join(str(exc).split())}"
            ) from None
    raise OperationError(
        f"{url} answers, but serves no agent card (HTTP 404 at {' and '.join(missing)})"
    )


async def _fetch(http: Any, url: str) -> tuple[int, bytes]:
    """The status and body of a GET of ``url`` (the body only of a 200 answer)."""
    async with http.stream("GET", url) as response:
        if response.status_code != 200:
            return response.status_code, b""
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += _bounded(data, chunk, url)
        return 200, bytes(data)


def can_speak_grpc() -> bool:
    try:
        import a2a.client.transports.grpc  # noqa: F401
    except ImportError:
        return False
    return True


def prepare(card: Any, url: str) -> list[str]:
    """Make ``card`` speakable from here; returns the bindings to offer the client.

    Legacy protocol versions are mapped to the 0.3 transports, interface addresses are
    pointed at ``url``, and a card that offers nothing bat can speak is an error. The
    card is left with the one interface bat will speak (:func:`choose`), so the client
    has no choice to make and ``run.json`` can say which it was.
    """
    from a2a.types import AgentInterface

    if not card.supported_interfaces:
        card.supported_interfaces.append(
            AgentInterface(url=url, protocol_binding=JSONRPC, protocol_version="1.0")
        )
    too_old = []
    usable = []
    bindings = [JSONRPC, REST] + ([GRPC] if can_speak_grpc() else [])
    for interface in card.supported_interfaces:
        version = _version(interface.protocol_version)
        if version is not None and version < (0, 2):
            too_old.append(interface.protocol_version)
            continue
        if version is not None and version < (0, 3):
            interface.protocol_version = "0.3"  # 0.2's JSON-RPC methods are 0.3's
        _point_at(interface, url)
        if interface.protocol_binding in bindings:
            usable.append(interface)
    if usable:
        chosen = choose(usable)
        del card.supported_interfaces[:]
        card.supported_interfaces.append(chosen)
        return bindings
    offered = [i.protocol_binding for i in card.supported_interfaces]
    if too_old:
        raise OperationError(
            f"the agent at {url} speaks A2A {', '.join(sorted(set(too_old)))}, which a2a-sdk "
            "cannot speak (it speaks 0.2 to 0.3 and 1.x): upgrade the agent's a2a-sdk"
        )
    if GRPC in offered:
        raise OperationError(
            f"the agent at {url} speaks only gRPC, and a2a-sdk's gRPC support is not "
            f"installed: {GRPC_HINT}"
        )
    raise OperationError(
        f"the agent at {url} offers no binding bat speaks (its card lists "
        f"{', '.join(offered) or 'none'}; bat speaks {', '.join(bindings)})"
    )


def choose(interfaces: list[Any]) -> Any:
    """The interface to speak among ``interfaces`` (all speakable), as a2a-sdk's client
    factory would pick: the binding the card lists first, and of that binding's
    interfaces the one of protocol 1.0, else a later one, else 0.3, else one that names
    no version."""
    binding = interfaces[0].protocol_binding
    same = [i for i in interfaces if i.protocol_binding == binding]

    def rank(interface: Any) -> int:
        version = _version(interface.protocol_version)
        if version is None:
            return 3
        return 0 if version == (1, 0) else 1 if version > (1, 0) else 2

    return min(same, key=rank)  # min keeps the card's order among equals


def _version(text: str) -> tuple[int, int] | None:
    parts = text.strip().split(".") if text else []
    try:
        return (int(parts[0]), int(parts[1])) if len(parts) >= 2 else None
    except ValueError:
        return None


def _point_at(interface: Any, url: str) -> None:
    """Reach the interface at ``url``'s host (and port, but for gRPC), keeping its path."""
    target = urlsplit(url)
    if interface.protocol_binding == GRPC:
        address = interface.url.split("://", 1)[-1]
        _, _, port = address.rpartition(":")
        interface.url = f"{target.hostname}:{port}" if port.isdigit() else address
        return
    try:
        parts = urlsplit(interface.url)
    except ValueError:  # "http://[::1": an agent's card is not bat's to trust
        raise OperationError(
            f"the agent at {url} lists an interface at {interface.url!r:.80}, which is not a "
            "URL: fix the url of its agent card"
        ) from None
    interface.url = urlunsplit((target.scheme, target.netloc, parts.path, parts.query, ""))
