"""The fuzz suite: every parser of bat, fed broken input, ends cleanly.

For each generated input the real program runs (in-process for speed, see
tests/fuzzkit.py; a few cases through the console script) and must end with exit 0 (the
input is accepted) or exit 2 with exactly one ``bat: error:`` headline; never a
traceback or a hang, no file written outside the scratch folder, and no file already in
it changed. Inputs start from what the real code writes (``bat init.agent``, ``bat
eval.init``) and are mutated structurally; random ones are mixed in.

Hypothesis runs derandomized and without an example database, so CI sees the same
examples every time; FUZZ_SCALE=10 runs ten times as many (a deeper local search).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import math
import os
import re
import resource
import shutil
import subprocess
import tempfile
import threading
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bat.errors import BatError
from tests import fuzzkit as fk
from tests.conftest import BAT

SCALE = float(os.environ.get("FUZZ_SCALE", "1"))


def fuzz(examples: int):
    """Hypothesis settings of this suite: deterministic, no database, no deadline."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        # No "explain" phase: it traces every line, and bat runs 10x slower under it.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


# -- the valid inputs, written by the real code ------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A project written by ``bat init.agent demo`` then ``bat eval.init`` (console script)."""
    root = tmp_path_factory.mktemp("fuzz-base")
    home = root / "home"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BAT_")}, "HOME": str(home)}
    for args, cwd in ((["init.agent", "demo"], root), (["eval.init"], root / "demo")):
        proc = subprocess.run(
            [str(BAT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
    return root / "demo"


@contextlib.contextmanager
def scratch(base_project: Path, *, config_yaml: bool = True):
    """A fresh scratch folder: ``home/`` and ``project/`` (a copy of the base project)."""
    root = Path(tempfile.mkdtemp(prefix="fuzz-", dir=base_project.parent))
    try:
        (root / "home").mkdir()
        shutil.copytree(base_project, root / "project", symlinks=True)
        if not config_yaml:
            (root / "project" / "config.yaml").unlink()
        yield root
    finally:
        for dirpath, dirnames, _ in os.walk(root):  # mode 0 folders must not stop the clean-up
            for name in dirnames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(root, ignore_errors=True)


def run_and_check(
    root: Path, argv: list[str], what: str, *, env=None, cwd=None, allowed=(), accepted=(0,)
):
    """Run ``bat ARGV`` in the scratch project; check the rules; return the outcome."""
    before = fk.snapshot(root)
    outcome = fk.run_in_process(argv, cwd=cwd or root / "project", scratch=root, env=env)
    fk.check_outcome(outcome, what, accepted=accepted)
    after = fk.snapshot(root)
    changed = fk.changed_files(before, after, allowed=allowed if outcome.code == 0 else ())
    assert not changed, f"{what}\n{outcome.describe()}\nchanged: {changed}"
    return outcome


def maybe_bytes(draw, data: bytes) -> bytes:
    """``data`` as it is (most of the time) or broken at the byte level."""
    return draw(st.one_of(st.just(data), st.just(data), fk.byte_mutations(data)))


def shown(data: bytes, limit: int = 600) -> str:
    return repr(data[:limit]) + (f" … ({len(data)} bytes)" if len(data) > limit else "")


# -- the kit's own checks can fail ---------------------------------------------------


def test_write_watch_sees_every_kind_of_write(tmp_path):
    """The audit hook catches writes outside the scratch folder (open, os.open, rename,
    mkdir, delete), and only those: a watch that saw nothing would pass every input."""
    inside, outside = tmp_path / "scratch", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    with fk.WriteWatch(inside) as watch:
        (inside / "a").write_text("fine")
        (inside / "a").read_text()
        (outside / "b").write_text("caught")
        os.close(os.open(outside / "c", os.O_WRONLY | os.O_CREAT))
        os.rename(inside / "a", outside / "d")
        (outside / "e").mkdir()
        (outside / "b").unlink()
        (outside / "c").read_bytes()  # reading is not writing
    assert sorted(Path(p).name for p in watch.outside) == ["b", "b", "c", "d", "e"]


def test_check_outcome_refuses_what_the_suite_forbids(tmp_path):
    """A clean in-process refusal passes the rules; a traceback or two headlines do not."""
    (tmp_path / "home").mkdir()
    outcome = fk.run_in_process(["--no-such-flag"], cwd=tmp_path, scratch=tmp_path)
    assert outcome.code == 2 and outcome.err.startswith("bat: error:"), outcome.describe()
    fk.check_outcome(outcome, "an unknown flag")
    with pytest.raises(AssertionError):
        fk.check_outcome(fk.Outcome(-1, "", "Traceback (most recent call last):\n", []), "x")
    with pytest.raises(AssertionError):
        fk.check_outcome(fk.Outcome(2, "", "bat: error: a\nbat: error: b\n", []), "x")


# -- eval.yaml ------------------------------------------------------------------------


@fuzz(40)
@given(data=st.data())
def test_eval_yaml(base, data):
    """eval.yaml, as ``bat eval.init`` wrote it and mutated, checked by ``bat eval.show``."""
    doc = yaml.safe_load((base / "eval" / "eval.yaml").read_text())
    text = maybe_bytes(data.draw, fk.to_yaml(fk.mutate(doc, data.draw)))
    with scratch(base) as root:
        (root / "project" / "eval" / "eval.yaml").write_bytes(text)
        run_and_check(root, ["eval.show"], f"eval/eval.yaml:\n{shown(text)}")


@fuzz(20)
@given(
    data=st.data(),
    extra=st.sampled_from(
        [
            fk.nested_yaml(5000),
            "evaluation: " + fk.nested_yaml(3000),
            fk.alias_bomb(4, 4) + "evaluation: {k: *a3}\n",
            "evaluation: &e {k: 1}\nevaluation: *e\n",
            "evaluation:\n  k: 1\n  k: 2\n",
            "evaluation: !!python/object/apply:os.system ['true']\n",
            "evaluation: {dataset: !!binary AAAA}\n",
            "%YAML 9.9\n---\nevaluation: {}\n",
            "--- {}\n--- {}\n",
            "evaluation: {k: true, concurrency: .inf, turn_timeout_s: .nan}\n",
            "evaluation: {agent_url: 'http://127.0.0.1:99999'}\n",
            "evaluation: {agent_url: 'http://127.0.0.1:0'}\n",
            "evaluation: {agent_url: 'http://[::1'}\n",
            "evaluation: {agent: {env: {'A=B': x, 'C': \"\\0\"}}}\n",
            "evaluation: {dataset: /dev/null}\n",
            "evaluation: {dataset: /}\n",
            "evaluation: {dataset: eval}\n",
            "\t",
            "evaluation: 1\nmodels: 2\njudge: []\n",
            "user: {script: /dev/zero}\n",
            "user: {script: ../../../../etc/passwd}\n",
            "user: {temperature: .nan, seed: -1, concurrency: 0}\n",
            "user: {script: x.yaml, base_url: 'http://127.0.0.1:1'}\n",
            "user: " + fk.nested_yaml(3000),
        ]
    ),
)
def test_eval_yaml_known_traps(base, data, extra):
    """Hand-picked traps (deep nesting, aliases, duplicate keys, tags, ports, env) spliced
    into a valid eval.yaml."""
    valid = (base / "eval" / "eval.yaml").read_bytes()
    text = data.draw(st.sampled_from([extra.encode(), valid + b"\n" + extra.encode()]))
    with scratch(base) as root:
        (root / "project" / "eval" / "eval.yaml").write_bytes(text)
        run_and_check(root, ["eval.show"], f"eval/eval.yaml:\n{shown(text)}")


# -- tasks.json -----------------------------------------------------------------------


@fuzz(40)
@given(data=st.data())
def test_tasks_json(base, data):
    """tasks.json, as ``bat eval.init`` wrote it and mutated, checked by ``bat eval.show``."""
    doc = json.loads((base / "eval" / "input" / "tasks.json").read_text())
    text = maybe_bytes(data.draw, fk.to_json(fk.mutate(doc, data.draw)))
    with scratch(base) as root:
        (root / "project" / "eval" / "input" / "tasks.json").write_bytes(text)
        run_and_check(root, ["eval.show"], f"eval/input/tasks.json:\n{shown(text)}")


@fuzz(15)
@given(
    text=st.sampled_from(
        [
            fk.nested_json(500),
            fk.nested_json(100_000),
            '[{"id": "a", "turns": ["x"], "meta": ' + fk.nested_json(5000) + "}]",
            '[{"id": "a", "id": "b", "turns": ["x"]}]',
            '[{"id": "a", "turns": ["x"], "expected": {"max_tokens": 1' + "0" * 5000 + "}}]",
            '[{"id": "a", "turns": ["x"], "expected": {"max_tokens": 1e999}}]',
            '[{"id": "a", "turns": ["x"], "expected": {"max_tokens": NaN}}]',
            '[{"id": "a", "turns": ["x"], "expected": {"output_regex": "(a"}}]',
            '[{"id": "a", "turns": []}]',
            '[{"id": "a", "turns": [{"message": "x", "expect": ' + fk.nested_json(5000) + "}]}]",
            '[{"id": "a", "turns": [{"message": "x", "expect": {"files_created": ["../x"]}}]}]',
            '[{"id": "a", "turns": [{"message": "x", "expect": {"nope": 1}}, {"expect": {}}]}]',
            '[{"id": "a", "turns": ["x", {"message": "{{ prev.git_diff }}", "expect": null}]}]',
            '[{"id": "a", "user": ' + fk.nested_json(5000) + "}]",
            '[{"id": "a", "user": {"instructions": "' + "x" * 30_000 + '"}}]',
            '[{"id": "a", "user": {"instructions": "x", "max_turns": 0}}]',
            '[{"id": "a", "user": {"instructions": "x", "max_turns": 1e999}}]',
            '[{"id": "a", "turns": ["x", "y"], "user": {"instructions": "x", "max_turns": 2}}]',
            '[{"id": "a", "user": "x"}, {"id": "b", "user": null}]',
            '[{"id": "a", "turns": ["x"], "expected": {"assertions_in_verdict": true}}]',
            '[{"id": "a", "turns": ["x"], "expected": {"assertions": [""]}}]',
            "[]",
            "{}",
            "null",
            "",
            '"\\ud800"',
            '[{"id": "\\ud800", "turns": ["x"]}]',
        ]
    )
)
def test_tasks_json_known_traps(base, text):
    """Hand-picked traps: deep nesting, duplicate keys, huge numbers, bad regexes."""
    with scratch(base) as root:
        (root / "project" / "eval" / "input" / "tasks.json").write_text(text)
        run_and_check(root, ["eval.show"], f"eval/input/tasks.json:\n{text[:3000]!r}")


# -- belt scenario groups (a dataset folder) ------------------------------------------

BELT_EXAMPLE = Path(__file__).parent.parent / "eval_fixtures" / "datasets" / "belt_group"


def _belt_documents() -> dict:
    return {
        name: json.loads((BELT_EXAMPLE / name).read_text())
        for name in ("_config.json", "notes_two_turns.json")
    }


@fuzz(30)
@given(files=fk.belt_group_files(_belt_documents()))
def test_belt_group_dataset(base, files):
    """A belt group as eval.yaml's dataset, its files mutated, checked by ``bat eval.show``."""
    with scratch(base) as root:
        project = root / "project"
        folder = project / "eval" / "input" / "belt"
        shutil.copytree(BELT_EXAMPLE, folder)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        eval_yaml = project / "eval" / "eval.yaml"
        doc = yaml.safe_load(eval_yaml.read_text())
        doc.setdefault("evaluation", {})["dataset"] = "eval/input/belt"
        eval_yaml.write_text(yaml.safe_dump(doc, sort_keys=False))
        shown_files = "\n".join(f"{name}:\n{shown(data)}" for name, data in files.items())
        run_and_check(root, ["eval.show"], f"eval/input/belt:\n{shown_files}")


# -- task ids -------------------------------------------------------------------------

task_ids = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.sampled_from(fk.CONTROL + "a/_-. "), min_size=1, max_size=10),
    st.sampled_from(
        ["a/b", "a_b-c14cddc0", "..", ".", "/", "CON", "a" * 500, "\U0001f600" * 60, " a", "a "]
    ),
)


def is_unprintable(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cs") or char in "\ufffe\uffff"


@fuzz(40)
@given(ids=st.lists(task_ids, min_size=1, max_size=3))
def test_task_ids(base, ids):
    """Any task ids: accepted or one clean error; an id with a control character (ESC,
    NUL, U+FFFE, ...) is refused, since it broke the chart renderer of every later run."""
    tasks = json.loads((base / "eval" / "input" / "tasks.json").read_text())
    for task, task_id in zip(tasks, ids, strict=False):
        task["id"] = task_id
    text = fk.to_json(tasks)
    with scratch(base) as root:
        (root / "project" / "eval" / "input" / "tasks.json").write_bytes(text)
        outcome = run_and_check(root, ["eval.show"], f"task ids {ids!r}")
        if any(is_unprintable(c) for task_id in ids for c in task_id):
            assert outcome.code == 2, f"task ids {ids!r} accepted\n{outcome.describe()}"


# -- bat.yaml, ~/.bat.yaml, -f files and BAT_* variables ----------------------------


def settings_document() -> dict:
    """Every documented setting with its default, from the command groups' own defaults."""
    from bat.tasks import ns

    doc = json.loads(json.dumps(ns.configuration()))
    doc["init"] = {
        "agent": {
            "output_dir": ".",
            "clients": "assistant",
            "port": 9900,
            "model": "gpt-4.1-mini",
            "model_provider": "openai",
        }
    }
    doc["eval"] = {"file": "eval/eval.yaml", "image": None}
    return doc


def setting_keys() -> list[str]:
    """``INIT_AGENT_PORT``, ...: the leaf keys of :func:`settings_document`, upper case."""
    doc = settings_document()
    keys = []
    for path in fk.paths(doc):
        value = doc
        for step in path:
            value = value[step]
        if path and not isinstance(value, dict):
            keys.append("_".join(path).upper())
    return keys


COMMANDS = [["eval.show"], ["version"], ["init.agent", "fz", "--output-dir", "o"]]


@fuzz(40)
@given(
    data=st.data(),
    layer=st.sampled_from(["project", "user", "-f yaml", "-f json"]),
    command=st.sampled_from(COMMANDS),
)
def test_settings_files(base, data, layer, command):
    """bat.yaml, ~/.bat.yaml and -f files: every documented key, mutated."""
    doc = fk.mutate(settings_document(), data.draw)
    doc = _keep_output_inside(doc)
    body = fk.to_json(doc) if layer == "-f json" else fk.to_yaml(doc)
    text = maybe_bytes(data.draw, body)
    with scratch(base) as root:
        argv = list(command)
        if layer == "project":
            (root / "project" / "bat.yaml").write_bytes(text)
        elif layer == "user":
            (root / "home" / ".bat.yaml").write_bytes(text)
        else:
            name = "settings.json" if layer == "-f json" else "settings.yaml"
            (root / "project" / name).write_bytes(text)
            argv = ["-f", name, *argv]
        run_and_check(root, argv, f"{layer} settings:\n{shown(text)}\ncommand: bat {argv}")


def _keep_output_inside(doc):
    """init.agent writes where output_dir says: the suite keeps that inside the scratch
    folder (writing where the user asked is not a fault)."""
    if isinstance(doc, dict) and isinstance(doc.get("init"), dict):
        agent = doc["init"].get("agent")
        if isinstance(agent, dict) and "output_dir" in agent:
            agent["output_dir"] = "o"
    return doc


@fuzz(30)
@given(
    env=st.dictionaries(
        st.sampled_from(
            [k for k in setting_keys() if k != "INIT_AGENT_OUTPUT_DIR"] + ["NOT_A_SETTING", ""]
        ).map(lambda key: f"BAT_{key}"),
        fk.weird_text.filter(lambda v: "\x00" not in v),
        min_size=1,
        max_size=3,
    ),
    command=st.sampled_from(COMMANDS),
)
def test_settings_environment(base, env, command):
    """BAT_* variables with any value (a NUL cannot be in an environment at all)."""
    with scratch(base) as root:
        run_and_check(root, command, f"environment {env!r}\ncommand: bat {command}", env=env)


BOOLEAN_WORDS = ["false", "no", "off", "0", "False", "YES"]


@pytest.mark.parametrize(
    ("value", "source"),
    [(word, "env") for word in [*BOOLEAN_WORDS, "maybe", "2", "falsch"]]
    + [("false", "file"), ("off", "file"), ("maybe", "file"), ("", "file")],
)
def test_booleans_are_strict(base, value, source):
    """A boolean setting is read strictly (issue 9: ``false`` turned trust-on-first-use
    on). A known word is accepted (the build then fails to reach the closed port 1, exit
    1); any other word is an error naming the setting, before anything is attempted."""
    with scratch(base) as root:
        env = {}
        if source == "env":
            env["BAT_IMAGES_ACCEPT_NEW_HOST_KEY"] = value
        else:
            (root / "project" / "bat.yaml").write_text(
                yaml.safe_dump({"images": {"accept_new_host_key": value}})
            )
        argv = ["build", "--host", "127.0.0.1:1", "--version", "1", "--repo", "x"]
        what = f"accept_new_host_key={value!r} from {source}"
        outcome = run_and_check(root, argv, what, env=env, accepted=(1,))
        if value in BOOLEAN_WORDS:
            assert outcome.code == 1 and "127.0.0.1:1" in outcome.err, what
        else:
            assert outcome.code == 2, f"{what}: accepted\n{outcome.describe()}"
            assert "accept_new_host_key" in outcome.err.lower(), outcome.err


# -- .env -----------------------------------------------------------------------------

env_lines = st.one_of(
    st.sampled_from(
        [
            "PORT=99999",
            "PORT=0",
            "PORT=abc",
            "PORT=",
            "PORT",
            "=value",
            "export PORT=9901",
            'PORT="9901',
            "PORT='9901'",
            "PORT=9901 # inline",
            "A B=1",
            "K=\x00",
            "\x00=1",
            "BAT_DOCKER_REGISTRY=::",
            "OPENAI_API_KEY=sk-secret",
            "\ufeffPORT=1",
        ]
    ),
    st.text(max_size=40).filter(lambda s: "\n" not in s and "\r" not in s),
)


@st.composite
def dotenv_text(draw, valid: bytes) -> bytes:
    lines = valid.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines)))
        line = draw(env_lines).encode("utf-8", "surrogatepass") + b"\n"
        lines.insert(at, line)
    return maybe_bytes(draw, b"".join(lines))


