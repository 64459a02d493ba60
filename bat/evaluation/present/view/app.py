"""The viewer's Starlette application: :func:`make_app`.

Routes (every one read-only)::

    /                                   the runs page
    /runs/{run}                         a run: per model counts and the task × attempt grid
    /runs/{run}/events                  the run's episodes as Server-Sent Events
    /runs/{run}/episodes/{model}/{file} an episode: turns, events, tools, verdict, judges
    /runs/{run}/raw/{model}/{file}      the episode file itself (JSON)
    /compare?a=RUN/MODEL&b=RUN/MODEL    two summarized models side by side, flips first
    /charts                             the charts eval.plot drew (report.html's figures)
    /charts/{file}                      one of them: NAME.svg or NAME.png
    /static/{file}                      the page's one script and style sheet

Every response carries a strict Content-Security-Policy (scripts and styles from this
server only, no inline script, nothing from elsewhere). With a token, every request must
carry it: ``?token=``, ``Authorization: Bearer``, or the cookie set when a page was
opened with ``?token=`` (so the page's links and its event stream keep working).
Without a token, a request must name this viewer by a loopback name in its ``Host``
header (:func:`host_allowed`): a web page that points its own name at 127.0.0.1 (DNS
rebinding) is refused, so it cannot read the runs through the user's browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from bat.errors import InputError
from bat.evaluation.log import batcli
from bat.evaluation.present.cost_view import gate_value
from bat.evaluation.present.view import pages
from bat.evaluation.present.view.watch import OUTCOMES, OUTCOMES_MANY, RunWatch
from bat.figures import counted, number, percent, points, seconds
from bat.numbers import whole_number

HERE = Path(__file__).parent
STATIC = {"view.js": "text/javascript", "view.css": "text/css", "favicon.svg": "image/svg+xml"}
COOKIE = "bat_view_token"
CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


WARM_RUNS = 3  # the newest runs read as the viewer starts


def make_app(
    folder: Path,
    *,
    token: str | None,
    poll_s: float = 0.5,
    ping_s: float = 10.0,
    warm: bool = False,
    bound: str = "127.0.0.1",
) -> Starlette:
    """The viewer of every run under ``folder``; ``token``: required on every request.
    ``bound``: the address the viewer listens on, a name its ``Host`` header may give
    (with the loopback names) when there is no token.

    With ``warm``, the newest ``WARM_RUNS`` runs are read in a thread as it starts (each
    episode once, the summaries, the dataset's tags), so the first look at a run of
    10,000 episodes costs no more than any later one. ``eval.run --view`` does not warm:
    it would take that time from the run beside it."""
    folder = Path(folder)
    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.globals.update(
        outcomes=OUTCOMES,
        outcomes_many=OUTCOMES_MANY,
        percent=percent,
        points=points,
        seconds=seconds,
        number=number,
        gate_value=gate_value,
        counted=counted,
        as_json=pages.as_json,
    )
    watches: dict[Path, RunWatch] = {}
    watches_lock = threading.Lock()  # the warming thread makes them too

    def watch_of(run_dir: Path) -> RunWatch:
        key = run_dir.resolve()
        with watches_lock:
            if key not in watches:
                watches[key] = RunWatch(run_dir, interval=poll_s)
            return watches[key]

    if warm:
        threading.Thread(
            target=_warm, args=(folder, watch_of, templates), name="bat-view-warm", daemon=True
        ).start()

    def render(name: str, **values: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(folder=folder.name, **values))

    def run_of(request: Request) -> Path:
        found = pages.find_run(folder, request.path_params["run"])
        if found is None:
            raise HTTPException(404, "no such run")
        return found

    def episode_of(request: Request) -> tuple[Path, str, Path]:
        run_dir = run_of(request)
        try:
            record = batcli.read_record(run_dir)
        except InputError:
            raise HTTPException(404, "no such run") from None
        model = pages.find_model(run_dir, record, request.path_params["model"])
        if model is None:
            raise HTTPException(404, "no such model")
        path = pages.find_episode(model[1], request.path_params["file"])
        if path is None:
            raise HTTPException(404, "no such episode")
        return run_dir, request.path_params["model"], path

    async def runs(request: Request) -> Response:
        signature = await anyio.to_thread.run_sync(pages.runs_signature, folder)
        shown = await anyio.to_thread.run_sync(pages.runs_page, folder, watch_of)
        live = any(r.status == "running" for r in shown)
        return render("runs.html", runs=shown, live=live, signature=signature)

    async def runs_events(request: Request) -> Response:
        since = request.query_params.get("since", "")

        async def stream() -> AsyncIterator[ServerSentEvent]:
            while True:
                now = await anyio.to_thread.run_sync(pages.runs_signature, folder)
                if now != since:
                    yield ServerSentEvent(data=json.dumps({"signature": now}), event="changed")
                    return
                await asyncio.sleep(max(poll_s, 1.0))

        return EventSourceResponse(stream(), ping=ping_s, headers={"cache-control": "no-store"})

    run_pages = PageCache()

    async def run(request: Request) -> Response:
        run_dir = run_of(request)
        try:
            filters = pages.Filters.of(request.query_params)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        watch = watch_of(run_dir)

        def build() -> str:
            watch.refresh()
            # The page is the same for every viewer who asks before anything changes: 50
            # viewers opening a run at its start cost one page, not fifty.
            key = (run_dir, filters, watch.count(), pages.run_signature(run_dir))
            return run_pages.get(key, lambda: make_run_page(run_dir, filters))

        def make_run_page(run_dir: Path, filters: pages.Filters) -> str:
            view = pages.run_view(run_dir, watch_of, grid=True, filters=filters)
            # The grid shows the entries numbered below next_event; the stream starts there.
            return templates.get_template("run.html").render(
                folder=folder.name, run=view, next_event=view.next_event, filters=filters
            )

        return HTMLResponse(await anyio.to_thread.run_sync(build))

    feeds: dict[Path, Feed] = {}

    async def events(request: Request) -> Response:
        run_dir = run_of(request)
        watch = watch_of(run_dir)
        feed = feeds.setdefault(run_dir.resolve(), Feed(watch, poll_s))
        start = _first_wanted(request)

        async def stream() -> AsyncIterator[ServerSentEvent | bytes]:
            nonlocal start
            version = 0
            async with feed.following():
                while True:
                    version, status = await feed.after(version)
                    if start > watch.count():
                        # Ids of another viewer process (this one restarted): the page's
                        # cells and counts are not this process's to continue; it reloads.
                        yield ServerSentEvent(data="{}", event="reset")
                        return
                    new, start = watch.stream_since(start)
                    if new:  # every event found since the last look, in one write
                        yield new
                    if status != "running":
                        yield ServerSentEvent(data=json.dumps({"status": status}), event="end")
                        return

        return EventSourceResponse(stream(), ping=ping_s, headers={"cache-control": "no-store"})

    async def episode(request: Request) -> Response:
        run_dir, model, path = episode_of(request)
        view = await anyio.to_thread.run_sync(pages.episode_page, run_dir, model, path)
        return render("episode.html", view=view)

    async def raw(request: Request) -> Response:
        _, _, path = episode_of(request)
        data = await anyio.to_thread.run_sync(path.read_bytes)
        return Response(data, media_type="application/json")

    async def compare(request: Request) -> Response:
        def build() -> dict[str, Any]:
            sides = pages.comparable_sides(folder)
            keys = {key: request.query_params.get(key, "").strip() for key in ("a", "b")}
            chosen = {key: pages.find_side(folder, value) for key, value in keys.items() if value}
            if any(side is None for side in chosen.values()):
                raise HTTPException(404, "no such summarized run or model")
            data = None
            if len(chosen) == 2:
                data = pages.compare_page(chosen["a"], chosen["b"])
            defaults = {"a": sides[1].key if len(sides) > 1 else "", "b": ""}
            defaults["b"] = sides[0].key if sides else ""
            picked = {k: (chosen[k].key if k in chosen else defaults[k]) for k in ("a", "b")}
            return {"sides": sides, "picked": picked, "chosen": chosen, "data": data}

        values = await anyio.to_thread.run_sync(build)
        return render("compare.html", **values)

    async def charts(request: Request) -> Response:
        shown = await anyio.to_thread.run_sync(pages.chart_files, folder)
        return render("charts.html", charts=shown)

    async def chart(request: Request) -> Response:
        path = pages.chart_file(folder, request.path_params["file"])
        if path is None:
            raise HTTPException(404, "no such chart")
        kind = "image/svg+xml" if path.suffix == ".svg" else "image/png"
        return Response(await anyio.to_thread.run_sync(path.read_bytes), media_type=kind)

    async def static(request: Request) -> Response:
        name = request.path_params["file"]
        if name not in STATIC:
            raise HTTPException(404, "no such file")
        return Response((HERE / "static" / name).read_bytes(), media_type=STATIC[name])

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", "error")
        return PlainTextResponse(f"{status}: {detail}", status_code=status)

    app = Starlette(
        routes=[
            Route("/", runs),
            Route("/events", runs_events),
            Route("/runs/{run}", run),
            Route("/runs/{run}/events", events),
            Route("/runs/{run}/episodes/{model}/{file}", episode),
            Route("/runs/{run}/raw/{model}/{file}", raw),
            Route("/compare", compare),
            Route("/charts", charts),
            Route("/charts/{file}", chart),
            Route("/static/{file}", static),
        ],
        exception_handlers={HTTPException: not_found},
        middleware=[Middleware(Guard, token=token, bound=bound)],
    )
    return app


class Feed:
    """The looks at one run's folder that its streams follow: while any stream follows,
    one task looks every ``poll_s`` and wakes them all after each look, so fifty viewers
    cost the run one look (and no thread of their own) per interval."""

    def __init__(self, watch: RunWatch, poll_s: float) -> None:
        self.watch = watch
        self.poll_s = poll_s
        self.status = watch.status
        self.version = 0  # the looks done
        self.followers = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task | None = None

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[None]:
        self.followers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._look_while_followed())
        try:
            yield
        finally:
            self.followers -= 1

    async def after(self, version: int) -> tuple[int, str]:
        """Wait for a look later than ``version``; its number and the run's status."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.version > version)
            return self.version, self.status

    async def _look_while_followed(self) -> None:
        while self.followers > 0:
            try:
                status = await anyio.to_thread.run_sync(self.watch.refresh)
            except OSError:  # the folder went away under the look: try again, never hang
                status = self.status
            async with self._changed:
                self.status, self.version = status, self.version + 1
                self._changed.notify_all()
            await asyncio.sleep(self.poll_s)


class PageCache:
    """The last pages made, by what they were made of (a few; the oldest goes first)."""

    SIZE = 32

    def __init__(self) -> None:
        self._pages: OrderedDict[Any, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, make: Any) -> str:
        with self._lock:  # one viewer makes it; the others asking meanwhile wait for it
            if key in self._pages:
                self._pages.move_to_end(key)
                return self._pages[key]
            page = make()
            self._pages[key] = page
            if len(self._pages) > self.SIZE:
                self._pages.popitem(last=False)
            return page


def _warm(folder: Path, watch_of: Any, templates: Environment) -> None:
    """Compile the pages' templates and read the newest runs once, as their pages would
    (what cannot be read is said by the page that shows it, not here)."""
    for name in templates.list_templates():
        templates.get_template(name)
    for run_dir in pages.run_folders(folder)[:WARM_RUNS]:
        try:
            pages.run_view(run_dir, watch_of, grid=True)
        except Exception:  # only a head start: the page reads it again, and says what fails
            continue


def _first_wanted(request: Request) -> int:
    """The first entry a stream sends: after ``Last-Event-ID`` (a reconnecting client),
    else ``?from=`` (the page: the entries its grid was drawn from are not sent again),
    else 0. Each is a whole number by the one rule (:mod:`bat.numbers`); anything else
    is a 400 naming it (a browser only ever sends back the ids this viewer gave)."""
    last = request.headers.get("last-event-id", "").strip()
    if last:
        return _number("Last-Event-ID", last) + 1
    given = request.query_params.get("from", "").strip()
    return _number("?from=", given) if given else 0


def _number(where: str, text: str) -> int:
    try:
        return whole_number(text)
    except ValueError as exc:
        raise HTTPException(400, f"{where}: {exc}") from None


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})


