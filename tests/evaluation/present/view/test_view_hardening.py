"""``bat eval.view`` against what a hostile page or a careless client sends (issue 27).

The viewer's Starlette application is asked in this process (``TestClient``: the same
ASGI app ``eval.view`` serves) over run folders written by the log layer's own writers;
one test asks a real ``bat eval.view`` process, as the issue measured it. Covered: the
``Host`` rule against DNS rebinding, every route read-only, numbers of query strings and
headers by the one rule (never a 500), task ids of any valid spelling reachable, and a
Hypothesis search over query strings and ``Last-Event-ID`` with a canary.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.present.view import app as viewapp
from bat.evaluation.present.view.app import make_app
from tests.logkit import NO_SECRETS, episode

RUN = "20260101-000000-odd"
MODEL = "agent-default"
# Ids bat accepts (TaskSpec) whose episode file names are not plain words.
ODD_IDS = ["-lead", "-", "a..b", "--x--", "_under", "with space/slash", "ünï", ".dot", "plain"]
SCALE = float(os.environ.get("FUZZ_SCALE", "1"))


def fuzz(examples: int):
    """Deterministic, no database, no deadline: CI sees the same examples every run."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    )


def stem(task_id: str) -> str:
    return TaskSpec(id=task_id, turns=["x"]).file_stem


def write_odd_run(output: Path, ids: list[str] = ODD_IDS, *, status: str = "completed") -> Path:
    """A run of one model whose tasks have ``ids``, written by the log layer."""
    run_dir = output / RUN
    model_dir = run_dir / MODEL
    for n, task_id in enumerate(ids):
        store.write_episode(
            model_dir, stem(task_id), episode(task_id, 1, n % 2 == 0), scrubber=NO_SECRETS
        )
    record = rundir.RunRecord(
        run_id=RUN,
        status=status,
        started_at="2026-01-01T00:00:00.000Z",
        tasks=ids,
        k=1,
        models=[rundir.ModelEntry(label=MODEL, dir=MODEL, status="completed")],
    )
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    return run_dir


def write_many(output: Path, tasks: int, k: int, *, run_id: str = RUN, answer: int = 20) -> Path:
    """A finished run of ``tasks`` × ``k`` episodes, written as the runner writes them
    (``store.queue_episode`` through its batch writer: one filesystem sync per batch)."""
    from bat.evaluation.log.batch_writer import BatchWriter

    ids = [f"task-{n:05}" for n in range(tasks)]
    run_dir = output / run_id
    model_dir = run_dir / MODEL
    layout.episodes_dir(model_dir).mkdir(parents=True)
    writer = BatchWriter()
    for task_id in ids:
        for attempt in range(1, k + 1):
            said = f"answer {task_id} ".ljust(answer, "x")
            item = episode(task_id, attempt, attempt % 3 != 0, output=said)
            store.queue_episode(
                writer, model_dir, stem(task_id), item, earlier=False, scrubber=NO_SECRETS
            )
    writer.flush()
    record = rundir.RunRecord(
        run_id=run_id,
        status="completed",
        started_at="2026-01-01T00:00:00.000Z",
        tasks=ids,
        k=k,
        models=[rundir.ModelEntry(label=MODEL, dir=MODEL, status="completed")],
    )
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    return run_dir


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("view-hardening") / "output"
    write_odd_run(folder)
    return folder


@contextlib.contextmanager
def client(folder: Path, *, host: str = "127.0.0.1:8765", **options):
    """The viewer app of ``folder``, asked with ``Host: {host}``."""
    from starlette.testclient import TestClient

    app = make_app(folder, token=options.pop("token", None), poll_s=0.05, **options)
    with TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as tc:
        tc.headers["host"] = host
        yield tc


