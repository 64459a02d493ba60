"""Numbers at the edges (issue 27): NaN and infinities never pass a gate, never reach a
file bat writes, and a threshold that no run could fail (or pass) is refused when read.

Runs are made by the real code: the echo agent for a whole ``eval.run``, ``tests/logkit``
(real episodes, ``summarize`` and the log's writers) for the baseline runs; a hostile file
is one of those, edited the way a hand or another tool would.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bat.errors import UsageError, error_line
from bat.evaluation.inputs import gate_specs
from bat.evaluation.inputs.gate_specs import (
    OPERATORS,
    Threshold,
    command_line_gates,
    parse_expression,
)
from tests import logkit
from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs
from tests.logkit import NO_SECRETS

TASKS = [{"id": f"t{i}", "turns": [f"ok {i}"], "expected": {}} for i in range(6)]


def strict(text: str):
    """JSON as every reader but Python's reads it: NaN and Infinity are errors."""

    def refuse(word):
        raise ValueError(f"{word} is not JSON")

    return json.loads(text, parse_constant=refuse)


def bat(*args, cwd):
    return run_bat(*args, cwd=cwd, env={"HOME": str(cwd / ".home")})


def one_line(result) -> str:
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bat: error: "), result.err
    return lines[0]


def write_run(output: Path, run_id: str, letters: dict[str, str]) -> Path:
    """A finished run of one model ``m``, written by bat's own log code."""
    run_dir = logkit.new_run(output, run_id, list(letters))
    logkit.write_model(run_dir / "m", logkit.outcomes(letters), run_id=run_id)
    return run_dir