set_env_options = st.sampled_from(
    ["--port", "--model", "--model-provider", "--docker-registry", "--repo"]
)


@fuzz(40)
@given(
    data=st.data(),
    option=set_env_options,
    value=fk.weird_text.filter(lambda v: "\x00" not in v and not v.startswith("-")),
    mode=st.sampled_from([0o600, 0o644, 0o400]),
    linked=st.booleans(),
)
def test_set_env(base, data, option, value, mode, linked):
    """``bat set.env`` on a mutated .env: a refusal changes nothing; a change keeps every
    other line, the file's mode, and a symlinked .env a symlink."""
    text = data.draw(dotenv_text((base / ".env").read_bytes()))
    with scratch(base) as root:
        env_file = root / "project" / ".env"
        target = env_file
        if linked:
            target = root / "secrets.env"
            env_file.unlink()
            env_file.symlink_to(target)
        target.write_bytes(text)
        target.chmod(mode)
        allowed = {"project/.env", "secrets.env", "project/Dockerfile"}  # its settings block too
        argv = ["set.env", f"{option}={value}"]
        outcome = run_and_check(root, argv, f".env:\n{shown(text)}\nbat {argv}", allowed=allowed)
        if outcome.code == 0:
            assert env_file.is_symlink() == linked, "the .env symlink was replaced"
            assert target.stat().st_mode & 0o777 == mode, "the .env lost its mode"
            key = {
                "--port": "PORT",
                "--model": "MODEL",
                "--model-provider": "MODEL_PROVIDER",
                "--docker-registry": "BAT_DOCKER_REGISTRY",
                "--repo": "BAT_DOCKER_REPO",
            }[option]
            new = target.read_bytes().splitlines()
            for line in text.splitlines():
                if not re.match(rb"\s*(export\s+)?" + key.encode() + rb"\s*=", line):
                    assert line in new, f"set.env lost the line {line!r}"