# --- DNS rebinding: the Host header ----------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8765", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:8765", "LOCALHOST"],
)
def test_loopback_names_are_served_without_a_token(output, host):
    with client(output, host=host) as tc:
        assert tc.get("/").status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8765",
        "127.0.0.1.evil.example",
        "localhost.evil.example:8765",
        "localhost:abc",
        "localhost:99999",
        "[::1]x",
        "[::2]",
        "0.0.0.0:8765",
    ],
)
def test_any_other_host_is_refused_without_a_token(output, host):
    """A page of evil.example that made its name resolve to 127.0.0.1 gets nothing: not
    the runs page, not an episode file."""
    with client(output, host=host) as tc:
        for path in ("/", f"/runs/{RUN}", f"/runs/{RUN}/raw/{MODEL}/plain__try1.json"):
            response = tc.get(path)
            assert response.status_code == 403, (host, path)
            assert response.text.startswith("403: this viewer answers only to localhost")
            assert "task_id" not in response.text
            assert response.headers["content-security-policy"]


def test_host_rule_edges():
    from bat.evaluation.present.view.app import host_allowed

    assert host_allowed("127.0.0.2:80", "127.0.0.2")  # the address it is bound to
    assert host_allowed("[::1]:8765", "::1") and host_allowed("[::1]", "[::1]")
    assert not host_allowed("127.0.0.2", "127.0.0.1")
    assert not host_allowed(None, "127.0.0.1")  # none, or more than one Host header
    assert not host_allowed("", "127.0.0.1")
    assert not host_allowed("localhost:" + "9" * 5000, "127.0.0.1")
    assert not host_allowed("localhost:²", "127.0.0.1")  # not a port: no number of it


def test_a_request_without_a_host_header_is_refused(output):
    """HTTP/1.0 lets a client leave Host out; the viewer cannot tell who it is then."""
    import asyncio

    app = make_app(output, token=None)
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "http_version": "1.0",
        "method": "GET",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "headers": [],
        "scheme": "http",
        "server": ("127.0.0.1", 8765),
        "client": ("127.0.0.1", 5000),
        "root_path": "",
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 403


def test_with_a_token_the_host_is_not_checked(output):
    """With a token the viewer may be reached by any of the machine's names; the token
    is what keeps other pages out."""
    with client(output, host="viewer.internal:8765", token="s3cret") as tc:
        assert tc.get("/").status_code == 401
        assert tc.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_real_viewer_refuses_a_rebound_host(output, tmp_path):
    """As issue 27 measured it: a ``bat eval.view`` process on loopback, asked over TCP."""
    from tests.evaluation.present.view.test_view import viewer

    with viewer("-f", str(output), cwd=tmp_path, home=tmp_path) as view:
        raw = f"/runs/{RUN}/raw/{MODEL}/plain__try1.json"
        refused, _, body = view.get(raw, headers={"Host": "evil.example"})
        served, _, episode_json = view.get(raw)
    assert refused == 403 and "task_id" not in body
    assert served == 200 and '"task_id": "plain"' in episode_json


def test_every_route_is_read_only(output):
    """Nothing changes state, so no Origin needs checking: every route answers GET and
    HEAD only, anything else is a 405."""
    app = make_app(output, token=None)
    paths = {
        "/": "/",
        "/events": "/events",
        "/runs/{run}": f"/runs/{RUN}",
        "/runs/{run}/events": f"/runs/{RUN}/events",
        "/runs/{run}/episodes/{model}/{file}": f"/runs/{RUN}/episodes/{MODEL}/plain__try1.json",
        "/runs/{run}/raw/{model}/{file}": f"/runs/{RUN}/raw/{MODEL}/plain__try1.json",
        "/compare": "/compare",
        "/charts": "/charts",
        "/charts/{file}": "/charts/pass_rate.svg",
        "/static/{file}": "/static/view.js",
    }
    assert {route.path for route in app.routes} == set(paths)
    with client(output) as tc:
        for path in paths.values():
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                assert tc.request(method, path).status_code == 405, (method, path)


# --- numbers of query strings and headers ----------------------------------------------------