def edit_json(path: Path, change) -> None:
    """Edit a file bat wrote as a person or another tool might (Python's json writes NaN)."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))


@pytest.fixture
def two_runs(tmp_path):
    """A project with a baseline where every task passed and a run 33 points worse (two
    of six tasks now fail: not significant, so only ``--max-drop`` catches it)."""
    project = make_project(tmp_path / "p", TASKS, start=False)
    output = project / "eval" / "output"
    base = write_run(output, "20260101-000000", {f"t{i}": "p" for i in range(6)})
    write_run(output, "20260102-000000", {f"t{i}": "f" if i < 2 else "p" for i in range(6)})
    return project, base


def gates_file(project: Path) -> dict:
    return strict((run_dirs(project)[-1] / "gates.json").read_text())


# --- a baseline that cannot be read numerically fails its gate ----------------------------


def _set(key, value):
    def change(data):
        data["totals"][key] = value

    return change


def _drop(key):
    def change(data):
        del data["totals"][key]

    return change


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (_set("success_percentage", math.nan), "NaN is not a number JSON allows"),
        (_set("success_percentage", math.inf), "Infinity is not a number JSON allows"),
        (_set("success_percentage", "NaN"), "finite number"),
        (_set("success_percentage", "high"), "success_percentage"),
        (_drop("success_percentage"), "success_percentage"),
        (_set("success_percentage", -1e300), "greater than or equal to 0"),
    ],
    ids=["nan", "infinity", "nan-string", "a-word", "missing", "negative"],
)
def test_a_baseline_without_readable_numbers_fails_the_gate(two_runs, change, why):
    project, base = two_runs
    edit_json(base / "m" / "summary.json", change)
    result = bat("eval.gate", "--save", "--baseline", base.name, "--max-drop", "0.05", cwd=project)
    assert result.code == 1, result.err  # main: exit 0, a drop of 33 points passed
    assert "Traceback" not in result.err
    (gate,) = gates_file(project)["gates"]
    assert gate["passed"] is False and gate["value"] is None
    assert "cannot be compared" in gate["detail"] and why in gate["detail"]


def test_a_readable_baseline_still_catches_the_drop(two_runs):
    project, base = two_runs
    result = bat("eval.gate", "--save", "--baseline", base.name, "--max-drop", "0.05", cwd=project)
    assert result.code == 1
    (gate,) = gates_file(project)["gates"]
    assert gate["value"] == 0.3333 and "the drop is over 0.05" in gate["detail"]


def test_compare_refuses_a_drop_that_is_not_a_fraction(two_runs):
    project, base = two_runs
    newer = run_dirs(project)[-1].name
    args = ("eval.compare", base.name, newer, "--fail-on-regression", "--max-drop")
    # main: exit 0 with nan, the 33-point drop passing; 5 was read as 500 points allowed.
    line = one_line(bat(*args, "nan", cwd=project))
    assert "--max-drop nan: give a finite fraction from 0 to 1" in line
    line = one_line(bat(*args, "5", cwd=project))
    assert "did you mean 5%, i.e. 0.05?" in line
    assert bat(*args, "0.05", cwd=project).code == 1


# --- a measured NaN fails its gate, and gates.json stays strict ---------------------------


@pytest.mark.parametrize(
    ("wall", "why"),
    [
        (math.nan, "NaN is not a number JSON allows"),
        (-5.0, "greater than or equal to 0"),  # main: a latency of -5 s passed the gate
        (1.7e308, "less than or equal to 10000000"),  # main: summed to an infinity
    ],
    ids=["nan", "negative", "huge"],
)
def test_a_run_whose_metrics_hold_impossible_times_fails_its_gates_with_the_reason(
    two_runs, wall, why
):
    project, _ = two_runs
    newer = run_dirs(project)[-1]

    def change(data):
        for row in data["per_episode"]:
            row["wall_time_s"] = wall

    edit_json(newer / "m" / "metrics.json", change)
    result = bat("eval.gate", "--save", "--gate", "latency.max < 5", cwd=project)
    assert result.code == 1 and "Traceback" not in result.err
    (gate,) = gates_file(project)["gates"]  # main: "value": NaN, no strict reader reads it
    assert gate["passed"] is False and gate["value"] is None
    assert "its results cannot be read" in gate["detail"] and why in gate["detail"]


@pytest.mark.parametrize(
    ("wall", "why"),
    [
        (math.nan, "finite number"),
        (-5.0, "greater than or equal to 0"),
        (1.7e308, "less than or equal to 10000000"),  # main: a traceback (an infinity)
    ],
    ids=["nan", "negative", "huge"],
)
def test_an_episode_holding_an_impossible_time_is_refused_when_summarized(two_runs, wall, why):
    project, _ = two_runs
    newer = run_dirs(project)[-1]
    episodes = sorted((newer / "m" / "episodes").glob("*.json"))

    def change(data):
        data["trace"]["wall_time_s"] = wall

    for episode in episodes:
        edit_json(episode, change)
    before = (newer / "m" / "metrics.json").read_bytes()
    line = one_line(bat("eval.summarize", "--run", newer.name, cwd=project))
    assert episodes[0].name in line and why in line
    assert (newer / "m" / "metrics.json").read_bytes() == before  # main: rewritten with null


def _row_tokens(value):
    def change(row):
        row["tokens"]["total_tokens"] = value

    return change


def _row_score(value):
    def change(row):
        row["scores"] = {"accuracy": value}

    return change


@pytest.mark.parametrize(
    ("change", "gate", "why"),
    [
        (_row_tokens(-5), "tokens.total <= 100", "-5 is not a count"),  # main: passed
        (_row_tokens(10**400), "tokens.mean <= 100", "a number of 401 digits"),  # a traceback
        (_row_score(7.0), "judge.accuracy >= 0.9", "7.0 is not a score from 0 to 1"),  # passed
    ],
    ids=["negative-tokens", "astronomic-tokens", "score-over-1"],
)
def test_a_run_whose_metrics_hold_impossible_counts_fails_its_gates(two_runs, change, gate, why):
    project, _ = two_runs

    def every_row(data):
        for row in data["per_episode"]:
            change(row)

    edit_json(run_dirs(project)[-1] / "m" / "metrics.json", every_row)
    result = bat("eval.gate", "--save", "--gate", gate, cwd=project)
    assert result.code == 1 and "Traceback" not in result.err, result.err
    (gate_result,) = gates_file(project)["gates"]
    assert gate_result["passed"] is False and why in gate_result["detail"]


@pytest.mark.parametrize("tokens", [-5, 10**400], ids=["negative", "astronomic"])
def test_an_episode_holding_an_impossible_count_is_refused_when_summarized(two_runs, tokens):
    project, _ = two_runs
    newer = run_dirs(project)[-1]
    episodes = sorted((newer / "m" / "episodes").glob("*.json"))

    def change(data):
        data["trace"]["usage"]["total_tokens"] = tokens

    for episode in episodes:
        edit_json(episode, change)
    line = one_line(bat("eval.summarize", "--run", newer.name, cwd=project))
    assert episodes[0].name in line and "is not a count from 0 to" in line


def test_the_json_writer_refuses_nan_and_writes_nothing(tmp_path):
    from bat.atomic import NotStrictJson
    from bat.evaluation.log.gates import GateResult, GatesFile
    from bat.evaluation.present import gates

    result = GateResult(name="g", kind="threshold", model="m", value=math.nan, passed=False)
    file = GatesFile(run_id="r", evaluated_at="now", passed=False, gates=[result])
    with pytest.raises(NotStrictJson, match=r"gates\[0\]\.value is nan, which JSON cannot hold"):
        gates.write(tmp_path, file, NO_SECRETS)
    assert list(tmp_path.iterdir()) == []
    assert NotStrictJson.exit_code == 1 and "\n" not in error_line(str(NotStrictJson("x")))


# --- thresholds refused when read ----------------------------------------------------------


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ("pass_rate <= 1e999", "the threshold 1e999 is not a finite number"),
        ("pass_rate >= 90", "pass_rate is a rate from 0 to 1, not 90: did you mean 90%?"),
        ("pass_rate >= 150%", "pass_rate is a rate: 150% is outside 0% to 100%"),
        ("pass^2 >= -0.5", "pass_hat_2 is never negative"),
        ("latency.p90 < -1", "latency.p90 is never negative"),
        ("judge.accuracy >= 7", "judge.accuracy is a score from 0 to 1, not 7"),
        ("pass_rate >= \u0669\u0660%", "is not a gate"),  # Arabic-Indic 90: float() reads it
        ("pass_rate >= 0." + "9" * 300, "a gate of 315 characters"),
        # K of pass@K: attempts of a task, 1 to eval.yaml's most (an outside probe's
        # pass_at_0 failed at gate time: "needs 0 judged attempts of a task")
        ("pass_at_0 >= 0.5", "K (attempts of a task): expected a whole number from 1 to 1000"),
        ("pass^1001 >= 0.5", "got 1001"),
        ("pass_at_" + "9" * 30 + " >= 0.5", "got a number of 30 digits"),
    ],
)
def test_a_gate_flag_outside_its_figure_is_refused_naming_it(two_runs, gate, message):
    project, _ = two_runs
    line = one_line(bat("eval.gate", "--gate", gate, cwd=project))
    assert line.startswith(f"bat: error: --gate {gate[:80]!r}: ") and message in line
    assert not (run_dirs(project)[-1] / "gates.json").exists()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("pass_rate >= 90", "did you mean 90%?"),
        ({"name": "big", "gate": "pass_at_1 >= 150%"}, "150% is outside 0% to 100%"),
        ({"gate": "tokens.max <= 1e400"}, "not a finite number"),
    ],
)
def test_a_gate_in_eval_yaml_outside_its_figure_is_refused_naming_its_key(two_runs, entry, message):
    project, _ = two_runs
    path = project / "eval" / "eval.yaml"
    config = yaml.safe_load(path.read_text())
    config["gates"] = [entry]
    path.write_text(yaml.safe_dump(config))
    result = bat("eval.gate", cwd=project)
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert "gates[0]" in result.err and message in result.err
    assert not (run_dirs(project)[-1] / "gates.json").exists()


def test_a_baseline_drop_that_is_not_finite_is_refused_in_eval_yaml():
    from pydantic import ValidationError

    for drop in (math.nan, math.inf):
        with pytest.raises(ValidationError, match="finite number"):
            gate_specs.GateSpec(baseline="r", max_drop=drop)
    with pytest.raises(UsageError, match="give a finite fraction"):
        command_line_gates([], "r", math.nan)


# --- a whole run: every JSON file it writes is strict --------------------------------------


def test_every_json_file_of_a_finished_run_is_strict_json(tmp_path):
    tasks = [*TASKS[:2], {"id": "no", "turns": ["FAIL"], "expected": {}}]
    project = make_project(tmp_path / "p", tasks, k=2)
    gates = ["--gate", "pass_rate >= 50%", "--gate", "latency.p99 < 30", "--gate", "pass^2 > 0"]
    result = bat("eval.run", *gates, "--export", "json:out/run.json", cwd=project)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    files = [*run_dir.rglob("*.json"), project / "out" / "run.json"]
    names = {path.name for path in files}
    assert {"run.json", "gates.json", "summary.json", "metrics.json"} <= names
    for path in files:
        strict(path.read_text())


# --- the property: any text is a gate in range, or one line of error -----------------------

FIGURES = ["pass_rate", "pass_at_3", "pass^k", "judge.tone", "latency.p90", "tokens.max"]
FIGURES += ["infra_failure_rate", "infra_failures", "agent_errors.timeout"]
FIGURES += ["conversation.turns.p90", "conversation.goal_met", "conversation.pass^3"]
FIGURES += ["conversation.user_tokens.mean", "conversation.pass_rate", "conversation.x"]
NUMBERS = ["0", "1", "0.9", "90", "100", "150", "-0", "-1", "1e999", "-1e999", "1e-999"]
NUMBERS += ["nan", "inf", "Infinity", "NaN", "1_0", "\u0669", "\u00b2", "0x10", ".5", "5.", "1e3"]


@st.composite
def gate_texts(draw) -> str:
    """Gates as people write them, then broken: a figure, an operator and a number (some
    out of range, some not numbers at all), with a percent sign or not, then characters
    dropped, doubled or replaced; and arbitrary text."""
    figure = draw(st.sampled_from(FIGURES))
    op = draw(st.sampled_from([*OPERATORS, "=", "=>", "!="]))
    number = draw(
        st.one_of(
            st.sampled_from(NUMBERS),
            st.floats(allow_nan=True, allow_infinity=True).map(repr),
            st.integers(min_value=-(10**400), max_value=10**400).map(str),
        )
    )
    text = f"{figure}{draw(st.sampled_from(['', ' ']))}{op} {number}"
    text += draw(st.sampled_from(["", "%", "%%", " %"]))
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["", "x", "%", "-", "e", " ", "9"])) + text[at:]
    return draw(st.one_of(st.just(text), st.text(max_size=60)))


def check_gate_text(text: str, parse=parse_expression) -> None:
    """The rule for any gate text: a threshold that is finite and one the figure can
    reach, or a ValueError of one line that ``--gate`` turns into one UsageError line."""
    try:
        threshold = parse(text)
    except ValueError as exc:
        message = str(exc)
        assert message and "\n" not in message, repr(text)
        with pytest.raises(UsageError) as refused:
            command_line_gates([text])
        assert "\n" not in error_line(refused.value.message)
        return
    assert isinstance(threshold, Threshold), repr(text)
    assert math.isfinite(threshold.threshold) and threshold.threshold >= 0, repr(text)
    if threshold.figure.highest is not None:
        assert threshold.threshold <= threshold.figure.highest, repr(text)


def fuzz(examples: int):
    """Like the fuzz suite: derandomized, no example database, no deadline."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,  # the first failure, as itself (the canary expects it)
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    )


