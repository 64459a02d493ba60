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


# -- the user's file, however it is set up, is never damaged ----------------------------

import os  # noqa: E402
import stat  # noqa: E402
import string  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bat.dotenv import parse_env  # noqa: E402
from tests.conftest import run_bat  # noqa: E402


def one_error_line(result, *words):
    assert result.code == 2, result.err
    assert result.err.startswith("bat: error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    for word in words:
        assert word in result.err


def test_read_only_env_is_refused_and_left_alone(agent_dir, bat):
    path = agent_dir / ".env"
    os.chmod(path, 0o400)
    result = bat("set.env", "--port", "9911", cwd=agent_dir)
    one_error_line(result, ".env: the file is read-only (mode 0400)", "chmod u+w")
    assert path.read_text() == ENV and stat.S_IMODE(path.stat().st_mode) == 0o400


def test_symlinked_env_is_written_through_and_keeps_the_targets_mode(tmp_path, bat, home):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    target = secrets / "agent.env"
    target.write_text(ENV)
    os.chmod(target, 0o640)
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / ".env").symlink_to("../secrets/agent.env")
    result = bat("set.env", "--port", "9911", cwd=agent)
    assert result.code == 0, result.err
    assert (agent / ".env").is_symlink()
    assert os.readlink(agent / ".env") == "../secrets/agent.env"
    assert target.read_text() == ENV.replace("PORT=9900", "PORT=9911")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in secrets.iterdir()) == ["agent.env"]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"PORT=1\nOPENAI_API_KEY=sk-\xff\xfe\n", "OPENAI_API_KEY (line 2): byte 0xff"),
        (b"PORT=1\nOPENAI_API_KEY=sk\x00x\n", "OPENAI_API_KEY (line 2): contains a NUL byte"),
        (b'PORT=1\nNOTE="two\nlines"\n', "NOTE (line 2): the quote of the value is not closed"),
    ],
)
def test_env_bat_cannot_read_is_refused_and_left_alone(tmp_path, bat, home, data, words):
    (tmp_path / ".env").write_bytes(data)
    one_error_line(bat("set.env", "--port", "2", cwd=tmp_path), f"error: .env: {words}")
    assert (tmp_path / ".env").read_bytes() == data


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--model", "gpt=4"], "--model: invalid model name 'gpt=4'"),
        (["--model", "gpt\n4"], "--model: invalid model name 'gpt\\n4'"),
        (["--model", "gpt\x014"], "--model: invalid model name 'gpt\\x014'"),
        (["--model", "${HOME}"], "--model: invalid model name"),
        (["--port", "٣"], "--port: '٣' is not a port number (1-65535)"),
        (["--port", "99999"], "--port: '99999' is not a port number (1-65535)"),
        (["--port", "80 80"], "--port: '80 80' is not a port number (1-65535)"),
        (
            ["--docker-registry", "reg.io:70000"],
            "--docker-registry: invalid Docker registry 'reg.io:70000': '70000' is not a port",
        ),
        (["--repo", "a=b"], "--repo: invalid Docker repository"),
        (["--docker-registry", "reg\n.io"], "--docker-registry: invalid Docker registry"),
    ],
)
def test_bad_values_name_the_flag(agent_dir, bat, args, words):
    one_error_line(bat("set.env", *args, cwd=agent_dir), words)
    assert (agent_dir / ".env").read_text() == ENV


def test_env_that_is_a_directory_says_so(tmp_path, bat, home):
    (tmp_path / ".env").mkdir()
    one_error_line(bat("set.env", "--port", "1", cwd=tmp_path), ".env: not a regular file")