BAD_NUMBERS = ["²", "٣", "1_0", "-1", "+2", "0x10", "1e3", "9" * 5000, "0" * 4999 + "7" * 19]
BAD_IDS = [text if len(text) < 10 else f"{len(text)} digits" for text in BAD_NUMBERS]


@pytest.mark.parametrize("key", ["page", "grid"])
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=BAD_IDS)
def test_a_page_that_is_not_a_whole_number_is_a_400(output, key, value):
    with client(output) as tc:
        response = tc.get(f"/runs/{RUN}?{urlencode({key: value, 'task': '*'})}")
    assert response.status_code == 400, response.text[-300:]
    assert response.text.startswith(f"400: ?{key}=: expected a whole number from 1")
    assert len(response.text) < 200 and "Traceback" not in response.text


@pytest.mark.parametrize("value", ["", " ", "1", " 2 ", "007", "999999999999999999"])
def test_a_whole_page_number_or_none_is_served(output, value):
    """Empty is the first page; past the last page is the last one."""
    with client(output) as tc:
        assert tc.get(f"/runs/{RUN}?task=*&page={quote(value)}").status_code == 200
        assert tc.get(f"/runs/{RUN}?grid={quote(value)}").status_code == 200


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=BAD_IDS)
def test_a_stream_start_that_is_not_a_whole_number_is_a_400(output, value):
    with client(output) as tc:
        by_query = tc.get(f"/runs/{RUN}/events?from={quote(value)}")
        by_header = tc.get(f"/runs/{RUN}/events", headers={"Last-Event-ID": value.encode()})
    assert by_query.status_code == 400 and by_query.text.startswith("400: ?from=: expected")
    assert by_header.status_code == 400
    assert by_header.text.startswith("400: Last-Event-ID: expected")


def test_a_whole_stream_start_is_served(output):
    with client(output) as tc:
        events = tc.get(f"/runs/{RUN}/events", headers={"Last-Event-ID": " 3 "}).text
        assert events.count("event: episode") == len(ODD_IDS) - 4
        assert "event: end" in events
        assert tc.get(f"/runs/{RUN}/events?from=").text.count("event: episode") == len(ODD_IDS)


# --- task ids of every valid spelling --------------------------------------------------------


@pytest.mark.parametrize("task_id", ODD_IDS)
def test_every_task_id_bat_stores_is_served(output, task_id):
    name = f"{stem(task_id)}__try1.json"
    with client(output) as tc:
        page = tc.get(f"/runs/{RUN}/episodes/{MODEL}/{quote(name)}")
        raw = tc.get(f"/runs/{RUN}/raw/{MODEL}/{quote(name)}")
        grid = tc.get(f"/runs/{RUN}").text
    assert page.status_code == 200, (task_id, name)
    assert raw.status_code == 200 and raw.json()["task_id"] == task_id
    assert f"/episodes/{MODEL}/{quote(name)}" in grid  # the grid links to it


@pytest.mark.parametrize(
    "name",
    [
        "..",
        ".",
        ".hidden__try1.json",
        "..__try1.json",
        "plain__try1.json%0A",
        "plain__try1.json.bak",
        "plain__tryx.json",
        "%2E%2E%2Frun.json",
        "..%2F..%2Frun.json",
    ],
)
def test_names_that_are_not_episode_files_stay_not_found(output, name):
    with client(output) as tc:
        assert tc.get(f"/runs/{RUN}/raw/{MODEL}/{name}").status_code == 404


# --- bounded memory -------------------------------------------------------------------------

BYTES_PER_EPISODE = 400  # measured: ~200 B a file (1.6 KB and up, with the answers, before)