@fuzz(30)
@given(data=st.data())
def test_dotenv_read_by_eval(base, data):
    """eval.show reads the agent's .env (PORT, ${VAR} values) when config.yaml is gone."""
    text = data.draw(dotenv_text((base / ".env").read_bytes()))
    with scratch(base, config_yaml=False) as root:
        (root / "project" / ".env").write_bytes(text)
        eval_yaml = root / "project" / "eval" / "eval.yaml"
        doc = yaml.safe_load(eval_yaml.read_text())
        if data.draw(st.booleans()):
            doc["evaluation"]["agent"]["env"] = {"KEY": "${OPENAI_API_KEY:-none}"}
        eval_yaml.write_bytes(fk.to_yaml(doc))
        run_and_check(root, ["eval.show"], f".env:\n{shown(text)}")


# -- names: agents, clients, runs -----------------------------------------------------

names = st.one_of(
    st.text(max_size=70).filter(lambda n: not n.startswith("-")),
    st.text(min_size=100, max_size=3000).filter(lambda n: not n.startswith("-")),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,70}", fullmatch=True),
    st.sampled_from(["bat", "Src", "tests", "a-", "a__b", "class", "import", "A" * 64, "A" * 65]),
)


@fuzz(30)
@given(name=names)
def test_agent_names(base, name):
    """``bat init.agent NAME``: a refused name writes nothing; an accepted one gives a
    project whose Python compiles and whose project name is a valid distribution name."""
    with scratch(base) as root:
        outcome = run_and_check(root, ["init.agent", name, "--output-dir", "o"], f"name {name!r}")
        assert len(outcome.err) < 300, outcome.err  # one readable line, whatever the name
        if outcome.code == 0:
            project = root / "project" / "o" / name
            for source in [project / "__main__.py", *project.glob("src/**/*.py")]:
                compile(source.read_text(), str(source), "exec")
            pyproject = (project / "pyproject.toml").read_text()
            dist = re.search(r'^name = "([^"]*)"', pyproject, re.M)[1]
            assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", dist), dist
            assert json.loads((project / "agent.json").read_text())["name"]


