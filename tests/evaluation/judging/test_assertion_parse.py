"""A judge's decisions on a task's assertions: read from its reply, combined over judges."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.config import JUDGE_DIMENSIONS
from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.judging import scores
from bat.evaluation.judging.assertions import combine, decisions
from bat.evaluation.judging.parse import parse_judgement, verdict_objects
from bat.evaluation.judging.rubrics import JUDGEMENT_SCHEMA, RUBRIC_VERSION, build_prompt
from bat.evaluation.verdict import judge_episode, with_assertions
from tests.evaluation.judging.test_judge_parse import episode

SCORES = {dim: {"reasoning": "r", "score": 0.5} for dim in JUDGE_DIMENSIONS}


def decided(given, count, wrap=False):
    reply = json.dumps(
        {"scores": SCORES, "assertions": given} if wrap else {**SCORES, "assertions": given}
    )
    return decisions(verdict_objects(reply), count)


def test_decisions_by_index_or_position_and_the_undecided_said():
    entries = [
        {"index": 1, "passed": False, "reason": "no"},
        {"index": 0, "passed": "pass", "reason": "yes"},  # a word for true
        {"index": 3, "passed": True, "reason": "twice"},
        {"index": 3, "passed": False, "reason": "differently"},
        {"index": 4, "passed": "maybe"},
        {"index": 99, "passed": True},  # no such assertion: ignored
    ]
    assert decided(entries, 6) == [
        (True, "yes"),
        (False, "no"),
        (None, "undecided: the judge left this assertion out"),
        (None, "undecided: the judge answered this assertion twice, differently"),
        (None, "undecided: the judge's answer 'maybe' is not true or false"),
        (None, "undecided: the judge left this assertion out"),
    ]
    # Beside a wrapper of the scores; without an index, by position.
    assert decided([{"passed": True, "reason": "r"}], 1, wrap=True) == [(True, "r")]
    assert decided("yes", 2)[0] == (None, 'undecided: the judge\'s "assertions" is not a list')
    none = decisions(verdict_objects(json.dumps(SCORES)), 1)
    assert none == [(None, 'undecided: the judge gave no "assertions"')]
    # The schema asks for them (strict mode: every key required).
    assert "assertions" in JUDGEMENT_SCHEMA["required"]


def test_several_judges_a_majority_of_those_that_decided():
    texts = ["a", "b", "c", "d"]
    per_judge = {
        "j1": [(True, "1a"), (True, "1b"), (None, "undecided: x"), (None, "undecided: y")],
        "j2": [(True, "2a"), (False, "2b"), (False, "2c"), (None, "undecided: z")],
        "j3": [(False, "3a"), (None, "undecided: w"), (True, "3c"), (None, "undecided: v")],
    }
    a, b, c, d = combine(texts, per_judge)
    assert a["passed"] is True and a["per_judge"] == {"j1": True, "j2": True, "j3": False}
    assert b["passed"] is False  # one for, one against: a tie fails
    assert c["passed"] is False  # a tie again
    assert d["passed"] is None and "[j1] undecided: y" in d["reason"]
    assert a["reason"] == "[j1] 1a\n[j2] 2a\n[j3] 3a"


def test_an_assertion_no_judge_decided_fails_its_verdict_check_with_the_reason():
    task = TaskSpec(
        id="weather",
        turns=["Weather in Rome?"],
        expected={"assertions": ["It names Rome"], "assertions_in_verdict": True},
    )
    prompt = build_prompt(episode(), task).user
    assert '0. "It names Rome"' in prompt and '"assertions"' in prompt
    assert '"assertions"' not in build_prompt(episode(), TaskSpec(id="w", turns=["x"])).user
    ran = episode()
    before = judge_episode(task.expected, ran)  # as the run writes it: not judged yet
    assert not before.passed and "assertion:0: not judged yet" in before.reason
    failed = scores.Outcome(None, "timed out after 3 tries")
    ran.scores = scores.combine(RUBRIC_VERSION, {"j": failed}, list(task.expected.assertions))
    (entry,) = ran.scores.assertions
    assert entry.passed is None and entry.reason == "undecided: timed out after 3 tries"
    after = with_assertions(before, task.expected, ran)
    assert not after.passed and after.checks[-1].detail == (
        "assertion:0: undecided ('It names Rome'): timed out after 3 tries"
    )
    assert judge_episode(task.expected, ran) == after  # eval.verdict reads them back


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
entries = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"index": st.integers(-2, 6) | json_values, "passed": st.booleans() | json_values},
        optional={"reason": json_values, "explanation": json_values},
    ),
)


@settings(max_examples=100, deadline=None)
@given(given=st.lists(entries, max_size=12) | json_values, count=st.integers(0, 6))
def test_any_assertions_a_judge_gives_are_read_without_raising(given, count):
    reply = "The verdict:\n```json\n" + json.dumps({**SCORES, "assertions": given}) + "\n```"
    assert set(parse_judgement(reply)) == set(JUDGE_DIMENSIONS)  # the scores still count
    found = decisions(verdict_objects(reply), count)
    assert len(found) == count
    for passed, reason in found:
        assert passed in (True, False, None) and isinstance(reason, str)
        assert passed is not None or reason.startswith("undecided: ")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.text(max_size=50)), max_size=8))
def test_well_formed_decisions_round_trip(wanted):
    given = [{"index": i, "passed": p, "reason": r} for i, (p, r) in enumerate(wanted)]
    assert decided(given, len(wanted)) == [(p, r.strip()) for p, r in wanted]
