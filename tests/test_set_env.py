"""``bat set.env``: values change in place; everything else stays."""

import pytest

ENV = """# my agent
PORT=9900
MODEL=gpt-4.1-mini  # cheap
MODEL_PROVIDER=openai
OPENAI_API_KEY=sk-keep-me
CUSTOM=1
"""


@pytest.fixture
def agent_dir(tmp_path, home):
    (tmp_path / ".env").write_text(ENV)
    return tmp_path


def test_sets_every_value(agent_dir, bat):
    result = bat(
        "set.env",
        "--port",
        "9911",
        "--model",
        "gpt-4.1",
        "--model-provider",
        "anthropic",
        "--docker-registry",
        "localhost:5000",
        "--repo",
        "team/agent",
        cwd=agent_dir,
    )
    assert result.code == 0, result.err
    assert (agent_dir / ".env").read_text() == (
        ENV.replace("PORT=9900", "PORT=9911")
        .replace("MODEL=gpt-4.1-mini", "MODEL=gpt-4.1")
        .replace("MODEL_PROVIDER=openai", "MODEL_PROVIDER=anthropic")
        + "BAT_DOCKER_REGISTRY=localhost:5000\nBAT_DOCKER_REPO=team/agent\n"
    )


def test_both_spellings(agent_dir, bat):
    assert bat("set", "env", "--port", "1234", cwd=agent_dir).code == 0
    assert "PORT=1234\n" in (agent_dir / ".env").read_text()


def test_no_env_file_is_refused(tmp_path, bat, home):
    result = bat("set.env", "--port", "1", cwd=tmp_path)
    assert result.code == 2 and ".env" in result.err and result.err.count("\n") == 1
    assert not (tmp_path / ".env").exists()


def test_no_value_is_refused(agent_dir, bat):
    result = bat("set.env", cwd=agent_dir)
    assert result.code == 2 and "nothing to set" in result.err
    assert (agent_dir / ".env").read_text() == ENV


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "0"],
        ["--port", "http"],
        ["--model-provider", "acme"],
        ["--docker-registry", "https://localhost:5000"],
        ["--repo", "Upper/Case"],
        ["--model", ""],
    ],
)
def test_bad_values_change_nothing(agent_dir, bat, args):
    result = bat("set.env", "--port", "9999", *args, cwd=agent_dir)
    assert result.code == 2 and result.err.startswith("bat: error: ")
    assert (agent_dir / ".env").read_text() == ENV


def test_env_that_is_a_directory_is_refused(tmp_path, bat, home):
    (tmp_path / ".env").mkdir()
    assert bat("set.env", "--port", "1", cwd=tmp_path).code == 2
