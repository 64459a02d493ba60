"""The deterministic verdict: each expectation kind passing and failing, reasons in order."""

import pytest

from bat.evaluation.inputs.dataset import TaskExpected
from bat.evaluation.log.episode import (
    AgentCall,
    EpisodeResult,
    EpisodeTrace,
    InfraError,
    ToolCall,
    TurnRecord,
    Usage,
)
from bat.evaluation.verdict import judge_episode, subset_matches


def episode(
    output="The capital is Paris.",
    status="completed",
    tools=(),
    usage=None,
    agents=(),
    turns=None,
    infra=None,
):
    trace = EpisodeTrace(
        context_id="c",
        tool_calls=[ToolCall(**t) for t in tools],
        usage=usage or Usage(),
        agent_calls=[AgentCall(name=a) for a in agents],
        turns=turns or [TurnRecord(input="q", status=status, output=output)],
    )
    return EpisodeResult(
        task_id="t",
        attempt=1,
        model="m",
        status=status,
        final_output=output,
        trace=trace,
        infra_error=infra,
        started_at="",
        ended_at="",
    )


def verdict(expected, **kwargs):
    return judge_episode(TaskExpected.model_validate(expected), episode(**kwargs))


def test_reason_lists_every_check_in_order():
    result = verdict(
        {
            "status": "completed",
            "output_must_contain": ["Paris", "Rome"],
            "tool_calls": [{"name": "search"}],
        },
    )
    assert not result.passed
    assert result.reason == (
        "status: 'completed'; output: contains 'Paris'; output: missing 'Rome'; "
        "tool_call:search: called 0×, expected ≥1×"
    )


@pytest.mark.parametrize(
    ("expected", "kwargs", "passed"),
    [
        ({"status": "completed"}, {}, True),
        ({"status": "input-required"}, {}, False),
        ({"status": "failed"}, {"status": "error"}, True),
        ({"output_must_contain": ["Paris"]}, {}, True),
        ({"output_must_contain": ["paris"]}, {}, False),
        ({"output_must_not_contain": ["London"]}, {}, True),
        ({"output_must_not_contain": ["Paris"]}, {}, False),
        ({"output_regex": r"capital is \w+\."}, {}, True),
        ({"output_regex": r"^Paris$"}, {}, False),
        ({"max_model_calls": 2}, {"usage": Usage(model_calls=2)}, True),
        ({"max_model_calls": 2}, {"usage": Usage(model_calls=3)}, False),
        ({"max_tokens": 100}, {"usage": Usage(total_tokens=100)}, True),
        ({"max_tokens": 100}, {"usage": Usage(total_tokens=101)}, False),
        ({"no_errors": True}, {"tools": [{"name": "a"}]}, True),
        ({"no_errors": True}, {"tools": [{"name": "a", "error": True}]}, False),
        ({"no_errors": True}, {"turns": [TurnRecord(input="q", status="error")]}, False),
        ({"agent_calls": [{"name": "planner"}]}, {"agents": ["planner"]}, True),
        ({"agent_calls": [{"name": "planner", "times": 2}]}, {"agents": ["planner"]}, False),
    ],
)
def test_each_expectation_kind(expected, kwargs, passed):
    assert verdict(expected, **kwargs).passed is passed


SEARCHES = [
    {"name": "search", "args": {"query": "rome", "filters": {"lang": "it", "max": 5}}},
    {"name": "calc", "args": '{"expression": "1+1"}'},  # as a span file gives them
    {"name": "search", "args": {"query": "paris"}},
]


@pytest.mark.parametrize(
    ("want", "passed", "detail"),
    [
        ({"name": "search"}, True, "tool_call:search: called 2×"),
        ({"name": "search", "times": 3}, False, "tool_call:search: called 2×, expected ≥3×"),
        ({"name": "search", "args_subset": {"filters": {"lang": "it"}}}, True, None),
        ({"name": "search", "args_subset": {"filters": {"lang": "fr"}}}, False, None),
        ({"name": "calc", "args_subset": {"expression": "1+1"}}, True, None),
        ({"name": "missing"}, False, "tool_call:missing: called 0×, expected ≥1×"),
    ],
)
def test_tool_call_expectations(want, passed, detail):
    result = verdict({"tool_calls": [want]}, tools=SEARCHES)
    assert result.passed is passed
    if detail:
        assert result.checks[-1].detail == detail


def test_tool_call_order_is_a_subsequence():
    assert verdict({"tool_call_order": ["search", "search"]}, tools=SEARCHES).passed
    assert verdict({"tool_call_order": ["calc", "search"]}, tools=SEARCHES).passed
    failing = verdict({"tool_call_order": ["calc", "calc"]}, tools=SEARCHES)
    assert not failing.passed
    assert "not found in search → calc → search" in failing.reason


def test_infrastructure_failure_fails_with_its_reason():
    result = judge_episode(
        TaskExpected(), episode(infra=InfraError(kind="timeout", message="turn 1 got no answer"))
    )
    assert not result.passed
    assert result.reason == "infrastructure: timeout: turn 1 got no answer"


def test_subset_matching():
    assert subset_matches({"a": [1, {"b": 2}]}, {"a": [1.0, {"b": 2, "c": 3}], "z": 0})
    assert not subset_matches({"a": [1]}, {"a": [1, 2]})
    assert not subset_matches({"a": True}, {"a": 1})
    assert not subset_matches({"a": 1}, {"b": 1})
    assert subset_matches({}, {"anything": 1})
