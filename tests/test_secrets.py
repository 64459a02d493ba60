"""No secret on disk or on the console: URL credentials, judge keys and env values.

A real run of the tool fixture agent, judged by the scripted model server over HTTP.
Every secret is given the way a user gives it (a password in ``judge.base_url`` and in
``models[].base_url``, a key in a query string, values in ``env`` maps, the judge's key
in ``.env``), and the judge server misbehaves the way a hostile or careless one would:
it echoes the Authorization header it got, in an error body and inside a valid
judgement. Afterwards every file bat wrote and everything it printed is searched for
each secret; files that can hold one must be readable by their owner only.
"""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bat.secrets import REDACTED, Scrubber, display_url, url_secrets
from tests.evalkit import make_project, run_dirs, start_model_server

DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)
CONFIG = """agent_card: ./agent.json
checkpoints: true
endpoint:
  url: http://localhost
  port: ${PORT}
telemetry:
  privacy: none
  output:
    - type: local
      file_path: my-own-spans.jsonl
"""

JUDGE_USER, JUDGE_PASS = "juser", "judge-pass-Z9x8"
JUDGE_KEY = "sk-judge-KEY-77a1b2c3"
MODEL_PASS = "model-pass-Q4w5e6"
QUERY_KEY = "query-key-3k4j5h"
ENV_TOKEN = "env-token-R7t6y5"
AGENT_KEY = "agent-key-P0o9i8"
SECRETS = {
    "judge password": JUDGE_PASS,
    "judge Basic credentials": base64.b64encode(f"{JUDGE_USER}:{JUDGE_PASS}".encode()).decode(),
    "judge key": JUDGE_KEY,
    "model password": MODEL_PASS,
    "query key": QUERY_KEY,
    "model env value": ENV_TOKEN,
    "agent env value": AGENT_KEY,
}


def echoing_judgement() -> str:
    """A raw HTTP body: a valid chat completion whose judgement repeats the request's
    Authorization header in its reasoning (the server fills ``{authorization}`` in)."""
    judgement = {d: {"reasoning": "I saw {authorization} here", "score": 0.5} for d in DIMENSIONS}
    message = {"role": "assistant", "content": json.dumps(judgement)}
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


def set_judge(project, base_url: str, model: str) -> None:
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True
    config["judge"] = {
        "provider": "openai",
        "model": model,
        "base_url": base_url,
        "api_key_env": "JUDGE_KEY",
        "max_retries": 0,
    }
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def leaks(texts: dict[str, str]) -> list[str]:
    """``where: which secret`` for every secret found in any of ``texts``."""
    return [
        f"{where}: {name}"
        for where, text in texts.items()
        for name, secret in SECRETS.items()
        if secret in text
    ]


