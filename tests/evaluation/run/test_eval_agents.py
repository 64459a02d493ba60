"""`bat eval.run` against agents that speak A2A in every way real agents do (issue 8, part 1-2).

Each binding a2a-sdk 1.x gives a client (JSON-RPC, HTTP+JSON, gRPC), the older card
formats and path, chunked artifacts, auth-required, and every way an agent fails: the
answers must read the same whichever way they came, and every failure must be the agent's
own outcome, of the right kind, never an infrastructure failure.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.conftest import REPO
from tests.evalkit import episodes, free_port, make_project, run_dirs, start_fixture, summary

# Every way the echo agent can answer or fail; all expectations hold on every binding.
TASKS = [
    {"id": "plain", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}},
    {"id": "chunks", "turns": ["CHUNKS"], "expected": {"output_regex": "^Hello, chunked world$"}},
    {
        "id": "auth",
        "turns": ["AUTH please"],
        "expected": {"status": "auth-required", "output_must_contain": ["sign in first"]},
    },
    {
        "id": "auth-then",
        "turns": ["AUTH please", "my token"],
        "expected": {"output_must_contain": ["got it: my token"]},
    },
    {"id": "fail", "turns": ["FAIL"], "expected": {"status": "error"}},
    {
        "id": "fail-quota",
        "turns": ["FAIL: insufficient_quota: You exceeded your current quota"],
        "expected": {"status": "error"},
    },
    {"id": "reject", "turns": ["REJECT"], "expected": {"status": "error"}},
    {"id": "cancel", "turns": ["CANCEL"], "expected": {"status": "error"}},
    {
        "id": "raise-model",
        "turns": ["RAISE openai.InternalServerError: Error code: 500 - upstream down"],
        "expected": {"status": "error"},
    },
    {
        "id": "raise-rate",
        "turns": ["RAISE Error code: 429 - Rate limit reached"],
        "expected": {"status": "error"},
    },
    {
        "id": "raise-auth",
        "turns": ["RAISE Error code: 401 - Incorrect API key provided"],
        "expected": {"status": "error"},
    },
    {"id": "raise-timeout", "turns": ["RAISE Request timed out."], "expected": {"status": "error"}},
    {"id": "raise-bug", "turns": ["RAISE KeyError: 'plan'"], "expected": {"status": "error"}},
    # An exception after the task began (a stream is open): the agent's error all the same.
    {"id": "break-bug", "turns": ["BREAK KeyError: 'plan'"], "expected": {"status": "error"}},
    {
        "id": "break-rate",
        "turns": ["BREAK Error code: 429 - Rate limit reached"],
        "expected": {"status": "error"},
    },
    # A task continued over turns keeps its artifacts: each turn's answer is its own.
    {
        "id": "steps",
        "turns": ["STEP one", "STEP two", "done"],
        "expected": {"output_regex": "^got it: done$"},
    },
    # Data and file parts are part of the answer; one answer sent as artifacts of one name.
    {"id": "data", "turns": ["DATA"], "expected": {"output_regex": '^\\{"answer": 42\\}$'}},
    {"id": "file", "turns": ["FILE"], "expected": {"output_must_contain": ["report.pdf"]}},
    {"id": "pieces", "turns": ["PIECES"], "expected": {"output_regex": "^Hello, pieced world$"}},
    # Expecting completion from a failing agent: a failure of the agent's, in pass@k.
    {"id": "fail-unexpected", "turns": ["FAIL"], "expected": {"status": "completed"}},
]
KINDS = {
    "fail": "unknown",
    "fail-quota": "rate_limited",
    "reject": "refused",
    "cancel": "canceled",
    "raise-model": "model_error",
    "raise-rate": "rate_limited",
    "raise-auth": "authentication_failed",
    "raise-timeout": "timeout",
    "raise-bug": "agent_exception",
    "break-bug": "agent_exception",
    "break-rate": "rate_limited",
    "fail-unexpected": "unknown",
}
# a2a-sdk's REST server answers an executor's exception with HTTP 500 "unknown exception",
# whatever the exception said: honestly, bat can only call that an exception in the agent.
REST_KINDS = {
    **KINDS,
    **{task: "agent_exception" for task in KINDS if task.startswith(("raise", "break"))},
}

BINDINGS = [
    pytest.param({}, "JSONRPC 1.0", KINDS, id="jsonrpc"),
    pytest.param({"NO_STREAMING": "1"}, "JSONRPC 1.0", KINDS, id="jsonrpc-not-streaming"),
    pytest.param({"TRANSPORT": "rest"}, "HTTP+JSON 1.0", REST_KINDS, id="rest"),
    pytest.param(
        {"TRANSPORT": "rest", "NO_STREAMING": "1"},
        "HTTP+JSON 1.0",
        REST_KINDS,
        id="rest-not-streaming",
    ),
    pytest.param({"TRANSPORT": "grpc"}, "GRPC 1.0", KINDS, id="grpc"),
    pytest.param({"CARD_VERSION": "0.3"}, "JSONRPC 0.3.0", KINDS, id="card-0.3"),
    pytest.param({"CARD_VERSION": "0.2", "NO_STREAMING": "1"}, "JSONRPC 0.3", KINDS, id="card-0.2"),
]


@pytest.mark.parametrize(("agent_env", "binding", "kinds"), BINDINGS)
def test_every_binding_reads_answers_and_failures_alike(
    tmp_path, bat, home, agent_env, binding, kinds
):
    project = make_project(tmp_path, TASKS, agent_env=agent_env, concurrency=4)
    result = bat("eval.run", cwd=project, charts=True)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    found = {name.removesuffix("__try1.json"): e for name, e in episodes(run_dir).items()}
    verdicts = {task: e["verdict"]["reason"] for task, e in found.items()}
    failing = {t: r for t, r in verdicts.items() if not found[t]["verdict"]["passed"]}
    assert failing == {"fail-unexpected": verdicts["fail-unexpected"]}
    assert all(e["infra_error"] is None for e in found.values())
    got = {t: e["agent_error"]["kind"] for t, e in found.items() if e["agent_error"]}
    assert got == kinds
    # The chunked answer reads the same streamed or not; auth-required is its own status.
    assert found["chunks"]["final_output"] == "Hello, chunked world"
    turns = [turn["output"] for turn in found["steps"]["trace"]["turns"]]
    assert turns == ["step: one", "step: two", "got it: done"]
    assert found["file"]["final_output"] == "[file report.pdf http://127.0.0.1:9/report.pdf]"
    assert found["auth"]["status"] == "auth-required"
    assert found["reject"]["agent_error"]["state"] == "rejected"
    totals = summary(run_dir)["totals"]
    assert totals["infra_failures"] == 0
    assert totals["agent_errors_total"] == len(kinds)
    assert {k: n for k, n in totals["agent_errors"].items() if n} == _count(kinds.values())
    # Agent errors are the agent's outcomes: in pass@k (20 tasks, 19 passed).
    assert totals["pass_at_k"] == round(19 / 20, 4)
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["binding"] == binding
    metrics = json.loads((run_dir / "agent-default" / "metrics.json").read_text())
    assert metrics["summary"]["agent_errors"] == totals["agent_errors"]
    assert "agent errors (" in result.out  # the terminal line names the kinds
    report = (project / "eval" / "output" / "report.html").read_text()
    assert "agent error: refused" in report and f"{len(kinds)}</b>agent errors" in report


def _count(values):
    counts = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


@pytest.mark.parametrize("streaming", ["1", "0"])
def test_a_turn_that_ends_while_the_task_still_works_says_so(tmp_path, bat, home, streaming):
    """The agent's doing (its executor returned early), not the harness's: no infra error."""
    tasks = [{"id": "u", "turns": ["UNFINISHED"], "expected": {}}]
    agent_env = {"NO_STREAMING": "0" if streaming == "1" else "1"}
    project = make_project(tmp_path, tasks, agent_env=agent_env)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.err
    (episode,) = episodes(run_dirs(project)[0]).values()
    assert episode["status"] == "working" and episode["final_output"] == "partial answer"
    assert episode["infra_error"] is None and not episode["verdict"]["passed"]
    assert "ended before the task reached a final state" in episode["verdict"]["reason"]


def test_card_only_at_the_older_path_with_an_agent_already_running(tmp_path, bat, home):
    """a2a-sdk 0.2 agents serve their card at /.well-known/agent.json only."""
    port = free_port()
    agent = start_fixture("echo_agent", port, CARD_VERSION="0.2")
    try:
        url = f"http://127.0.0.1:{port}"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "/.well-known/agent-card.json", timeout=5)
        tasks = [{"id": "a", "turns": ["hi"], "expected": {"output_must_contain": ["echo: hi"]}}]
        project = make_project(tmp_path, tasks, start=False, agent_url=url)
        result = bat("eval.run", cwd=project)
        assert result.code == 0, result.err
        (episode,) = episodes(run_dirs(project)[0]).values()
        assert episode["verdict"]["passed"]
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_a_card_too_old_to_speak_is_said_so(tmp_path, bat, home):
    project = make_project(tmp_path, TASKS[:1], agent_env={"CARD_VERSION": "0.1"})
    result = bat("eval.run", cwd=project)
    assert result.code == 1
    assert "speaks A2A 0.1.0" in result.err and "upgrade the agent" in result.err
    assert "no agent answers" not in result.err and "Traceback" not in result.err


@pytest.mark.parametrize(
    ("agent_env", "binding"),
    [
        # a2a-sdk's client takes the binding the card lists first, protocol 1.0 first
        pytest.param({"PRECEDING_INTERFACES": "JSONRPC:0.3"}, "JSONRPC 1.0", id="0.3-then-1.0"),
        # an interface too old to speak, listed first, is passed over (it was a traceback)
        pytest.param(
            {"TRANSPORT": "rest", "PRECEDING_INTERFACES": "JSONRPC:0.1"},
            "HTTP+JSON 1.0",
            id="0.1-first",
        ),
    ],
)
def test_a_card_with_several_interfaces(tmp_path, bat, home, agent_env, binding):
    project = make_project(tmp_path, TASKS[:2], agent_env=agent_env)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["binding"] == binding
    assert all(e["verdict"]["passed"] for e in episodes(run_dir).values())
    served = json.loads((run_dir / "card.json").read_text())["agent"]["card"]
    assert len(served["supportedInterfaces"]) == 2  # the card as served, not as spoken


def test_grpc_only_agent_without_the_grpc_extra(tmp_path, bat, home):
    """Without a2a-sdk's grpc extra in bat's environment: one line naming the extra."""
    shim = tmp_path / "no-grpc"
    (shim / "grpc").mkdir(parents=True)
    (shim / "grpc" / "__init__.py").write_text('raise ImportError("grpc is not installed")\n')
    project = make_project(tmp_path / "p", TASKS[:1], agent_env={"TRANSPORT": "grpc"})
    # The shim is on bat's path only: the agent's own PYTHONPATH (from eval.yaml) wins.
    result = bat("eval.run", cwd=project, env={"PYTHONPATH": str(shim)})
    assert result.code == 1
    assert "speaks only gRPC" in result.err and "bat-cli[grpc]" in result.err
    assert len(result.err.strip().splitlines()) <= 20 and "Traceback" not in result.err


# --- a real older a2a-sdk -----------------------------------------------------------------

LEGACY_TASKS = [
    {"id": "echo", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}},
    {"id": "ask", "turns": ["ASK me", "this"], "expected": {"output_must_contain": ["got it"]}},
    {"id": "chunks", "turns": ["CHUNKS"], "expected": {"output_regex": "^Hello, chunked world$"}},
    {"id": "fail", "turns": ["FAIL now"], "expected": {"status": "error"}},
    {"id": "raise", "turns": ["RAISE Error code: 429 rate limit"], "expected": {"status": "error"}},
]


def legacy_packages(version):
    return [f"a2a-sdk[http-server]=={version}", "uvicorn"]


@pytest.fixture(scope="module", params=["0.2.16", "0.3.26"])
def legacy_python(request, tmp_path_factory):
    """A Python with that real a2a-sdk release installed (from PyPI, through uv's cache)."""
    from bat.uv_binary import find_uv

    version = request.param
    venv = tmp_path_factory.mktemp(f"a2a-{version}") / "venv"
    uv = find_uv()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    made = subprocess.run(
        [uv, "venv", "-q", "-p", sys.executable, str(venv)], env=env, capture_output=True
    )
    assert made.returncode == 0, made.stderr
    install = subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), *legacy_packages(version)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    return version, str(venv / "bin" / "python")