def run_property(parse, examples: int = 400) -> None:
    @fuzz(examples)
    @given(gate_texts())
    def prop(text):
        check_gate_text(text, parse)

    prop()


def test_any_gate_text_parses_in_range_or_is_one_line_of_error():
    run_property(parse_expression)


def test_the_property_catches_a_parser_that_lets_numbers_through(monkeypatch):
    """The canary: today's parser with its range checks taken out (as on main) and one that
    raises a bare KeyError; the same property must fail on both."""
    unchecked = lambda figure, number, percent="": float(number)  # noqa: E731
    monkeypatch.setattr(gate_specs, "threshold_of", unchecked)
    with pytest.raises(AssertionError):
        run_property(parse_expression, examples=200)

    def crashing(text):
        raise KeyError(text)

    with pytest.raises(KeyError):
        run_property(crashing, examples=5)


# --- the properties: the log's JSON reader, --max-drop and a baseline's numbers ------------

HOSTILE_NUMBERS = ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1E400", "1e308"]
HOSTILE_NUMBERS += ["2.5e-400", "-0", "0", "1.5", "9" * 400, "-" + "9" * 30, '"NaN"', "null"]


def _array(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


def _object(items: dict[str, str]) -> str:
    return "{" + ",".join(f"{json.dumps(key)}:{value}" for key, value in items.items()) + "}"


json_values = st.recursive(
    st.sampled_from(HOSTILE_NUMBERS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(_array),
        st.dictionaries(st.sampled_from(["a", "b", "wall_time_s"]), inner, max_size=3).map(_object),
    ),
    max_leaves=8,
)


def _numbers(value):
    """Every float in a JSON value read by Python."""
    if isinstance(value, float):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)


