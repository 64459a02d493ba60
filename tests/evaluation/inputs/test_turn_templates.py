"""Turns that refer to earlier turns: checking, rendering, and a real ``bat eval.run``."""

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.inputs.turn_templates import (
    RenderError,
    TemplateProblem,
    check_turns,
    compile_turns,
    environment,
    is_template,
    render_turn,
)
from bat.evaluation.judging.rubrics import build_prompt
from bat.evaluation.log.episode import EpisodeResult, EpisodeTrace, TurnRecord
from tests.evalkit import episodes, make_project, run_dirs, summary


def done(*turns):
    """Records of finished turns, as the episode keeps them: (input, status, output)."""
    return [SimpleNamespace(input=i, status=s, output=o) for i, s, o in turns]


def rendered(turns, index, records):
    templates = compile_turns(turns)
    return render_turn(templates[index], records)


# -- rendering -------------------------------------------------------------------------


def test_every_spelling_of_an_earlier_turn_renders():
    turns = [
        "first",
        "second",
        "{{ prev.output }}|{{ prev.reply_text }}|{{ turns[0].output }}|{{ turns[-1].status }}"
        "|{{ turn_1.reply_text }}|{{ turn_2.input }}|{{ prev['status'] }}",
    ]
    records = done(("first", "completed", "one"), ("second", "input-required", "two"))
    assert rendered(turns, 2, records) == "two|two|one|input-required|one|second|input-required"


def test_filters_conditions_and_loops_work():
    turns = [
        "a",
        "b",
        "{{ prev.output | upper }};{% if turn_1.status == 'completed' %}ok{% endif %};"
        "{% for t in turns %}[{{ t.output }}]{% endfor %};{{ turns | length }}",
    ]
    records = done(("a", "completed", "x"), ("b", "completed", "y"))
    assert rendered(turns, 2, records) == "Y;ok;[x][y];2"


def test_raw_sends_template_markers_as_written():
    turns = ["a", "{% raw %}Explain {{ name }} and {% if %}{% endraw %} to {{ prev.output }}"]
    check_turns(turns)
    assert rendered(turns, 1, done(("a", "completed", "me"))) == (
        "Explain {{ name }} and {% if %} to me"
    )


def test_a_task_of_plain_turns_has_no_templates_and_compiles_once():
    plain = TaskSpec(id="p", turns=["hello", "no braces {here}"])
    assert plain.turn_templates is None
    templated = TaskSpec(id="t", turns=["hello", "again: {{ prev.output }}"])
    first = templated.turn_templates
    assert first[0] is None and first[1] is not None
    assert templated.turn_templates is first  # compiled once per task, not per episode
    assert "turn_templates" not in templated.model_dump()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=4))
def test_plain_text_is_never_a_template_and_is_kept_as_written(texts):
    texts = [t for t in texts if not is_template(t)] or ["plain"]
    task = TaskSpec(id="p", turns=texts)
    assert task.turns == texts
    assert task.turn_templates is None  # sent unchanged: adapter uses the text itself


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=3))
def test_plain_turns_beside_a_template_are_not_compiled(texts):
    texts = [t for t in texts if not is_template(t)] or ["plain"]
    templates = TaskSpec(id="m", turns=[*texts, "{{ prev.output }}"]).turn_templates
    assert templates[:-1] == (None,) * len(texts) and templates[-1] is not None


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_text_without_markers_renders_to_itself_if_forced_through_jinja(text):
    """The written text of a templated turn is kept as written, but for its line breaks:
    Jinja reads \r\n and \r as \n (documented). Plain turns never get here."""
    if is_template(text) or "}}" in text or "%}" in text or "#}" in text:
        return
    expected = text.replace("\r\n", "\n").replace("\r", "\n")
    assert render_turn(environment().from_string(text), []) == expected


def test_a_render_failure_is_one_line_and_not_the_agents():
    turns = ["a", "{% for t in turns %}{{ t.nope }}{% endfor %}"]
    with pytest.raises(TemplateProblem):
        check_turns(turns)  # refused on load ...
    template = environment().from_string("{{ turns[turns | length].output }}")
    with pytest.raises(RenderError) as caught:  # ... and a dynamic index fails at run time
        render_turn(template, done(("a", "completed", "x")))
    assert "\n" not in str(caught.value) and str(caught.value)