_ENV_LINES = st.one_of(
    st.sampled_from(["PORT=9900", "# PORT=1", "export MODEL='x y'", 'K="a\\"b" # c', ""]),
    st.text(alphabet=string.printable + "é\x00\x85\u2028", max_size=12),
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    lines=st.lists(_ENV_LINES, max_size=4),
    tail=st.binary(max_size=3),
    port=st.text(alphabet="0123456789 x٣", min_size=1, max_size=6),
)
def test_fuzzed_env_through_bat_round_trips_or_is_refused(tmp_path_factory, lines, tail, port):
    """Whatever the file and flag, ``bat set.env`` sets the value or changes no byte."""
    folder = tmp_path_factory.mktemp("agent")
    data = "\n".join(lines).encode("utf-8") + tail
    (folder / ".env").write_bytes(data)
    result = run_bat("set.env", "--port", port, cwd=folder, env={"HOME": str(folder)})
    assert "Traceback" not in result.err
    if result.code != 0:
        one_error_line(result)
        assert (folder / ".env").read_bytes() == data
        return
    before, after = parse_env(data.decode()), parse_env((folder / ".env").read_text())
    assert after == {**before, "PORT": str(int(port))}


def test_the_dockerfile_follows_port_model_and_provider(tmp_path, bat, home):
    """An image has no .env: its ENV block must say what .env says, or the container
    listens on the old port and answers with the old model."""
    assert bat("init.agent", "boxed", "-o", str(tmp_path), "--port", "9900").code == 0
    agent = tmp_path / "boxed"
    before = (agent / "Dockerfile").read_text()
    result = bat("set.env", "--port", "9911", "--model", "gpt-4.1", cwd=agent)
    assert result.code == 0, result.err
    assert "Set PORT, MODEL in the Dockerfile's settings block" in result.out
    after = (agent / "Dockerfile").read_text()
    assert "ENV PORT=9911 \\\n    MODEL=gpt-4.1 \\\n    MODEL_PROVIDER=openai\n" in after
    assert "\nEXPOSE 9911\n" in after and "9900" not in after
    # Nothing outside the block changed.
    outside = before.split("# >>> bat: settings")[0], before.split("# <<< bat: settings <<<")[1]
    assert after.startswith(outside[0]) and after.endswith(outside[1])
    # The provider alone: the block keeps the port and model it has.
    assert bat("set.env", "--model-provider", "anthropic", cwd=agent).code == 0
    assert (
        "MODEL=gpt-4.1 \\\n    MODEL_PROVIDER=anthropic\nEXPOSE 9911\n"
        in (agent / "Dockerfile").read_text()
    )


def test_a_dockerfile_without_the_block_is_left_and_named(agent_dir, bat):
    (agent_dir / "Dockerfile").write_text("FROM mine\nEXPOSE 9900\n")
    result = bat("set.env", "--port", "9911", cwd=agent_dir)
    assert result.code == 0
    assert (agent_dir / "Dockerfile").read_text() == "FROM mine\nEXPOSE 9900\n"
    assert "Dockerfile has no bat settings block: set PORT there yourself" in result.err
    # Settings the image does not carry leave the Dockerfile alone, without a note.
    assert bat("set.env", "--repo", "team/a", cwd=agent_dir).err == ""


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: path.write_bytes(b"\xff\xfe not text"), "Dockerfile: byte 0 is not UTF-8"),
        (lambda path: path.chmod(0o400), "Dockerfile: the file is read-only"),
    ],
)
def test_a_dockerfile_bat_cannot_update_stops_before_env_changes(
    tmp_path, bat, home, damage, message
):
    assert bat("init.agent", "stuck", "-o", str(tmp_path)).code == 0
    agent = tmp_path / "stuck"
    damage(agent / "Dockerfile")
    env_before = (agent / ".env").read_bytes()
    dockerfile_before = (agent / "Dockerfile").read_bytes()
    result = bat("set.env", "--port", "9911", cwd=agent)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert result.err.startswith("bat: error: ") and message in result.err
    assert (agent / ".env").read_bytes() == env_before
    assert (agent / "Dockerfile").read_bytes() == dockerfile_before