@fuzz(25)
@given(clients=st.lists(names, min_size=1, max_size=3))
def test_client_names(base, clients):
    """``bat add.client NAMES`` in the generated project: refused, or modules that compile."""
    with scratch(base) as root:
        argv = ["add.client", ",".join(clients)]
        allowed = {"project/src/llm_clients/__init__.py"}
        outcome = run_and_check(root, argv, f"clients {clients!r}", allowed=allowed)
        assert len(outcome.err) < 300, outcome.err
        if outcome.code == 0:
            for source in (root / "project" / "src" / "llm_clients").glob("*.py"):
                compile(source.read_text(), str(source), "exec")


@fuzz(25)
@given(value=st.one_of(fk.weird_scalar, st.lists(fk.weird_scalar, max_size=3)))
def test_client_names_from_settings(base, value):
    """``init.agent.clients`` in bat.yaml, where YAML can make it any type."""
    with scratch(base) as root:
        (root / "project" / "bat.yaml").write_bytes(
            fk.to_yaml({"init": {"agent": {"clients": value}}})
        )
        argv = ["init.agent", "fz", "--output-dir", "o"]
        run_and_check(root, argv, f"init.agent.clients: {value!r}"[:500])


run_names = st.one_of(
    names,
    st.sampled_from(
        ["..", ".", "/", "eval/output", "eval/output/..", "x:y", ":", "a:", "\x00", "~", " "]
    ),
)


