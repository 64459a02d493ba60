"""Agent errors read from what the agent said: a closed set of kinds, whatever the words.

The end-to-end tests (test_eval_agents.py) make real agents fail every way over every
binding; these check the reading of the words alone, with the messages real providers and
frameworks put in an agent's failed status.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.log.episode import AGENT_ERROR_KINDS
from bat.evaluation.log.outcome import MESSAGE_CHARS, from_state

STATES = ("failed", "rejected", "canceled")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (
            "Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-...'}}",
            "authentication_failed",
        ),
        ("AuthenticationError: invalid x-api-key", "authentication_failed"),
        (
            "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4.1-mini'}}",
            "rate_limited",
        ),
        ("insufficient_quota: You exceeded your current quota", "rate_limited"),
        ("RESOURCE_EXHAUSTED: too many requests", "rate_limited"),
        ("Request timed out.", "timeout"),
        ("httpx.ReadTimeout while calling the weather tool", "timeout"),
        ("openai.InternalServerError: Error code: 500", "model_error"),
        ("anthropic.APIStatusError: overloaded_error: Overloaded", "model_error"),
        ("model 'llama3.2:1b' not found, try pulling it first", "model_error"),
        ("This model's maximum context length is 8192 tokens", "model_error"),
        ("I refuse to help with that", "refused"),
        ("the plan step failed", "unknown"),
        ("", "unknown"),
    ],
)
def test_the_words_of_a_failed_task(message, kind):
    error = from_state("failed", message)
    assert error.kind == kind and error.state == "failed"


def test_the_state_decides_when_the_words_do_not():
    assert from_state("rejected", "no").kind == "refused"
    assert from_state("canceled", "Rate limit reached").kind == "canceled"
    assert from_state("failed", "").message == "the task ended failed"


@given(state=st.sampled_from(STATES), message=st.text(max_size=2000))
def test_any_message_gives_a_kind_of_the_closed_set(state, message):
    error = from_state(state, message)
    assert error.kind in AGENT_ERROR_KINDS
    assert 0 < len(error.message) <= MESSAGE_CHARS
    assert "\n" not in error.message
