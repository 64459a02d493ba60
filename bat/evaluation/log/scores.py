"""The ``scores`` of an episode file: what the judges said of it (schema ``scores``).

The judges (:mod:`bat.evaluation.judging`) fill these in; the statistics, the report, the
viewer and bat-cli's ``qualitative_scores`` read them. The log owns the shape so that its
readers need not import the judges::

    {"rubric_version": "bat.rubric/1",
     "judges": ["openai:gpt-4.1-mini", ...],
     "dimensions": {"response_relevance": {"score": 0.8,           # mean over judges, or None
                                           "reasoning": "...",
                                           "per_judge": {"openai:gpt-4.1-mini": 0.8},
                                           "disagreement": None},   # max - min, 2+ judges
                    ...},                                           # all four, always
     "error": None,                     # set when every judge failed: the reasons
     "judge_errors": {},                # label -> reason, for each judge that failed
     "assertions": [                    # only when the task has expected.assertions
        {"assertion": "The agent asked ...", "passed": True,   # None: no judge decided
         "reason": "...", "per_judge": {"openai:gpt-4.1-mini": True}}],
     "usage": {"openai:gpt-4.1-mini": {"prompt_tokens": 1830,     # what each judge's
                                       "completion_tokens": 212}}} # judgement took

Judges judge answers. An episode that ended in an infrastructure failure (bat saw no
answer) or failed with an agent error (the agent answered with an error, not with an
answer: an empty output, an exception's text) is not sent to any judge: its scores are
exactly ``{"error": "not judged: infrastructure failure"}`` or ``{"error": "not judged:
agent error"}`` (:func:`not_judged`), and it is left out of every judge mean. An agent
error that the task expected (its verdict passed) is the agent's answer, and is judged.

**Written as given.** A file holds the keys its scores were made with and no others:
the judges' full form, the one-key form above, or the subset of keys an older or
hand-made file has. A key never given is not written with its default, so a file read
and written again (``eval.verdict``, a re-judge that changes nothing) keeps its bytes.
Keys this bat does not know are ignored, as everywhere in the log.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from bat.evaluation.log.bounds import MAX_COUNT

Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]

NOT_JUDGED_INFRA = "not judged: infrastructure failure"
NOT_JUDGED_AGENT_ERROR = "not judged: agent error"
# The ``error`` of the scores of an episode no judge was sent, by its outcome's word
# (:class:`bat.evaluation.log.outcome.EpisodeOutcome`): the judges and the statistics
# both read this one table.
NOT_JUDGED = {"infra": NOT_JUDGED_INFRA, "error": NOT_JUDGED_AGENT_ERROR}


class DimensionScore(BaseModel):
    """One judge dimension of one episode: the mean over the judges that answered."""

    model_config = ConfigDict(allow_inf_nan=False)  # a judge's score is from 0 to 1

    score: float | None
    reasoning: str = ""
    per_judge: dict[str, float | None] = Field(default_factory=dict)
    disagreement: float | None = None  # max - min, with two judges or more


class AssertionScore(BaseModel):
    """One natural-language assertion of the task (``expected.assertions``), decided by
    the judges: passed by a majority of the judges that decided it (a tie fails); None
    when none did (``reason`` says why)."""

    assertion: str
    passed: bool | None
    reason: str = ""
    per_judge: dict[str, bool | None] = Field(default_factory=dict)


class JudgeTokens(BaseModel):
    """What one judge's judgement of an episode took, as its server said (0: it said
    nothing). A judgement read from the judge cache keeps the tokens it took when it was
    made: the episode's judge cost stays what judging it cost, and a re-judge from the
    cache rewrites nothing."""

    prompt_tokens: Count = 0
    completion_tokens: Count = 0


class JudgeScores(BaseModel):
    """An episode's ``scores``: what the judges said (made by ``bat.evaluation.judging``)."""

    # What bat writes has no other key (its schema says so); a file's unknown keys are
    # ignored when read, as in every file of the log.
    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    rubric_version: str | None = None
    judges: list[str] = Field(default_factory=list)
    dimensions: dict[str, DimensionScore] = Field(default_factory=dict)
    error: str | None = None  # set when every judge failed (or none was asked): the reasons
    judge_errors: dict[str, str] = Field(default_factory=dict)  # label -> reason
    # The task's assertions, in its order; given only when the task has some, so the
    # scores of every other episode keep their bytes.
    assertions: list[AssertionScore] = Field(default_factory=list)
    # Each judge's tokens (only judges that answered); given by this bat's judges only, so
    # an older file keeps its bytes.
    usage: dict[str, JudgeTokens] = Field(default_factory=dict)

    def as_written(self, mode: str = "python") -> dict[str, Any]:
        """The scores as an episode file holds them: the keys they were given, no other
        (an unset key is not written with its default)."""
        return self.model_dump(mode=mode, exclude_unset=True)

    def per_dimension(self) -> dict[str, float | None] | None:
        """The score per dimension (bat-cli's ``qualitative_scores``); None when no
        dimension was given (an episode not judged)."""
        if "dimensions" not in self.model_fields_set:
            return None
        return {name: dimension.score for name, dimension in self.dimensions.items()}


def not_judged(reason: str = NOT_JUDGED_INFRA) -> JudgeScores:
    """The scores of an episode no judge was sent (an infrastructure failure by default;
    ``reason`` is one of :data:`NOT_JUDGED`'s values)."""
    return JudgeScores(error=reason)


def was_not_judged(error: str | None) -> bool:
    """Whether the scores' ``error`` says the episode was not sent to a judge (as opposed
    to a judge that failed)."""
    return error in NOT_JUDGED.values()


__all__ = [
    "NOT_JUDGED",
    "NOT_JUDGED_AGENT_ERROR",
    "NOT_JUDGED_INFRA",
    "AssertionScore",
    "DimensionScore",
    "JudgeScores",
    "JudgeTokens",
    "not_judged",
    "was_not_judged",
]