def host_allowed(header: str | None, bound: str) -> bool:
    """Whether a ``Host`` header names this viewer by a loopback name: ``localhost``,
    ``127.0.0.1``, ``[::1]`` or the address it is bound to, with or without a port.

    A page of another site can make its own name resolve to 127.0.0.1 (DNS rebinding)
    and then read a viewer without a token as if it were the same site; its requests
    still carry that other name in ``Host``, which is how they are told apart. The port
    is not compared: a forwarded port (``ssh -L 9000:localhost:8765``) changes it.
    """
    if not header:
        return False
    name, port = _host_and_port(header.strip().lower())
    if port is not None:
        try:
            whole_number(port, lowest=0, highest=65535)
        except ValueError:
            return False
    own = bound.lower()
    allowed = LOOPBACK_NAMES | {f"[{own.strip('[]')}]" if ":" in own else own}
    return name in allowed


def _host_and_port(header: str) -> tuple[str, str | None]:
    """``Host`` split into its name (an IPv6 address keeps its brackets) and port."""
    if header.startswith("["):
        name, _, rest = header.partition("]")
        name += "]"
        if not rest:
            return name, None
        return (name, rest[1:]) if rest.startswith(":") else ("", None)
    name, colon, port = header.partition(":")
    return name, (port if colon else None)