@fuzz(30)
@given(
    name=run_names.filter(lambda n: "\x00" not in n),
    command=st.sampled_from(
        [
            ["eval.summarize", "--run"],
            ["eval.judge", "--run"],
            ["eval.verdict", "--run"],
            ["eval.compare", "-b", "latest", "-a"],
            ["eval.run", "--resume"],
        ]
    ),
)
def test_run_names(base, name, command):
    """Run names given to the stages (--run, --resume, -a/-b) in a project with no runs:
    every one is a clean refusal (no agent starts, nothing is written)."""
    with scratch(base) as root:
        _harmless_agent(root / "project")
        outcome = run_and_check(root, [*command, name], f"bat {command} {name!r}")
        assert outcome.code == 2, f"bat {command} {name!r} with no runs\n{outcome.describe()}"
        for line in outcome.err.splitlines():  # the name is quoted escaped, never raw
            assert not any(unicodedata.category(c) == "Cc" for c in line), repr(line)


@fuzz(20)
@given(name=st.one_of(run_names, fk.weird_scalar))
def test_run_name_setting(base, name):
    """``run_name`` in eval.yaml (added to the run folder's name)."""
    with scratch(base) as root:
        eval_yaml = root / "project" / "eval" / "eval.yaml"
        doc = yaml.safe_load(eval_yaml.read_text())
        doc["evaluation"]["run_name"] = name
        eval_yaml.write_bytes(fk.to_yaml(doc))
        run_and_check(root, ["eval.show"], f"run_name {name!r}")


