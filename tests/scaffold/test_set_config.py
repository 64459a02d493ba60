"""``bat set.config``, init.agent's model and telemetry flags, and set.env on a literal port:
config.yaml edited in place, comments and every other value kept."""

import os
import stat

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.errors import InputError
from bat.scaffold.config_yaml import KEYS, Setting, edited, parse_settings

CONFIG = """# my agent's settings
agent_card: ./agent.json

checkpoints: true   # keep state

endpoint:
  url: ${PUBLIC_URL}      # advertised
  port: 9000              # a literal, as bat-cli's scaffolds had

model:
  provider: ${MODEL_PROVIDER}
  name: ${MODEL}
  # base_url: http://localhost:8000/v1

telemetry:
  privacy: none
  output:
    - type: local
      file_path: spans.jsonl
"""


@pytest.fixture
def agent_dir(tmp_path, home):
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / ".env").write_text("PORT=9000\n")
    return tmp_path


def loaded(folder):
    return yaml.safe_load((folder / "config.yaml").read_text())


def test_sets_values_in_place_and_adds_missing_ones(agent_dir, bat):
    result = bat(
        "set", "config", "model.reasoning_effort=low", "telemetry.privacy=content",
        "checkpoints=false", "model.service_tier=flex", cwd=agent_dir,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "Set model.reasoning_effort=low in config.yaml" in result.out
    text = (agent_dir / "config.yaml").read_text()
    assert "checkpoints: false  # keep state\n" in text  # the comment in its column
    assert "  privacy: content\n" in text
    assert "  name: ${MODEL}\n  reasoning_effort: low\n  service_tier: flex\n" in text
    assert "  # base_url: http://localhost:8000/v1\n" in text  # comments kept
    before = yaml.safe_load(CONFIG)
    after = loaded(agent_dir)
    before["checkpoints"] = False
    before["telemetry"]["privacy"] = "content"
    before["model"].update(reasoning_effort="low", service_tier="flex")
    assert after == before


def test_a_missing_section_is_added(agent_dir, bat):
    (agent_dir / "config.yaml").write_text("agent_card: ./agent.json\n")
    assert bat("set.config", "model.base_url=http://127.0.0.1:8000/v1", cwd=agent_dir).code == 0
    assert loaded(agent_dir) == {
        "agent_card": "./agent.json",
        "model": {"base_url": "http://127.0.0.1:8000/v1"},
    }


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["model.nope=1"], "'model.nope' is not a config.yaml key bat sets"),
        (["telemetry.privacy=all"], "telemetry.privacy: 'all': use one of none, content"),
        (["endpoint.port=70000"], "endpoint.port:"),
        (["checkpoints=maybe"], "checkpoints: 'maybe': use true or false"),
        (["model.reasoning_effort=Very High"], "not a reasoning effort"),
        (["model.provider=acme"], "unknown model provider"),
        (["oops"], "write KEY=VALUE"),
        (["model.name="], "give a value"),
        (["model.name=a", "model.name=b"], "model.name: given more than once"),
    ],
)
def test_bad_settings_are_one_line_and_change_nothing(agent_dir, bat, args, words):
    result = bat("set.config", *args, cwd=agent_dir)
    assert result.code == 2 and words in result.err and result.err.count("\n") == 1
    assert (agent_dir / "config.yaml").read_text() == CONFIG


def test_a_value_yaml_would_misread_is_quoted(agent_dir, bat):
    assert bat("set.config", "model.service_tier=yes", cwd=agent_dir).code == 0
    assert loaded(agent_dir)["model"]["service_tier"] == "yes"


def test_config_path_of_dotenv_is_the_file_edited(agent_dir, bat):
    (agent_dir / "agents").mkdir()
    (agent_dir / "agents" / "w.yaml").write_text("model:\n  name: x\n")
    (agent_dir / ".env").write_text("CONFIG_PATH=agents/w.yaml\n")
    result = bat("set.config", "model.name=y", cwd=agent_dir)
    assert result.code == 0 and "in agents/w.yaml" in result.out
    assert (agent_dir / "agents" / "w.yaml").read_text() == "model:\n  name: y\n"
    assert (agent_dir / "config.yaml").read_text() == CONFIG


def test_flow_style_and_repeated_keys_are_refused_untouched(agent_dir, bat):
    for text, words in (
        ("model: {name: x}\n", "not written as a block"),
        ("model:\n  name: x\n  name: y\n", "duplicate key"),
        ("- a\n- b\n", "not a mapping"),
        ("telemetry:\n  privacy:\n    - none\n", "holds a block"),
    ):
        (agent_dir / "config.yaml").write_text(text)
        result = bat("set.config", "model.name=z", "telemetry.privacy=full", cwd=agent_dir)
        assert result.code == 2 and words in result.err, (text, result.err)
        assert (agent_dir / "config.yaml").read_text() == text


