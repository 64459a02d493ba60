"""Agent errors read from what the agent said: a closed set of kinds, whatever the words.

The end-to-end tests (test_eval_agents.py) make real agents fail every way over every
binding; these check the reading of the words alone, with the messages real providers and
frameworks put in an agent's failed status.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.evaluation.log.episode import AGENT_ERROR_KINDS, AgentError, InfraError, Verdict
from bat.evaluation.log.outcome import (
    CREDENTIAL_KINDS,
    MESSAGE_CHARS,
    episode_outcome,
    from_state,
    row_outcome,
)
from bat.evaluation.stats import row_of
from tests import logkit

STATES = ("failed", "rejected", "canceled")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (
            "Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-...'}}",
            "authentication_failed",
        ),
        ("AuthenticationError: invalid x-api-key", "authentication_failed"),
        # BAT-ADK's words for an OpenAI client without a key (issue 28), and the client's
        ("Agent execution failed (OpenAIError)", "authentication_failed"),
        (
            "The api_key client option must be set either by passing api_key",
            "authentication_failed",
        ),
        ("Missing credentials. Please pass an `apiKey`", "authentication_failed"),
        ("openai.PermissionDeniedError: Error code: 403", "authentication_failed"),
        ("openai.RateLimitError: Error code: 429", "rate_limited"),
        ("MyOpenAIErrors are not OpenAI's", "unknown"),
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


# --- what an episode came to ----------------------------------------------------------------

VERDICTS = st.sampled_from([None, (False, False), (True, False), (True, True)])  # passed, vacuous


def _episode(verdict, infra, agent_error):
    episode = logkit.episode("t", 1, False)
    episode.verdict = (
        None if verdict is None else Verdict(passed=verdict[0], reason="r", vacuous=verdict[1])
    )
    episode.infra_error = InfraError(kind=infra, message="m") if infra else None
    episode.agent_error = AgentError(kind=agent_error, message="m") if agent_error else None
    return episode


@given(
    verdict=VERDICTS,
    infra=st.sampled_from([None, "timeout", "crash"]),
    agent_error=st.sampled_from([None, "rate_limited", "authentication_failed", "refused"]),
)
def test_an_episode_and_its_metrics_row_come_to_the_same_outcome(verdict, infra, agent_error):
    """One order for every reader: an infrastructure failure, else the verdict's pass,
    else the agent's error, else a failure; the file and its row agree on it. An agent
    error of the model's credentials that did not pass is an infrastructure failure of
    its kind (the agent did not really run)."""
    episode = _episode(verdict, infra, agent_error)
    outcome = episode_outcome(episode)
    passed = verdict is not None and verdict[0]
    credentials = agent_error in CREDENTIAL_KINDS and not passed and not infra
    if credentials:
        infra, agent_error = agent_error, None
    expected = "infra" if infra else "pass" if passed else "error" if agent_error else "fail"
    assert outcome.word == expected
    assert outcome.passed == (expected == "pass")
    assert outcome.vacuous == (expected == "pass" and verdict[1])
    assert (outcome.infra, outcome.agent_error) == (infra, agent_error)  # both kept, always
    assert outcome.kind == (infra or agent_error)
    assert row_outcome(row_of(episode)) == outcome


def test_a_row_of_an_older_file_with_empty_kinds_is_no_failure():
    row = row_of(_episode((True, False), None, None)).model_copy(
        update={"infra_error": "", "agent_error": ""}
    )
    assert row_outcome(row).word == "pass" and row_outcome(row).kind is None


CREDENTIAL_WORDS = (
    "Agent execution failed (OpenAIError)",
    "Missing credentials",
    "api_key client option must be set",
    "401 invalid api key",
    "AuthenticationError",
)


@given(
    before=st.text(max_size=300),
    words=st.sampled_from(CREDENTIAL_WORDS),
    after=st.text(max_size=300),
)
def test_credential_words_anywhere_are_authentication_failed(before, words, after):
    """Whatever surrounds them, a missing or refused key's words class the failure (they
    are read first), and the message kept is bounded."""
    error = from_state("failed", f"{before} {words} {after}")
    assert error.kind == "authentication_failed"
    assert 0 < len(error.message) <= MESSAGE_CHARS


@settings(deadline=None)  # the first example imports httpx and a2a
@given(message=st.text(max_size=2000))
def test_classifying_any_exception_text_never_crashes(message):
    from bat.evaluation.log.outcome import classify

    found = classify(RuntimeError(message))
    assert isinstance(found, AgentError | InfraError)
    assert len(found.message) <= MESSAGE_CHARS


def test_a_credential_failure_is_an_infrastructure_failure_unless_it_passed():
    """The agent's model was never asked: out of pass@k, against the trust budget."""
    for kind in CREDENTIAL_KINDS:
        failed = episode_outcome(_episode((False, False), None, kind))
        assert (failed.word, failed.infra, failed.agent_error) == ("infra", kind, None)
        expected = episode_outcome(_episode((True, False), None, kind))  # the task wanted it
        assert (expected.word, expected.agent_error) == ("pass", kind)
