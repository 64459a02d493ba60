"""`bat eval.run` against a real a2a-sdk 0.2.6 agent (issue 28).

a2a-sdk 0.2.4 to 0.2.12 require ``configuration.acceptedOutputModes`` in every
``message/send`` and ``message/stream``: without it each request is refused as invalid
params, and every episode was an infrastructure failure (exit 3). The agent is
``eval_fixtures/a2a_v02_agent.py``, started by bat from a cached venv of that release
(``tests/a2a_sdks.py``); its answers name the output modes the request accepted.
"""

import json

import pytest

from tests.a2a_sdks import a2a_sdk_python
from tests.conftest import REPO
from tests.evalkit import episodes, make_project, run_dirs

TASKS = [
    {"id": "echo", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}},
    {"id": "ask", "turns": ["ASK me", "this"], "expected": {"output_must_contain": ["got it"]}},
]


@pytest.fixture(scope="module")
def python_026():
    return a2a_sdk_python("0.2.6")


@pytest.mark.slow  # the first run installs a2a-sdk 0.2.6 from PyPI (then cached)
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "not-streaming"])
def test_an_a2a_sdk_0_2_6_agent_is_evaluated(tmp_path, bat, home, python_026, streaming):
    agent = REPO / "eval_fixtures" / "a2a_v02_agent.py"
    project = make_project(
        tmp_path,
        TASKS,
        command=f"{python_026} {agent}",
        agent_env={"NO_STREAMING": "" if streaming else "1"},
    )
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    found = {name.removesuffix("__try1.json"): e for name, e in episodes(run_dir).items()}
    assert {t: e["verdict"]["passed"] for t, e in found.items()} == {"echo": True, "ask": True}
    assert all(e.get("infra_error") is None for e in found.values())
    # What the agent's card offers is what bat said it accepts.
    assert found["echo"]["final_output"] == "echo: hello [accepts text/plain,application/json]"
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["binding"].startswith("JSONRPC 0.3"), model["binding"]  # 0.2, spoken as 0.3