def test_the_log_reads_only_finite_numbers_or_says_why_in_one_line(tmp_path):
    from bat.errors import InputError
    from bat.evaluation.log.files import read_json_object

    path = tmp_path / "summary.json"

    @fuzz(300)
    @given(json_values)
    def prop(value):
        path.write_text(_object({"v": value}))
        try:
            data = read_json_object(path)
        except InputError as exc:
            assert exc.message and "\n" not in exc.message, value
            return
        assert all(math.isfinite(number) for number in _numbers(data)), value

    prop()


@fuzz(300)
@given(st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -0.0, 5.0, 100.0, 1e-300])))
def test_max_drop_is_a_fraction_or_one_line_of_error(drop):
    try:
        allowed = gate_specs.checked_drop(drop)
    except UsageError as exc:
        assert exc.message.startswith("--max-drop ") and "\n" not in exc.message
        return
    assert allowed is not None and math.isfinite(allowed) and 0 <= allowed <= 1


BASELINE_VALUES = [math.nan, math.inf, -math.inf, -1e300, 1e300, 150, -5, 0, 50, 100, 71.6]
BASELINE_VALUES += ["NaN", "inf", "90", "50", "", None, True, [], {}]


def test_a_baseline_never_passes_a_drop_it_cannot_show(two_runs):
    """Whatever a baseline's success_percentage holds, ``--max-drop 0.05`` against a run
    at 66.7 % passes only when it is a number from 0 to 71.7: never on NaN, an
    infinity, a negative or a value that is not a number; gates.json is strict JSON."""
    project, base = two_runs
    summary = base / "m" / "summary.json"
    original = summary.read_text()

    @fuzz(30)
    @given(st.one_of(st.sampled_from(BASELINE_VALUES), st.floats()))
    def prop(value):
        summary.write_text(original)
        edit_json(summary, _set("success_percentage", value))
        result = bat(
            "eval.gate", "--save", "--baseline", base.name, "--max-drop", "0.05", cwd=project
        )
        assert result.code in (0, 1) and "Traceback" not in result.err, (value, result.err)
        (gate,) = gates_file(project)["gates"]
        assert gate["passed"] is (result.code == 0)
        if gate["passed"]:
            number = float(value)  # a number, or a string pydantic reads as one ("50")
            assert math.isfinite(number) and 0 <= number <= 71.67, value

    prop()


