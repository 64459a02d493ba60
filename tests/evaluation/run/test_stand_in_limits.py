"""A stand-in model's rule file (``script:``) cannot hang, crash or freeze bat (issue 27).

The rule file is read by the bounded reader (a FIFO, ``/dev/zero``, a huge or deeply
nested file, a key written twice: one error naming the file, at once). Its regexes are
held to ``output_regex``'s engine and limits, checked on load, and each search has one
second: a backtracking rule costs its answer, not the run. The stand-in serves from a
child process, so Ctrl-C reaches bat whatever a rule does, and the child never outlives
bat. The agent is the echo fixture, whose ``CHAT <text>`` turn really asks its model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs import model_script
from bat.evaluation.inputs.model_script import Conversation, Rules, ScriptError
from tests import fuzzkit as fk
from tests.evalkit import REPO, episodes, make_project, port_answers, run_dirs, start_bat

SCALE = float(os.environ.get("FUZZ_SCALE", "1"))

SLOW = r"^(a|aa)+$"  # exponential on a long run of a's that cannot match
LONG_AS = "a" * 60 + "b"  # hours of backtracking for `re`
MODEL = "openai_stand-in"


@pytest.fixture
def no_charts(monkeypatch):
    """The console script started by the test draws no charts (a second or more)."""
    monkeypatch.setenv("BAT_EVAL_CHARTS", "false")


def stand_in_project(root: Path, rules: str, tasks: list[dict], **evaluation) -> Path:
    """A project whose one model is a stand-in answering from ``rules`` (YAML text)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "rules.yaml").write_text(rules, encoding="utf-8")
    models = [{"provider": "openai", "model": "stand-in", "script": "rules.yaml"}]
    return make_project(root, tasks, models=models, **evaluation)


def chat_task(task_id: str, text: str) -> dict:
    return {"id": task_id, "turns": [f"CHAT {text}"], "expected": {"output_regex": "^model: "}}


def fuzz(examples: int):
    """Hypothesis settings of the fuzz suite (tests/test_fuzz_inputs.py): deterministic,
    no database, no deadline, no "explain" phase."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


def stand_in_children(pid: int) -> list[int]:
    """The stand-in processes ``pid`` started (Linux: /proc's children lists)."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"bat.evaluation.run.scripted_model" in cmdline:
                found.append(int(child))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def one_headline(err: str) -> list[str]:
    """The ``bat: error:`` lines of ``err`` (the suite's rule: exactly one)."""
    return [line for line in err.splitlines() if line.startswith("bat: error:")]


# -- the file: read by the bounded reader ---------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    with path.open("wb") as handle:  # sparse: 300 MB on the size, nothing on the disk
        handle.truncate(300 * 2**20)


HOSTILE_FILES = {
    "fifo": (_fifo, "not a regular file"),
    "dev-zero": (_dev_zero, "not a regular file"),
    "huge": (_huge, "a model script may be at most 1.0 MiB"),
    "deep-yaml": (lambda p: p.write_text("- " + "[" * 5000), "nested deeper than 100 levels"),
    "duplicate-yaml": (
        lambda p: p.write_text("- reply: x\n  reply: y\n"),
        "[0].reply (line 2): duplicate key",
    ),
}


@pytest.mark.parametrize("command", ["eval.show", "eval.run"])
@pytest.mark.parametrize("case", sorted(HOSTILE_FILES))
def test_a_rule_file_that_cannot_be_read_is_one_line_at_once(tmp_path, bat, home, command, case):
    make, words = HOSTILE_FILES[case]
    project = stand_in_project(tmp_path / "p", "- reply: x\n", [chat_task("t", "hi")])
    (project / "rules.yaml").unlink()
    make(project / "rules.yaml")
    started = time.monotonic()
    result = bat(command, cwd=project, timeout=20)
    assert time.monotonic() - started < 10
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    assert len(one_headline(result.err)) == 1, result.err
    assert "models[0].script: rules.yaml" in result.err and words in result.err, result.err
    assert run_dirs(project) == []


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("r.json", "[" * 200_000, "nested too deeply"),
        ("r.json", '[{"reply": "x", "reply": "y"}]', "[0].reply (line 1): duplicate key"),
    ],
)
def test_a_json_rule_file_too_deep_or_with_a_key_twice_is_refused(tmp_path, name, text, words):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with fk.time_limit(5), pytest.raises(ScriptError) as caught:
        Rules.load(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_stand_in_on_its_own_refuses_a_fifo_at_once(tmp_path):
    """``python -m bat.evaluation.run.scripted_model --rules FIFO``: an error, no wait."""
    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "bat.evaluation.run.scripted_model", "--port", "0"]
    proc = subprocess.run(
        [*command, "--rules", str(fifo)], capture_output=True, text=True, timeout=20, cwd=REPO
    )
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_rule_file_broken_after_eval_yaml_was_read_fails_that_model_in_one_line(tmp_path):
    """The stand-in reads its rules again: a file turned into a FIFO since eval.yaml was
    checked is an OperationError (that model cannot be evaluated) with the child's words,
    at once, not a wait or a ValueError out of the run."""
    from bat.errors import OperationError
    from bat.evaluation.run.scripted_model import serving

    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(OperationError) as caught, serving(fifo):
        pytest.fail("the stand-in served a FIFO")
    assert time.monotonic() - started < 10
    assert "exited with status 2 before it served" in caught.value.message
    assert any("not a regular file" in line for line in caught.value.details)