def written_files(folder) -> dict[str, str]:
    return {
        str(path): path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def test_no_secret_in_any_file_or_output_of_a_judged_run(tmp_path, bat, home):
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            [
                # one task's judgement fails with an error body that echoes the header
                {"match": "calculate 6", "status": 401, "body": "denied for {authorization}"},
                {"body": echoing_judgement()},
            ]
        )
    )
    server, url = start_model_server(rules)
    try:
        project = make_project(
            tmp_path / "p",
            "tool_tasks.json",
            agent="tool_agent",
            config_yaml=CONFIG,
            agent_env={"AGENT_API_KEY": AGENT_KEY},
            models=[
                {
                    "name": "m1",
                    "provider": "openai",
                    "model": "scripted",
                    "base_url": f"http://muser:{MODEL_PASS}@127.0.0.1:1/v1?api_key={QUERY_KEY}",
                    "env": {"SERVICE_TOKEN": ENV_TOKEN},
                }
            ],
        )
        os.chmod(project / "config.yaml", 0o600)
        host = url.removeprefix("http://")
        set_judge(project, f"http://{JUDGE_USER}:{JUDGE_PASS}@{host}/v1", "judge-basic")
        (project / ".env").write_text(f"JUDGE_KEY={JUDGE_KEY}\n")
        outputs = {}
        result = bat("eval.run", cwd=project, timeout=240)
        assert result.code == 0, result.err
        outputs["eval.run"] = result.out + result.err
        (run_dir,) = run_dirs(project)
        # The server did see the real credentials: they were used, only not written.
        first = json.loads((run_dir / "m1/episodes/tool-weather__try1.json").read_text())
        reasoning = first["scores"]["dimensions"]["response_relevance"]["reasoning"]
        assert reasoning == f"I saw Basic {REDACTED} here"
        # Another judge without a password in its URL: its Bearer key is echoed.
        set_judge(project, f"{url}/v1", "judge-bearer")
        result = bat("eval.judge", "--run", run_dir.name, cwd=project, timeout=120)
        assert result.code == 0, result.err
        outputs["eval.judge"] = result.out + result.err
        first = json.loads((run_dir / "m1/episodes/tool-weather__try1.json").read_text())
        reasoning = first["scores"]["dimensions"]["response_relevance"]["reasoning"]
        assert reasoning == f"I saw Bearer {REDACTED} here"
        failed = json.loads((run_dir / "m1/episodes/tool-calculator__try1.json").read_text())
        assert "HTTP 401 from http://127.0.0.1" in failed["scores"]["error"]
        assert REDACTED in failed["scores"]["error"]
        assert "first error" in result.out and "HTTP 401" in result.out
        for command in ("eval.summarize", "eval.plot", "eval.verdict"):
            result = bat(command, cwd=project, timeout=120)
            assert result.code == 0, (command, result.err)
            outputs[command] = result.out + result.err
        for args in (["eval.show"], ["eval.show", "--json"]):
            result = bat(*args, cwd=project)
            assert result.code == 0, result.err
            outputs[" ".join(args)] = result.out + result.err
        assert f"http://127.0.0.1:1/v1?api_key={REDACTED}" in outputs["eval.show"]
        files = written_files(project / "eval" / "output")
        assert any(name.endswith("report.html") for name in files)
        assert any("judge-cache" in name for name in files)
        assert leaks(files) == []
        assert leaks(outputs) == []
        # The run records its config, by key only where values may be secret.
        record = json.loads((run_dir / "run.json").read_text())
        assert record["config"]["models"][0]["env"] == ["SERVICE_TOKEN"]
        assert record["config"]["models"][0]["base_url"].startswith("http://127.0.0.1:1/v1?")
        assert record["config"]["judge"][0]["base_url"] == f"{url}/v1"
        # Every file that can hold a secret is private to its owner.
        private = [run_dir / "run.json", run_dir / "m1" / "agent-config.yaml"]
        private += sorted((run_dir / "judge-cache").glob("*.json"))
        private += sorted(run_dir.rglob("agent-*.log"))  # what the agent printed
        assert len(private) > 3
        for path in private:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_console_error_naming_an_agent_url_shows_no_password(tmp_path, bat, home):
    """An agent that does not answer: the error names its URL, without the password;
    eval.show shows the agent's and the judge's URLs without theirs."""
    project = make_project(tmp_path, "tool_tasks.json", start=False)
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["agent_url"] = "http://auser:agent-url-pass-9@127.0.0.1:1"
    config["judge"] = {"model": "j", "base_url": "http://juser:judge-url-pass-8@127.0.0.1:2/v1"}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", cwd=project)
    assert result.code == 2, result.err
    assert "no agent answers at http://127.0.0.1:1 " in result.err
    shown = bat("eval.show", cwd=project)
    assert shown.code == 0 and "http://127.0.0.1:1 " in shown.out
    as_json = bat("eval.show", "--json", cwd=project)
    view = json.loads(as_json.out)
    assert view["agent"]["url"] == "http://127.0.0.1:1"
    assert view["judges"][0]["base_url"] == "http://127.0.0.1:2/v1"
    everything = result.out + result.err + shown.out + shown.err + as_json.out + as_json.err
    everything += "".join(written_files(project / "eval" / "output").values())
    assert "agent-url-pass-9" not in everything and "judge-url-pass-8" not in everything
    assert "auser" not in everything and "juser" not in everything


@pytest.mark.parametrize(
    "url", ["http://auser:bad-url-pass-7@127.0.0.1:0", "http://auser:bad-url-pass-7@[x:1/v1"]
)
def test_an_invalid_url_is_refused_without_its_password(tmp_path, bat, home, url):
    """The error that quotes a bad agent_url or base_url leaves its credentials out."""
    project = make_project(tmp_path, "tool_tasks.json", start=False)
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["agent_url"] = url
    config["judge"] = {"model": "j", "base_url": url}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.show", cwd=project)
    assert result.code == 2, result.err
    assert result.err.count("agent_url") == 1 and "judge.base_url" in result.err
    assert "bad-url-pass-7" not in result.err and "auser" not in result.err


# --- the two tools, on their own ------------------------------------------------------------

_part = st.text(alphabet="abcdefghijkXYZ0123456789-._~", min_size=4, max_size=12)


@given(user=_part, password=_part, key=_part, plain=_part)
def test_display_url_drops_credentials_and_keeps_the_rest(user, password, key, plain):
    url = f"https://{user}:{password}@example.org:8443/v1/x?api_key={key}&model={plain}"
    shown = display_url(url)
    assert shown == f"https://example.org:8443/v1/x?api_key={REDACTED}&model={plain}"
    found = url_secrets(url)
    assert password in found and key in found
    assert Scrubber(found).text(f"a {password} b {key}") == f"a {REDACTED} b {REDACTED}"


def test_display_url_keeps_a_url_without_credentials():
    for url in ("http://127.0.0.1:8000/v1", "https://api.openai.com/v1", None, ""):
        assert display_url(url) == url
    assert display_url("http://tok3n-value@host/v1") == "http://host/v1"
    assert "tok3n-value" in url_secrets("http://tok3n-value@host/v1")


def test_scrubber_keeps_the_shape_of_data_and_leaves_short_values_alone():
    scrub = Scrubber(["s3cret-value", "on"])
    data = {"a": ["x s3cret-value y", 1, True, None], "s3cret-value": 2.5, "b": "on and on"}
    assert scrub.data(data) == {
        "a": [f"x {REDACTED} y", 1, True, None],
        REDACTED: 2.5,
        "b": "on and on",
    }