EPISODE_NUMBERS = [
    ("wall_time_s",),
    ("time_to_first_event_s",),
    ("usage", "prompt_tokens"),
    ("usage", "total_tokens"),
    ("usage", "model_calls"),
]
HOSTILE_VALUES = [math.nan, math.inf, -math.inf, -1.0, -5, 1.7e308, 10**400, 10**16, "NaN"]
HOSTILE_VALUES += ["12", True, None, [], 0, 0.5, 3]


def test_summarize_writes_strict_bounded_numbers_or_refuses_an_episode(two_runs):
    """Any number in an episode's trace: ``eval.summarize`` ends with exit 0 and strict,
    bounded summary files, or exit 2 with one line naming the file; never a traceback."""
    project, _ = two_runs
    newer = run_dirs(project)[-1]
    episode = sorted((newer / "m" / "episodes").glob("*.json"))[0]
    original = episode.read_text()

    values = st.one_of(st.sampled_from(HOSTILE_VALUES), st.floats())

    @fuzz(30)
    @given(st.sampled_from(EPISODE_NUMBERS), values)
    def prop(where, value):
        data = json.loads(original)
        parent = data["trace"]
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = value
        episode.write_text(json.dumps(data))
        result = bat("eval.summarize", "--run", newer.name, cwd=project)
        assert "Traceback" not in result.err, (where, value, result.err)
        if result.code == 2:
            assert episode.name in one_line(result), (where, value)
            return
        assert result.code == 0, (where, value, result.err)
        metrics = strict((newer / "m" / "metrics.json").read_text())
        strict((newer / "m" / "summary.json").read_text())
        for row in metrics["per_episode"]:
            assert 0 <= row["wall_time_s"] <= 10**7 and 0 <= row["tokens"]["total_tokens"] <= 10**15

    prop()