@pytest.mark.parametrize(
    "source",
    ["{{ ''.__class__ }}", "{{ prev.output.__class__.__mro__ }}", "{{ 'a' * 10000000 }}"],
)
def test_the_sandbox_refuses_python_insides_and_huge_values_at_render(source):
    with pytest.raises(RenderError):
        render_turn(environment().from_string(source), done(("a", "completed", "x")))


def test_the_judge_sees_the_rendered_turn():
    task = TaskSpec(id="t", turns=["Name a colour", "Why {{ prev.output }}?", "And then?"])
    records = [
        TurnRecord(input="Name a colour", status="completed", output="blue"),
        TurnRecord(input="Why blue?", status="completed", output="calm"),
    ]
    result = EpisodeResult(
        task_id="t",
        attempt=1,
        model="m",
        status="completed",
        final_output="calm",
        trace=EpisodeTrace(context_id="c", turns=records),
        started_at="2024-01-01T00:00:00Z",
        ended_at="2024-01-01T00:00:01Z",
    )
    prompt = build_prompt(result, task).user
    assert '"Why blue?"' in prompt and "prev.output" not in prompt
    assert '"And then?"' in prompt  # a turn never reached is shown as written


# -- checking on load ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        (["{{ prev.output }}"], "turn 1: '{{ prev.output }}' refers to the turn before the first"),
        (["a", "{{ turns[3].output }}"], "turn 2: '{{ turns[3].output }}' refers to a later turn"),
        (["a", "{{ turns[1].output }}"], "turn 2: '{{ turns[1].output }}' refers to this turn"),
        (
            ["a", "{{ turns[-2].output }}"],
            "turn 2: '{{ turns[-2].output }}' refers to a turn before",
        ),
        (["a", "{{ turn_2.reply_text }}"], "turn 2: '{{ turn_2.reply_text }}' refers to this turn"),
        (["a", "x {{ turn_5.output }}"], "turn 2: '{{ turn_5.output }}' refers to a later turn"),
        (["a", "{{ turn_0.output }}"], "turn 2: '{{ turn_0.output }}' uses an unknown variable"),
        (["a", "{{ answer }}"], "turn 2: '{{ answer }}' uses an unknown variable 'answer'"),
        (["a", "{{ range(3) }}"], "unknown variable 'range'"),
        (["a", "{{ prev.diff }}"], "turn 2: '{{ prev.diff }}': unknown field 'diff'"),
        (["a", "{{ turns[0].nope }}"], "unknown field 'nope'"),
        (["a", "{% for t in turns %}{{ t.nope }}{% endfor %}"], "'{{ t.nope }}': unknown field"),
        (["a", "{{ prev }}"], "turn 2: '{{ prev }}': prev is a turn; name one of its fields"),
        (["a", "{{ prev.output "], "turn 2: template syntax error"),
        (["a", "{% if prev.output %}"], "turn 2: template syntax error"),
        (["a", "{{ ''.__class__ }}"], "'__class__' is not allowed"),
        (["a", "{{ prev.output['__len__'] }}"], "'__len__' is not allowed"),
        (["a", "{{ prev.output | shout }}"], "there is no filter named 'shout'"),
        (["a", "{% if prev.output is loud %}!{% endif %}"], "there is no test named 'loud'"),
        (["a", "{% include 'other.txt' %}"], "a turn cannot load other templates"),
    ],
)
def test_each_wrong_template_is_refused_with_its_turn(turns, message):
    with pytest.raises(TemplateProblem) as caught:
        check_turns(turns)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_valid_template_passes_the_check():
    check_turns(["a", "b", "{{ turn_2.output }} {{ turns[-2].status }} {{ prev.input }}"])


def write_tasks(project, tasks):
    (project / "eval/input/tasks.json").write_text(json.dumps(tasks, indent=1))


@pytest.mark.parametrize("command", ["eval.show", "eval.run"])
@pytest.mark.parametrize(
    ("turn", "problem"),
    [
        ("{{ turns[3].output }}", "'{{ turns[3].output }}' refers to a later turn"),
        ("{{ prev.diff }}", "unknown field 'diff'"),
        ("{{ ''.__class__ }}", "'__class__' is not allowed"),
        ("{{ oops", "template syntax error"),
    ],
)
def test_a_wrong_template_exits_2_naming_file_task_and_turn(
    tmp_path, bat, home, command, turn, problem
):
    tasks = [
        {"id": "fine", "turns": ["hello"]},
        {"id": "refers", "turns": ["hello", turn]},
    ]
    project = make_project(tmp_path, tasks)
    result = bat(command, cwd=project)
    assert result.code == 2, result.out + result.err
    lines = [line for line in result.err.splitlines() if "turn 2" in line]
    assert len(lines) == 1, result.err
    (line,) = lines
    assert "tasks.json" in line and "task 'refers'" in line and problem in line
    assert "Traceback" not in result.err
    assert run_dirs(project) == []  # nothing ran, no agent started


