"""An episode's ``scores``: typed, and written exactly as they were given.

Until the scores were typed, an episode held them as plain data and wrote them back as
read; these check that a file keeps its bytes through a read and a write whatever subset
of the keys its scores have (in the order bat writes them), that the judges' two forms
are written as before, and that a file with keys this bat does not know still reads.
"""

from __future__ import annotations

import json

import pydantic_core
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.judging.scores import Outcome, combine
from bat.evaluation.log import store
from bat.evaluation.log.scores import NOT_JUDGED_INFRA, DimensionScore, JudgeScores, not_judged
from tests import logkit
from tests.logkit import NO_SECRETS

SCORE = st.one_of(st.none(), st.floats(0, 1, allow_nan=False))
TEXT = st.text(max_size=20)
DIMENSION = st.fixed_dictionaries(
    {"score": SCORE},
    optional={
        "reasoning": TEXT,
        "per_judge": st.dictionaries(TEXT, SCORE, max_size=2),
        "disagreement": SCORE,
    },
)
SCORES = st.fixed_dictionaries(
    {},
    optional={
        "rubric_version": st.one_of(st.none(), TEXT),
        "judges": st.lists(TEXT, max_size=2),
        "dimensions": st.dictionaries(TEXT, DIMENSION, max_size=3),
        "error": st.one_of(st.none(), TEXT),
        "judge_errors": st.dictionaries(TEXT, TEXT, max_size=2),
    },
)


def in_order(given: dict, model: type) -> dict:
    """``given`` with its keys in the order of ``model``'s fields: bat wrote them so."""
    return {name: given[name] for name in model.model_fields if name in given}


def file_text(scores: dict | None) -> str:
    """An episode file as bat wrote it while ``scores`` was plain data: the episode's
    JSON with ``scores`` put in as given (indent 1, text as it is)."""
    data = json.loads(logkit.episode("t", 1, True).to_json(NO_SECRETS))
    if scores is not None:
        scores = in_order(scores, JudgeScores)
        if "dimensions" in scores:
            dimensions = scores["dimensions"].items()
            scores["dimensions"] = {k: in_order(v, DimensionScore) for k, v in dimensions}
    data["scores"] = scores
    if scores is not None and "dimensions" in scores:
        data["qualitative_scores"] = {k: v["score"] for k, v in scores["dimensions"].items()}
    # serialized as bat's writer does (pydantic's JSON: 1e-7, where json.dumps says 1e-07)
    return pydantic_core.to_json(data, indent=1).decode("utf-8") + "\n"


@given(scores=st.one_of(st.none(), SCORES))
def test_a_file_read_and_written_again_keeps_its_bytes(tmp_path_factory, scores):
    path = tmp_path_factory.mktemp("scores") / "t__try1.json"
    text = file_text(scores)
    path.write_text(text, encoding="utf-8")
    assert store.read_episode(path).to_json(NO_SECRETS) == text


def test_the_judges_forms_are_written_as_before(tmp_path):
    judged = combine("bat.rubric/1", {"a:x": Outcome(None, "HTTP 500")})
    episode = logkit.episode("t", 1, True)
    episode.scores = judged
    written = json.loads(episode.to_json(NO_SECRETS))["scores"]
    keys = ["rubric_version", "judges", "dimensions", "error", "judge_errors", "usage"]
    assert list(written) == keys
    assert written["usage"] == {}  # a judge that failed took no tokens that are known
    assert list(written["dimensions"]["response_relevance"]) == [
        "score",
        "reasoning",
        "per_judge",
        "disagreement",
    ]
    episode.scores = not_judged()
    assert json.loads(episode.to_json(NO_SECRETS))["scores"] == {"error": NOT_JUDGED_INFRA}
    assert json.loads(episode.to_json(NO_SECRETS))["qualitative_scores"] is None


def test_keys_this_bat_does_not_know_are_ignored(tmp_path):
    path = tmp_path / "t__try1.json"
    text = file_text({"error": "judge timed out", "from_a_later_bat": {"x": 1}})
    path.write_text(text, encoding="utf-8")
    episode = store.read_episode(path)
    assert episode.scores == JudgeScores(error="judge timed out")
    assert "from_a_later_bat" not in episode.to_json(NO_SECRETS)


def test_an_unchanged_rejudge_rewrites_nothing(tmp_path):
    path = store.write_episode(
        tmp_path / "m", "t", logkit.episode("t", 1, True), scrubber=NO_SECRETS
    )
    assert store.write_scores(path, store.read_episode(path), not_judged(), scrubber=NO_SECRETS)
    written = path.stat().st_mtime_ns, path.read_text()
    assert not store.write_scores(path, store.read_episode(path), not_judged(), scrubber=NO_SECRETS)
    assert (path.stat().st_mtime_ns, path.read_text()) == written
    assert store.write_scores(
        path, store.read_episode(path), JudgeScores(error="other"), scrubber=NO_SECRETS
    )