# -- the regexes: output_regex's engine and limits ------------------------------------


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("(?:a{1000}){1000}", "unroll to more than 100,000 items"),
        ("a" * 2001, "at most 2000 characters"),
        ("(?R)", "recursive patterns are not allowed"),
        ("(?P<n>x(?&n))", "recursive patterns are not allowed"),
    ],
)
def test_a_regex_output_regex_would_refuse_is_refused_in_a_rule(
    tmp_path, bat, home, pattern, words
):
    rules = yaml.safe_dump([{"regex": pattern, "reply": "x"}])
    project = stand_in_project(tmp_path / "p", rules, [chat_task("t", "hi")])
    result = bat("eval.show", cwd=project, timeout=20)
    assert result.code == 2, result.out + result.err
    assert len(one_headline(result.err)) == 1 and "Traceback" not in result.err
    assert "models[0].script: rules.yaml: rule 0: regex: " in result.err and words in result.err


def test_a_backtracking_rule_gives_up_after_a_second_naming_the_rule():
    rules = Rules.from_data([{"match": "zzz", "reply": "no"}, {"regex": SLOW, "reply": "x"}])
    started = time.monotonic()
    # In a child: on a build whose search cannot be stopped, the test fails, not hangs.
    code = (
        "from bat.evaluation.inputs.model_script import Conversation, Rules, RuleTooSlow\n"
        f"rules = Rules.from_data([{{'match': 'zzz', 'reply': 'no'}}, {{'regex': {SLOW!r}, "
        "'reply': 'x'}])\n"
        f"try:\n    rules.first(Conversation.of([{{'role': 'user', 'content': {LONG_AS!r}}}]))\n"
        "except RuleTooSlow as exc:\n    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=REPO
    )
    assert time.monotonic() - started < 15
    assert proc.stdout.startswith("rule 1: regex took over 1 s on this conversation"), (
        proc.stdout + proc.stderr
    )
    fast = Conversation.of([{"role": "user", "content": "aaaa"}])
    assert rules.first(fast) is rules.root[1]  # the same rule still answers what it can


def test_a_backtracking_rule_costs_its_answers_not_the_run(tmp_path, home, no_charts):
    """Each turn the rule cannot decide gets the stand-in's error (a 500 naming the rule)
    within about a second, and the run ends; the other rules still answer."""
    rules = yaml.safe_dump([{"match": "hello", "reply": "hi there"}, {"regex": SLOW, "reply": "x"}])
    tasks = [chat_task("slow", LONG_AS), chat_task("fine", "hello")]
    project = stand_in_project(tmp_path / "p", rules, tasks)
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("eval.run hung on a backtracking rule")
    assert proc.returncode == 0, out + err  # no gate: a failed check is a number
    assert "Traceback" not in err
    found = episodes(run_dirs(project)[0], MODEL)
    assert found["fine__try1.json"]["final_output"] == "model: hi there"
    slow = found["slow__try1.json"]["final_output"]
    assert slow.startswith("model error: 500 ") and "rule 1: regex took over 1 s" in slow, slow