def test_the_watch_keeps_a_few_hundred_bytes_per_episode_whatever_the_answers(
    tmp_path, monkeypatch
):
    """What the run's watch keeps grows by a few hundred bytes per episode file, however
    long the answers (here 2,000 characters each): they are read from the files when a
    search asks. Measured as the slope between two runs of the same 100 tasks, 2 and 12
    attempts each, so what is kept per task or once per watch cancels out (the latest
    events kept encoded are a fixed number, ``watch.RECENT``: made small here, so both
    runs fill it)."""
    import gc
    import tracemalloc

    from bat.evaluation.present.view import watch as watching
    from bat.evaluation.present.view.watch import RunWatch

    monkeypatch.setattr(watching, "RECENT", 50, raising=False)
    small = write_many(tmp_path / "a", 100, 2, answer=2000)
    large = write_many(tmp_path / "b", 100, 12, answer=2000)
    kept = []
    grew = []
    tracemalloc.start()
    try:
        for run_dir in (small, large):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            watch = RunWatch(run_dir, interval=0)
            watch.refresh()
            gc.collect()
            grew.append(tracemalloc.get_traced_memory()[0] - before)
            kept.append(watch)  # alive while measured
    finally:
        tracemalloc.stop()
    assert [watch.count() for watch in kept] == [200, 1200]
    per_episode = (grew[1] - grew[0]) / 1000
    assert per_episode < BYTES_PER_EPISODE, f"{per_episode:.0f} bytes per episode"


def test_a_search_reads_the_answers_from_the_files(tmp_path):
    """No answer is kept: a search finds what the file says now (and only the episodes
    the other filters keep are read)."""
    run_dir = write_many(tmp_path / "output", 3, 2)
    with client(run_dir.parent) as tc:
        assert "1 episode match" not in tc.get(f"/runs/{RUN}?q=needle").text
        item = episode("task-00001", 2, True, output="a needle in the answer")
        store.write_episode(run_dir / MODEL, "task-00001", item, scrubber=NO_SECRETS)
        deadline = time.monotonic() + 10  # the watch looks at the folder every 0.5 s
        while "1 episode match" not in (page := tc.get(f"/runs/{RUN}?q=needle").text):
            assert time.monotonic() < deadline, "the rewritten episode was never found"
            time.sleep(0.1)
    assert "1 episode match" in page and "a needle in the answer" in page


# --- Hypothesis: any query string or Last-Event-ID ------------------------------------------

KEYS = ["page", "grid", "from", "q", "task", "tag", "status", "error", "model", "since", "a", "b"]
NUMBERISH = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from([*BAD_NUMBERS, "", " ", "0", "1", "00", "1.0", "١", "𝟙", "\xa01"]),
    st.text(alphabet="0123456789 ²³¹+-_.eE", max_size=30),
)
VALUES = st.one_of(NUMBERISH, st.text(max_size=40))
# The keys read as numbers come up most: they are what a parser can get wrong.
QUERIES = st.dictionaries(st.sampled_from(["page", "grid", "from"] * 3 + KEYS), VALUES, max_size=4)


def _header_bytes(text: str) -> bytes:
    """A header as a client sends it: Latin-1 where it can be (``http.client`` does; the
    server reads it back as Latin-1), else UTF-8; no CR, LF or NUL (no server passes them)."""
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raw = text.encode("utf-8")
    return raw.translate(None, b"\r\n\x00")


HEADER = st.one_of(NUMBERISH, st.text(max_size=40)).map(_header_bytes)
PATHS = ["/", f"/runs/{RUN}", f"/runs/{RUN}/events", f"/runs/{RUN}/events", "/compare"]


def check_never_a_500(tc, path: str, query: dict[str, str], last: bytes | None) -> None:
    headers = {} if last is None else {"Last-Event-ID": last}
    url = f"{path}?{urlencode(query)}" if query else path
    response = tc.get(url, headers=headers)
    assert response.status_code < 500, (url, headers, response.text[-500:])
    assert "Traceback" not in response.text


def never_a_500(output: Path):
    """The property, over one app (one TestClient for every example: they are fast)."""

    @fuzz(200)
    @given(path=st.sampled_from(PATHS), query=QUERIES, last=st.none() | HEADER)
    def prop(path: str, query: dict[str, str], last: bytes | None) -> None:
        check_never_a_500(tc, path, query, last)

    with client(output) as tc:
        prop()


def test_any_query_string_or_last_event_id_is_never_a_500(output):
    never_a_500(output)