def _harmless_agent(project: Path) -> None:
    """Point eval.yaml at an agent that exits at once, should any command start one."""
    eval_yaml = project / "eval" / "eval.yaml"
    doc = yaml.safe_load(eval_yaml.read_text())
    doc["evaluation"]["agent"]["command"] = "{python} -c 'raise SystemExit(3)'"
    doc["evaluation"]["agent_startup_timeout_s"] = 2
    eval_yaml.write_text(yaml.safe_dump(doc))


# -- agent.json -----------------------------------------------------------------------


def card_document(base: Path) -> dict:
    return json.loads((base / "agent.json").read_text())


@fuzz(40)
@given(data=st.data())
def test_agent_json_read_by_build(base, data):
    """The project's agent.json as ``bat build`` reads it (name and version of the image):
    a usable image name, or one clean error naming the file."""
    from bat.images.settings import resolve

    doc = fk.mutate(card_document(base), data.draw)
    text = maybe_bytes(data.draw, fk.to_json(doc))
    with scratch(base) as root:
        (root / "project" / "agent.json").write_bytes(text)
        what = f"agent.json:\n{shown(text)}"
        try:
            with fk.time_limit(10):
                image = resolve(root / "project", environ={})
        except BatError as exc:
            assert exc.exit_code == 2, what
            assert "agent.json" in exc.message or "version" in exc.message, what
        else:
            assert re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", image.repo.value), what
            assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", image.version.value), what
            # Accepted: then it was a JSON object, not a broken file silently passed over.
            card = json.loads(text.decode("utf-8"))
            assert isinstance(card, dict), what
            assert all(isinstance(card.get(k, ""), str) for k in ("name", "version")), what


class BodyServer(http.server.ThreadingHTTPServer):
    """Answers every GET and POST with ``self.body`` (HTTP 200, JSON): an agent's card at
    both well-known paths, or a judge's chat completion. A real server on 127.0.0.1."""

    body = b"{}"
    daemon_threads = True

    def __init__(self) -> None:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            do_POST = do_GET

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def card_server():
    server = BodyServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def a2a_card() -> dict:
    """A valid 1.x agent card, as a2a-sdk itself writes one."""
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from google.protobuf.json_format import MessageToDict

    card = AgentCard(
        name="Demo",
        description="A demo agent.",
        version="0.1.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="Answer", description="Answers.", tags=["chat"])],
        supported_interfaces=[
            AgentInterface(url="http://127.0.0.1:1", protocol_binding="JSONRPC"),
        ],
    )
    return MessageToDict(card)


def legacy_card() -> dict:
    """A 0.3-style card (what a2a-sdk 0.3 and bat-adk agents serve)."""
    return {
        "name": "Demo",
        "description": "A demo agent.",
        "version": "0.1.0",
        "protocolVersion": "0.3.0",
        "url": "http://127.0.0.1:1/",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": "http://127.0.0.1:1/", "transport": "HTTP+JSON"}],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "a", "name": "A", "description": "A.", "tags": []}],
    }


@fuzz(30)
@given(data=st.data())
def test_agent_card_served(base, card_server, data):
    """The card an agent serves (eval.run reads it before any episode): a card bat can
    speak, or one clean error; never a library's exception."""
    import httpx

    from bat.evaluation.run.agent_card import card_answers, fetch_card, prepare

    start = data.draw(st.sampled_from([a2a_card, legacy_card, lambda: card_document(base)]))()
    if data.draw(st.booleans()):  # the addresses, where a mutation rarely lands by chance
        for path in fk.paths(start):
            if path and path[-1] == "url":
                fk.set_at(start, path, data.draw(fk.weird_urls))
    text = maybe_bytes(data.draw, fk.to_json(fk.mutate(start, data.draw)))
    if data.draw(st.integers(0, 9)) == 0:
        text = fk.nested_json(data.draw(st.sampled_from([900, 5000, 100_000]))).encode()
    card_server.body = text

    async def read():
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
            card = await fetch_card(http, card_server.url)
            return prepare(card, card_server.url)

    what = f"agent card:\n{shown(text)}"
    with fk.time_limit(10):  # the readiness probe while an agent starts: a yes or a no
        assert card_answers(card_server.url) in (True, False), what
    try:
        with fk.time_limit(10):
            bindings = asyncio.run(read())
    except BatError as exc:
        assert exc.message and "\n" not in exc.message.strip(), what
        assert len(exc.message) < 2000, what
    else:
        assert bindings, what


# -- judge replies --------------------------------------------------------------------


def judge_verdict(score=0.5) -> dict:
    from bat.evaluation.inputs.config import JUDGE_DIMENSIONS

    return {dim: {"reasoning": f"because {dim}", "score": score} for dim in JUDGE_DIMENSIONS}