def test_missing_fifo_device_and_huge_files_are_one_line(agent_dir, bat):
    (agent_dir / "config.yaml").unlink()
    missing = bat("set.config", "model.name=z", cwd=agent_dir)
    assert missing.code == 2 and "config.yaml: no such file" in missing.err
    os.mkfifo(agent_dir / "config.yaml")
    fifo = bat("set.config", "model.name=z", cwd=agent_dir, timeout=10)
    assert fifo.code == 2 and "not a regular file" in fifo.err
    (agent_dir / "config.yaml").unlink()
    os.symlink("/dev/zero", agent_dir / "config.yaml")
    device = bat("set.config", "model.name=z", cwd=agent_dir, timeout=10)
    assert device.code == 2 and "not a regular file" in device.err
    (agent_dir / "config.yaml").unlink()
    (agent_dir / "config.yaml").write_text("# x\n" * 400_000)
    huge = bat("set.config", "model.name=z", cwd=agent_dir)
    assert huge.code == 2 and "may be at most" in huge.err
    (agent_dir / "config.yaml").write_text(
        "a:\n" + "".join(f"{' ' * i}b:\n" for i in range(1, 300))
    )
    deep = bat("set.config", "model.name=z", cwd=agent_dir)
    assert deep.code == 2 and deep.err.count("\n") == 1 and "Traceback" not in deep.err


def test_a_linked_config_is_written_through_keeping_its_mode(tmp_path, bat, home):
    real = tmp_path / "shared.yaml"
    real.write_text(CONFIG)
    real.chmod(0o640)
    (tmp_path / "agent").mkdir()
    os.symlink(real, tmp_path / "agent" / "config.yaml")
    assert bat("set.config", "model.name=z", cwd=tmp_path / "agent").code == 0
    assert (tmp_path / "agent" / "config.yaml").is_symlink()
    assert yaml.safe_load(real.read_text())["model"]["name"] == "z"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_set_env_port_changes_a_literal_endpoint_port_too(agent_dir, bat):
    result = bat("set.env", "--port", "9100", cwd=agent_dir)
    assert result.code == 0, result.err
    assert "Set endpoint.port=9100 in config.yaml too: it held the literal port 9000" in result.out
    assert loaded(agent_dir)["endpoint"]["port"] == 9100
    assert "  port: 9100              # a literal" in (agent_dir / "config.yaml").read_text()
    assert "PORT=9100" in (agent_dir / ".env").read_text()


def test_set_env_port_leaves_a_port_reference_alone(agent_dir, bat):
    (agent_dir / "config.yaml").write_text(CONFIG.replace("port: 9000", "port: ${PORT}"))
    result = bat("set.env", "--port", "9100", cwd=agent_dir)
    assert result.code == 0 and "config.yaml" not in result.out
    assert "port: ${PORT}" in (agent_dir / "config.yaml").read_text()


def test_set_env_port_refused_by_config_changes_no_file(agent_dir, bat):
    (agent_dir / "config.yaml").write_text("endpoint: {port: 9000}\n")
    result = bat("set.env", "--port", "9100", cwd=agent_dir)
    assert result.code == 2 and "edit it by hand" in result.err
    assert (agent_dir / ".env").read_text() == "PORT=9000\n"


def test_init_agent_writes_model_and_privacy_flags_where_bat_adk_reads_them(tmp_path, bat, home):
    result = bat(
        "init.agent", "x", "-o", str(tmp_path), "--privacy", "names",
        "--reasoning-effort", "high", "--service-tier", "flex",
    )  # fmt: skip
    assert result.code == 0, result.err
    config = loaded(tmp_path / "x")
    assert config["telemetry"]["privacy"] == "names"
    assert config["model"]["reasoning_effort"] == "high"
    assert config["model"]["service_tier"] == "flex"
    assert config["model"]["name"] == "${MODEL}"


@pytest.mark.parametrize(
    ("flag", "value"), [("--privacy", "most"), ("--reasoning-effort", "9"), ("--service-tier", "")]
)
def test_init_agent_bad_flag_writes_nothing(tmp_path, bat, home, flag, value):
    result = bat("init.agent", "x", "-o", str(tmp_path), flag, value)
    assert result.code == 2 and result.err.startswith(f"bat: error: {flag}: ")
    assert not (tmp_path / "x").exists()


scalars = st.one_of(
    st.sampled_from(["none", "content", "names", "full"]).map(lambda v: ("telemetry.privacy", v)),
    st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True).map(
        lambda v: ("model.service_tier", v)
    ),
    st.integers(1, 65535).map(lambda v: ("endpoint.port", str(v))),
    st.sampled_from(["true", "false", "True"]).map(lambda v: ("checkpoints", v)),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,20}", fullmatch=True).map(
        lambda v: ("model.name", v)
    ),
)
noise = st.lists(
    st.sampled_from(
        ["# note\n", "\n", "extra: 1\n", "model:\n  name: old  # c\n", "checkpoints: no\n"]
    ),
    max_size=5,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(noise, st.lists(scalars, max_size=4, unique_by=lambda kv: kv[0]))
def test_any_edit_changes_exactly_its_keys_or_is_refused(text, pairs):
    try:
        chosen = parse_settings([f"{key}={value}" for key, value in pairs])
        fresh = edited(text, chosen)
    except InputError as exc:
        assert "\n" not in exc.message
        return
    before = yaml.safe_load(text) or {}
    after = yaml.safe_load(fresh)
    for setting in chosen:
        *parents, last = setting.key.split(".")
        node = after
        for part in parents:
            node = node[part]
        assert node[last] == setting.value
    flat_before = {
        k: v for k, v in before.items() if k not in {s.key.split(".")[0] for s in chosen}
    }
    assert all(after[k] == v for k, v in flat_before.items())


@given(st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_any_key_value_text_parses_or_is_one_line(text):
    try:
        setting = Setting.parse(text)
    except InputError as exc:
        assert exc.message.count("\n") <= text.count("\n")
        return
    assert setting.key in KEYS