def test_ctrl_c_ends_bat_while_a_rule_backtracks(tmp_path, home, no_charts):
    """SIGINT to a real ``bat eval.run`` whose stand-in is deep in a backtracking search:
    exit 130 within moments, and the stand-in is gone with it."""
    tasks = [chat_task(f"slow-{n}", LONG_AS) for n in range(30)]
    project = stand_in_project(tmp_path / "p", f"- regex: '{SLOW}'\n  reply: x\n", tasks)
    (project / "eval" / "eval.yaml").write_text(
        (project / "eval" / "eval.yaml").read_text().replace("concurrency: 4", "concurrency: 1")
    )
    proc = start_bat("eval.run", cwd=project, home=home)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the turns reach the stand-in
        dirs = run_dirs(project)
        if dirs and list((dirs[0] / MODEL / "episodes").glob("*.json")):
            break
        time.sleep(0.05)
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("bat ignored Ctrl-C while its stand-in backtracked")
    assert proc.returncode == 130, out + err
    assert time.monotonic() - interrupted < 10
    assert "Traceback" not in err
    address = out.split("scripted model from rules.yaml at ", 1)[1].split()[0]
    assert not port_answers(address.removesuffix("/v1"))


def test_the_stand_in_never_outlives_bat_even_after_kill_9(tmp_path, home, no_charts):
    """A child process of bat's: it ends when bat does, however bat ends."""
    tasks = [chat_task(f"t-{n}", f"wait {n}") for n in range(2)]
    project = stand_in_project(tmp_path / "p", "- reply: x\n  delay_ms: 60000\n", tasks)
    proc = start_bat("eval.run", cwd=project, home=home)
    deadline = time.monotonic() + 30
    while not (children := stand_in_children(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children, "no stand-in process was started"
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + 10
    while any(map(running, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(running, children)), "the stand-in outlived bat"


# -- the fuzz check, and its canary ---------------------------------------------------

# Pieces of patterns people (and attackers) write: nested quantifiers, counted repeats,
# recursion, escapes at the end, sets, lookarounds, named groups, flags.
REGEX_PIECES = [
    "a", "(a+)+", "(a|aa)+", "(.*)*", "{1000}", "{2,}", "(?R)", "(?1)", "(?&n)", "(?P<n>",
    ")", "(", "[", "]", "[^a]", "\\", "\\1", "(?=a)", "(?<!b)", "(?i)", "(?x)#{99}", "$",
    "^", "|", "*", "+?", "\\p{L}", "\\N{DASH}", "\x00", "\u2028",
]  # fmt: skip
# Whole patterns known to backtrack for ages on a long run of a's that cannot match.
BACKTRACKING = ["^(a|aa)+$", "^(a+)+$", "(a|a)*b$", "^(a?){25}a{25}$", "^(\\w+\\s?)*$"]
regexes = st.one_of(
    st.sampled_from(BACKTRACKING),
    st.lists(st.sampled_from(REGEX_PIECES), max_size=12).map("".join),
    st.text(max_size=40),
    st.integers(1, 3000).map(lambda n: "a" * n),
)
rules = st.lists(
    st.fixed_dictionaries(
        {"reply": st.sampled_from(["ok", "{last}", "echo: {first}"])},
        optional={
            "regex": regexes,
            "match": st.text(max_size=20),
            "scope": st.sampled_from(["last", "prompt", "all"]),
            "delay_ms": st.sampled_from([0, 1, -1, True, 10**9]),
        },
    ),
    max_size=5,
)
messages = st.sampled_from([LONG_AS, "", "hello", "a" * 5000, "\u2028\x00", "aab" * 300])


def check_rule_file(path: Path, message: str) -> None:
    """The rules of the suite for one rule file: it loads, or is one clear ScriptError;
    loaded, its regexes are within ``output_regex``'s limits, and it answers ``message``
    or says in one line which rule could not, quickly."""
    from bat.evaluation.inputs.output_regex import check_regex

    started = time.monotonic()
    try:
        loaded = Rules.load(path)
    except ScriptError as exc:
        assert str(exc) and "\n" not in str(exc), exc
        return
    for rule in loaded.root:
        if rule.regex is not None:
            check_regex(rule.regex)  # a ValueError here: a pattern past the limits loaded
    conversation = Conversation.of([{"role": "user", "content": message}])
    try:
        loaded.first(conversation)
    except model_script.RuleTooSlow as exc:
        assert str(exc).startswith("rule ") and "\n" not in str(exc), exc
    assert time.monotonic() - started < 2 * len(loaded.root) + 3


def fuzz_rule_files(scratch: Path, examples: int) -> None:
    """Hypothesis over rule files: the strategy's rules as YAML or JSON, sometimes broken
    byte by byte, each checked by :func:`check_rule_file` under a time limit."""

    @fuzz(examples)
    @given(document=rules, message=messages, data=st.data())
    def run(document, message, data):
        as_json = data.draw(st.booleans())
        text = fk.to_json(document) if as_json else fk.to_yaml(document)
        if data.draw(st.booleans()):
            text = data.draw(fk.byte_mutations(text))
        path = scratch / ("rules.json" if as_json else "rules.yaml")
        path.write_bytes(text)
        with fk.time_limit(fk.HANG_AFTER_S):
            check_rule_file(path, message)

    run()


def test_fuzz_rule_files(tmp_path, monkeypatch):
    # A tenth of the time limit: the backtracking examples give up ten times sooner.
    monkeypatch.setattr("bat.evaluation.inputs.output_regex.REGEX_TIME_LIMIT_S", 0.1)
    fuzz_rule_files(tmp_path, 150)


def test_fuzz_rule_files_canary(tmp_path, monkeypatch):
    """The same check fails on a reader that lets a bare ValueError out: it can fail."""
    import bat.input_files

    def broken(text, path):
        raise ValueError("a parser's own exception, not a ScriptError")

    monkeypatch.setattr(bat.input_files, "parse_yaml", broken)
    monkeypatch.setattr(bat.input_files, "parse_json", broken)
    with pytest.raises(ValueError, match="a parser's own exception"):
        fuzz_rule_files(tmp_path, 20)


def test_rule_file_strategy_reaches_the_interesting_cases(tmp_path):
    """The strategy does make rules that load, rules refused for their regex, and rules
    that give up on a message (not only parse errors)."""
    seen = set()

    @fuzz(150)
    @given(document=rules)
    def run(document):
        try:
            loaded = Rules.from_data(document)
        except ScriptError as exc:
            seen.add("regex refused" if "regex:" in str(exc) else "refused")
            return
        seen.add("loaded")
        if any(rule.regex for rule in loaded.root):
            seen.add("with a regex")

    run()
    assert {"loaded", "refused", "regex refused", "with a regex"} <= seen, seen


def fuzz_eval_show(scratch: Path, examples: int) -> None:
    """Hypothesis over ``bat eval.show`` (the real program, in this process) with the
    strategy's rule files: exit 0, or exit 2 with one ``bat: error:`` headline; never a
    traceback or a hang, nothing written outside the scratch folder, no file changed."""
    project = stand_in_project(scratch / "project", "- reply: x\n", [chat_task("t", "hi")])

    @fuzz(examples)
    @given(document=rules, data=st.data())
    def run(document, data):
        text = fk.to_yaml(document)
        mutated = data.draw(st.booleans())
        if mutated:
            text = data.draw(fk.byte_mutations(text))
        (project / "rules.yaml").write_bytes(text)
        before = fk.snapshot(scratch)
        outcome = fk.run_in_process(["eval.show"], cwd=project, scratch=scratch)
        what = f"eval.show with the rule file {text[:300]!r}"
        fk.check_outcome(outcome, what)
        assert not fk.changed_files(before, fk.snapshot(scratch)), outcome.describe()
        if outcome.code == 0 and not mutated:  # accepted: no regex past the limits
            from bat.evaluation.inputs.output_regex import check_regex

            for rule in document:
                if isinstance(rule.get("regex"), str):
                    check_regex(rule["regex"])

    run()


def test_fuzz_eval_show_with_rule_files(tmp_path):
    fuzz_eval_show(tmp_path, 60)


def test_fuzz_eval_show_canary(tmp_path, monkeypatch):
    """The same check fails when reading a rule file (and only it) escapes as an
    exception bat does not expect: it can fail."""
    import bat.input_files

    real = bat.input_files.parse_yaml

    def broken(text, path):
        if Path(path).name == "rules.yaml":
            raise RuntimeError("a rule file reader that crashes")
        return real(text, path)

    monkeypatch.setattr(bat.input_files, "parse_yaml", broken)
    with pytest.raises(AssertionError, match="RuntimeError: a rule file reader that crashes"):
        fuzz_eval_show(tmp_path, 5)