def test_the_fuzz_check_finds_a_parser_that_raises(output, monkeypatch):
    """The canary: the same search against main's old ``Last-Event-ID`` parser (``int()``
    of whatever ``str.isdigit`` accepts, so ``²`` raised) must fail."""

    def old_first_wanted(request) -> int:
        last = request.headers.get("last-event-id", "").strip()
        if last.isdigit():
            return int(last) + 1
        given = request.query_params.get("from", "").strip()
        return int(given) if given.isdigit() else 0

    monkeypatch.setattr(viewapp, "_first_wanted", old_first_wanted)
    with pytest.raises(AssertionError, match="status_code"):
        never_a_500(output)


# --- Hypothesis: the Host rule and episode names ---------------------------------------------

HOST_PARTS = st.sampled_from(
    ["localhost", "127.0.0.1", "[::1]", "::1", "evil.example", "127.0.0.1.nip.io", "[", "]"]
)
HOSTS = st.one_of(
    st.text(max_size=60),
    st.tuples(HOST_PARTS, st.sampled_from(["", ":", ":80", ":²", ":-1", ":" + "9" * 30])).map(
        "".join
    ),
)


@fuzz(500)
@given(header=st.none() | HOSTS, bound=st.sampled_from(["127.0.0.1", "::1", "127.0.0.2"]))
def test_the_host_rule_serves_loopback_names_only(header, bound):
    """Whatever the header, the rule answers (never raises), and says yes exactly to a
    loopback name or the bound address, then nothing or a port (digits, at most 65535)."""
    import re

    from bat.evaluation.present.view.app import host_allowed

    own = re.escape(f"[{bound}]" if ":" in bound else bound)
    oracle = re.fullmatch(
        rf"(?:localhost|127\.0\.0\.1|\[::1\]|{own})(?::\s*([0-9]+)\s*)?",
        (header or "").strip().lower(),
    )
    expected = bool(oracle) and (oracle[1] is None or int(oracle[1]) <= 65535)
    assert host_allowed(header, bound) == expected, header


NAME_CHARS = st.sampled_from([*"aZ09._-/\\\n%~ ü", "..", "__try", ".json"])


@fuzz(300)
@given(name=st.lists(NAME_CHARS, max_size=12).map("".join))
def test_an_episode_name_is_found_only_inside_its_folder(name, tmp_path_factory):
    """Any name from a URL: None, or a regular file right inside the episodes folder."""
    from bat.evaluation.present.view.pages import find_episode

    model_dir = tmp_path_factory.getbasetemp() / "names" / MODEL
    folder = layout.episodes_dir(model_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for made in ("-a__try1.json", "a..b__try1.json", "a__try1.json"):
        (folder / made).write_text("{}")
    found = find_episode(model_dir, name)
    if found is not None:
        assert found.parent == folder and found.is_file() and not found.is_symlink()
        assert found.name == name


def test_titles_past_the_kept_texts_are_read_from_the_files(tmp_path, monkeypatch):
    """Only the first ``WHYS`` texts of outcomes are kept; a cell with another reason of
    its own gets it from its file, the same words either way."""
    from bat.evaluation.present.view import watch as watching

    monkeypatch.setattr(watching, "WHYS", 2)
    output = tmp_path / "output"
    run_dir = write_odd_run(output, ["a", "b", "c", "d"])
    for n, task_id in enumerate(["a", "b", "c", "d"]):  # four reasons of their own
        item = episode(task_id, 1, False, reason=f"output: missing 'word {n}'")
        store.write_episode(run_dir / MODEL, task_id, item, scrubber=NO_SECRETS)
    found = watching.RunWatch(run_dir, interval=0)
    found.refresh()
    _, latest = found.latest()
    titles = sorted(found.title(entry.slot) for entry in latest)
    assert titles == [
        f"{task} · attempt 1: failed: output: missing 'word {n}'" for n, task in enumerate("abcd")
    ]
    assert len(found._whys) == 2