@pytest.mark.slow
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "not-streaming"])
def test_a_real_older_a2a_sdk_agent(tmp_path, bat, home, legacy_python, streaming):
    version, python = legacy_python
    port = free_port()
    agent = subprocess.Popen(
        [python, str(REPO / "eval_fixtures" / "legacy_agent.py")],
        env={**os.environ, "PORT": str(port), "NO_STREAMING": "" if streaming else "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "listening" in agent.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        if version.startswith("0.2"):  # a2a-sdk 0.2 serves its card at the older path only
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(url + "/.well-known/agent-card.json", timeout=5)
        project = make_project(tmp_path, LEGACY_TASKS, start=False, agent_url=url)
        result = bat("eval.run", cwd=project)
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    found = {name.removesuffix("__try1.json"): e for name, e in episodes(run_dir).items()}
    reasons = {t: e["verdict"]["reason"] for t, e in found.items()}
    assert all(e["verdict"]["passed"] for e in found.values()), reasons
    assert found["chunks"]["final_output"] == "Hello, chunked world"
    assert found["fail"]["agent_error"]["kind"] == "unknown"
    # A 0.2/0.3 server breaks off its stream on an executor exception (no error event);
    # the agent lives on, so that is its own error, not an infrastructure failure.
    raised = found["raise"]["agent_error"]
    assert raised["kind"] == ("agent_exception" if streaming else "rate_limited"), raised
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["binding"].startswith("JSONRPC 0.")