@st.composite
def judge_replies(draw) -> str:
    """A judge's reply: a valid verdict mutated, wrapped in chatter, fenced, cut short."""
    kind = draw(st.sampled_from(["mutated", "mutated", "text", "trap"]))
    if kind == "text":
        return draw(st.text(max_size=300))
    if kind == "trap":
        return draw(
            st.sampled_from(
                [
                    "{" + '"a":' * 5000 + "1" + "}" * 5000,
                    '{"a": ' + fk.nested_json(100_000) + "}",
                    "{" * 100_000,
                    '{"a":{' * 30_000,
                    json.dumps(judge_verdict()).replace("0.5", "1" + "0" * 400),
                    json.dumps(judge_verdict()).replace("0.5", "1e999"),
                    json.dumps(judge_verdict()).replace("0.5", '"nan"'),
                    json.dumps(judge_verdict()).replace("0.5", '"inf"'),
                    json.dumps(judge_verdict()).replace('"because', fk.nested_json(900) + ', "'),
                    json.dumps({"scores": judge_verdict()}),
                    json.dumps(judge_verdict())[:-1],
                ]
            )
        )
    doc = fk.mutate(
        draw(st.sampled_from([judge_verdict(), {"scores": judge_verdict()}])), draw, rounds=2
    )
    body = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    before = draw(st.sampled_from(["", "Here is my verdict:\n", "```json\n", "{ oops "]))
    after = draw(st.sampled_from(["", "\n```", " Hope this helps!", "}"]))
    return before + body + after


@fuzz(300)
@given(reply=judge_replies())
def test_judge_replies(reply):
    """Any judge reply: every dimension scored in [0, 1] with a bounded reasoning, or a
    JudgeError whose reason fits an episode file; fast even on a hostile 200 kB reply."""
    from bat.evaluation.inputs.config import JUDGE_DIMENSIONS
    from bat.evaluation.judging.parse import MAX_REASONING_CHARS, JudgeError, parse_judgement

    what = f"reply: {reply[:500]!r}"
    try:
        with fk.time_limit(5):
            judgement = parse_judgement(reply)
    except JudgeError as exc:
        assert str(exc).strip() and len(str(exc)) < 1000, what
        assert "\n" not in str(exc), what
    else:
        assert set(judgement) == set(JUDGE_DIMENSIONS), what
        for score, reasoning in judgement.values():
            assert isinstance(score, float) and math.isfinite(score) and 0 <= score <= 1, what
            assert isinstance(reasoning, str) and len(reasoning) <= MAX_REASONING_CHARS, what


# -- what must be refused ----------------------------------------------------------
# Inputs issue 9 found accepted with a changed meaning, or failing with a traceback:
# each is now one clean refusal (exit 2). Relative to the scratch folder; "+" appends
# to the valid file bat wrote.

EVAL = "project/eval/eval.yaml"
TASKS = "project/eval/input/tasks.json"
REFUSED = [
    (EVAL, "+", "evaluation:\n  k: true\n", {}),
    (EVAL, "", "evaluation:\n  k: 1\n  k: 2\n", {}),
    (EVAL, "", "evaluation:\n  turn_timeout_s: .inf\n", {}),
    (EVAL, "", "evaluation:\n  agent_url: http://127.0.0.1:99999\n", {}),
    (EVAL, "", "evaluation:\n  agent:\n    env: {'A=B': x}\n", {}),
    (EVAL, "", 'evaluation:\n  agent:\n    env: {A: "x\\0y"}\n', {}),
    (EVAL, "", "evaluation:\n  k: 1\njudge: []\n", {}),
    (EVAL, "", "evaluation:\n  run_name: caf\xe9\n", {}),
    (TASKS, "", '[{"id": "caf\xe9", "turns": ["hi"]}]', {}),
    (TASKS, "", '[{"id": "a\\u001b[31m", "turns": ["hi"]}]', {}),
    ("project/.env", "", "PORT=0\n", {"config.yaml": None}),
    ("project/.env", "", "PORT=99999\n", {"config.yaml": None}),
    ("project/bat.yaml", "", "eval: {file: null}\n", {}),
    ("project/bat.yaml", "", "init: 5\n", {}),
    ("project/bat.yaml", "", "eval: [1]\n", {}),
    ("project/bat.yaml", "", "init:\n  agent:\n    model: caf\xe9\n", {}),
    ("home/.bat.yaml", "", "init:\n  agent:\n    model: caf\xe9\n", {}),
    ("project/settings.yaml", "", "eval: {file: eval/eval.yaml}\xff\n", {"-f": "settings.yaml"}),
    (None, "", "", {"BAT_INIT_AGENT_PORT": "abc"}),
    (None, "", "", {"BAT_EVAL_FILE": ""}),
]


