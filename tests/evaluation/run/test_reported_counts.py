"""Token and call counts an agent reports (its stream's metadata, its span file) are
recorded only when they are counts a run's files may hold: a NaN ended the episode as a
protocol failure (``int(nan)`` raised), and 10^400 tokens made the run unreadable."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.log.bounds import MAX_COUNT, count_problem, reported_count
from bat.evaluation.log.episode import EpisodeTrace
from bat.evaluation.run.turn_events import add_reported

WILD = [math.nan, math.inf, -math.inf, -5, 10**400, 1e300, 2.5, "12", True, None, [3], {}]


@pytest.mark.parametrize("wild", WILD, ids=repr)
def test_a_wild_count_in_the_stream_is_not_recorded_and_the_episode_goes_on(wild):
    trace = EpisodeTrace(context_id="c")
    usage = {"prompt_tokens": wild, "completion_tokens": 7, "total_tokens": wild}
    add_reported(trace, {"usage": usage, "model_calls": wild}, source="stream")
    assert trace.usage.prompt_tokens == 0
    assert trace.usage.completion_tokens == 7
    assert trace.usage.total_tokens == 7  # the parts' sum, as when none is reported
    assert trace.usage.model_calls == 0
    # What is recorded can be written and read back by the log's own model.
    assert EpisodeTrace.model_validate_json(trace.model_dump_json()) == trace


def test_counts_that_are_counts_are_recorded_as_sent():
    trace = EpisodeTrace(context_id="c")
    usage = {"prompt_tokens": 20, "completion_tokens": 5.0, "total_tokens": MAX_COUNT}
    add_reported(trace, {"usage": usage, "model_calls": 2}, source="stream")
    assert trace.usage.model_dump() == {
        "prompt_tokens": 20,
        "completion_tokens": 5,
        "total_tokens": MAX_COUNT,
        "model_calls": 2,
    }


@given(st.one_of(st.integers(), st.floats(), st.text(max_size=8), st.booleans(), st.none()))
def test_any_reported_value_becomes_a_count_the_log_accepts(value):
    count = reported_count(value)
    assert type(count) is int and count_problem("tokens", count) is None