class Guard:
    """Pure ASGI middleware: the token on every request (or, without one, a loopback
    name in ``Host``), and the security headers on every response (a streaming one too).
    With a token, ``Host`` is not checked: the viewer may be reached by any name of the
    machine (or a proxy's), and a rebinding page cannot know the token, nor read the
    cookie, which belongs to the viewer's own name."""

    def __init__(self, app: Any, token: str | None, bound: str = "127.0.0.1") -> None:
        self.app = app
        self.token = token
        self.bound = bound

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        set_cookie = False
        if self.token is not None:
            given = _tokens(scope)
            if not any(secrets.compare_digest(t.encode(), self.token.encode()) for t in given):
                await _refuse(send)
                return
            set_cookie = COOKIE not in _cookies(scope)
        elif not host_allowed(_header(scope, b"host"), self.bound):
            await _refuse(send, HOST_REFUSED, status=403)
            return

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in SECURITY_HEADERS if n not in names]
                if set_cookie:
                    cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                    headers.append((b"set-cookie", cookie.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def _header(scope: dict, wanted: bytes) -> str | None:
    """The one ``wanted`` header of a request (None: none, or more than one)."""
    found = [value for name, value in scope.get("headers", []) if name == wanted]
    return found[0].decode("latin-1") if len(found) == 1 else None


def _tokens(scope: dict) -> list[str]:
    """Every token a request offers: ``?token=``, ``Authorization: Bearer``, the cookie."""
    found = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [])
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, _, given = value.decode("latin-1").partition(" ")
            if kind.lower() == "bearer":
                found.append(given.strip())
    cookie = _cookies(scope).get(COOKIE)
    if cookie:
        found.append(cookie)
    return found


def _cookies(scope: dict) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                continue
    return {key: morsel.value for key, morsel in jar.items()}


TOKEN_NEEDED = b"401: this viewer needs its token (?token=... or Authorization: Bearer ...)\n"
HOST_REFUSED = (
    b"403: this viewer answers only to localhost, 127.0.0.1 or [::1] in the Host header "
    b"(a viewer for other names needs --token)\n"
)


async def _refuse(send: Any, body: bytes = TOKEN_NEEDED, status: int = 401) -> None:
    challenge = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *challenge,
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