@pytest.mark.parametrize(
    ("where", "how", "text", "extra"),
    REFUSED,
    ids=[f"{(w or 'env').rsplit('/', 1)[-1]}:{(t or str(e))[:40]!r}" for w, _, t, e in REFUSED],
)
def test_refused(base, where, how, text, extra):
    """Each input of issue 9 that was accepted with a changed meaning, or failed with a
    traceback, is one clean refusal; a refusal naming a variable names it."""
    with scratch(base, config_yaml="config.yaml" not in extra) as root:
        if where is not None:
            data = text.encode("latin-1") if "\xe9" in text or "\xff" in text else text.encode()
            path = root / where
            path.write_bytes((path.read_bytes() + b"\n" if how == "+" else b"") + data)
        env = {k: v for k, v in extra.items() if k.startswith("BAT_")}
        argv = (["-f", extra["-f"]] if "-f" in extra else []) + ["eval.show"]
        if "BAT_INIT_AGENT_PORT" in env:
            argv = ["init.agent", "fz", "--output-dir", "o"]
        outcome = run_and_check(root, argv, f"{where}: {text!r} {extra}", env=env)
        assert outcome.code == 2, f"accepted: {where}: {text!r} {extra}\n{outcome.describe()}"
        for name in env:
            if name != "BAT_EVAL_FILE":
                assert name in outcome.err, f"the error does not name {name}: {outcome.err}"
        assert "is a directory" not in outcome.err, outcome.err


@fuzz(200)
@given(data=st.data(), protocol=st.sampled_from(["openai", "ollama"]))
def test_judge_server_answers(card_server, data, protocol):
    """What a judge server sends back, around the reply (the chat-completion envelope):
    a reply read as above, or a JudgeError; never another exception."""
    from bat.evaluation.inputs.config import JudgeSpec
    from bat.evaluation.judging.client import JudgeClient
    from bat.evaluation.judging.parse import JudgeError, parse_judgement

    reply = data.draw(judge_replies())
    message = {"role": "assistant", "content": reply}
    if protocol == "ollama":
        envelope = {"model": "m", "message": message, "done": True}
    else:
        envelope = {"id": "x", "object": "chat.completion", "choices": [{"message": message}]}
    body = maybe_bytes(data.draw, fk.to_json(fk.mutate(envelope, data.draw, rounds=2)))
    card_server.body = body
    spec = JudgeSpec(provider=protocol, model="m", base_url=card_server.url, max_retries=0)
    client = JudgeClient(spec, None, sleep=lambda seconds: None)
    what = f"judge server answer: {shown(body)}"
    try:
        with fk.time_limit(10):
            parse_judgement(client.chat("system", "user"))
    except JudgeError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000, what
    finally:
        client.close()


# -- end to end through the console script --------------------------------------------


def limited_memory() -> None:
    """In the child: at most 2 GB of address space, so a blow-up is a MemoryError, not a
    machine out of memory."""
    limit = 2 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


BOMB = fk.alias_bomb(9, 9)


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("project/eval/eval.yaml", BOMB + "evaluation: {k: *a8, concurrency: x}\n"),
        ("project/eval/eval.yaml", "evaluation: {dataset: /dev/zero}\n"),
        ("project/eval/input/tasks.json", fk.nested_json(200_000)),
        ("project/bat.yaml", BOMB + "eval: {file: *a8}\n"),
        ("home/.bat.yaml", BOMB + "init: {agent: {port: *a8}}\n"),
        ("home/.bat.yaml", "init:\n  agent:\n    model: caf\xe9\n"),
        ("project/settings.yaml", BOMB + "images: {version: *a8}\n"),
        ("project/.env", "PORT=9901\nMODEL=caf\xe9\n"),
    ],
    # Short names: pytest puts a test's name in PYTEST_CURRENT_TEST, which bat inherits,
    # and one variable of 128 kB or more cannot start a process at all.
    ids=[
        "eval.yaml-alias-bomb",
        "eval.yaml-dev-zero",
        "tasks.json-deep",
        "bat.yaml-alias-bomb",
        "home-bat.yaml-alias-bomb",
        "home-bat.yaml-latin-1",
        "settings.yaml-alias-bomb",
        "env-latin-1",
    ],
)
def test_console_script(base, where, text):
    """The real ``bat`` process on the inputs that can take a whole machine (alias bombs,
    /dev/zero, 200,000 levels of nesting) or that need a real process's encoding:
    memory-limited, and bounded in time."""
    with scratch(base, config_yaml=not where.endswith(".env")) as root:
        (root / where).write_bytes(text.encode("latin-1") if "\xe9" in text else text.encode())
        argv = ["-f", "settings.yaml", "eval.show"] if "settings" in where else ["eval.show"]
        before = fk.snapshot(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BAT_")}
        try:
            proc = subprocess.run(
                [str(BAT), *argv],
                cwd=root / "project",
                env={**env, "HOME": str(root / "home"), "NO_COLOR": "1"},
                capture_output=True,
                text=True,
                timeout=20,
                preexec_fn=limited_memory,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"bat {argv} with {where} = {text[:200]!r}: still running after 20 s")
        outcome = fk.Outcome(proc.returncode, proc.stdout, proc.stderr, [])
        fk.check_outcome(outcome, f"{where}: {text[:300]!r}")
        assert not fk.changed_files(before, fk.snapshot(root))