# -- a real run ------------------------------------------------------------------------


def test_a_run_sends_the_rendered_turn_and_records_it(tmp_path, bat, home):
    tasks = [
        {
            "id": "repeat",
            "turns": ["hello there", "Repeat: {{ prev.output }} ({{ turn_1.status }})"],
            "expected": {
                "output_must_contain": ["echo: Repeat: echo: hello there (completed)"],
                "output_must_not_contain": ["{{"],
            },
        },
        {
            "id": "plain",
            "turns": ["no {braces} here", "{not a template}"],
            "expected": {"output_must_contain": ["echo: {not a template}"]},
        },
    ]
    project = make_project(tmp_path, tasks)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    repeat = next(e for e in found.values() if e["task_id"] == "repeat")
    assert repeat["verdict"]["passed"], repeat["verdict"]
    sent = [turn["input"] for turn in repeat["trace"]["turns"]]
    assert sent == ["hello there", "Repeat: echo: hello there (completed)"]
    first_events = [e for e in repeat["trace"]["events"] if e.get("user_input")]
    assert [e["user_input"] for e in first_events] == sent
    assert summary(run_dir)["totals"]["passed"] == 2


def test_a_template_that_fails_at_run_time_is_an_infrastructure_failure(tmp_path, bat, home):
    """Passes the check (the index is computed), fails when rendered: the harness's
    failure (kind ``template``), the turn is never sent, and the run exits 3."""
    tasks = [
        {"id": "computed", "turns": ["hello", "{{ turns[turns | length].output }}"]},
        {"id": "fine", "turns": ["hello"], "expected": {"output_must_contain": ["echo"]}},
    ]
    project = make_project(tmp_path, tasks)
    result = bat("eval.run", cwd=project)
    assert result.code == 3, result.out + result.err
    assert "Traceback" not in result.err
    (run_dir,) = run_dirs(project)
    found = {e["task_id"]: e for e in episodes(run_dir).values()}
    infra = found["computed"]["infra_error"]
    assert infra["kind"] == "template"
    assert infra["message"].startswith("turn 2 could not be made from its template: ")
    assert [t["input"] for t in found["computed"]["trace"]["turns"]] == ["hello"]
    assert found["computed"]["agent_error"] is None
    assert found["fine"]["verdict"]["passed"] and found["fine"]["infra_error"] is None


# -- belt's fields of a command-line agent's turn ---------------------------------------


def test_prev_git_diff_and_tool_sequence_render_from_the_turn_records():
    """A CLI turn's diff and tool names (TurnRecord.git_diff / tool_sequence): the list
    prints as names joined by commas, and can be joined or looped over; an A2A turn's
    are empty."""
    turns = [
        "edit it",
        "{{ prev.reply_text }}|{{ prev.git_diff }}|{{ prev.tool_sequence }}|"
        "{{ turn_1.tool_sequence | join(' > ') }}|"
        "{% for name in prev.tool_sequence %}[{{ name }}]{% endfor %}|"
        "{{ prev.tool_sequence | length }}",
    ]
    cli = TurnRecord(
        input="edit it",
        status="completed",
        output="done",
        git_diff="+x = 1\n",
        tool_sequence=["Read", "Edit"],
    )
    assert rendered(turns, 1, [cli]) == "done|+x = 1\n|Read, Edit|Read > Edit|[Read][Edit]|2"
    a2a = TurnRecord(input="edit it", status="completed", output="done")
    assert rendered(turns, 1, [a2a]) == "done|||||0"


def test_a_dataset_turn_may_name_the_new_fields_and_not_others():
    TaskSpec.model_validate(
        {"id": "t", "turns": ["a", "{{ prev.git_diff }} {{ turn_1.tool_sequence }}"]}
    )
    with pytest.raises(ValueError, match=r"unknown field 'diff'.*git_diff, tool_sequence"):
        TaskSpec.model_validate({"id": "t", "turns": ["a", "{{ prev.diff }}"]})
