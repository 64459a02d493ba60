"""Run folders whose episodes have a cost, made by bat's own code: real episodes
(``tests/logkit``), priced by :mod:`bat.evaluation.cost` from a ``prices:`` entry (the
agent's and the judge's tokens), summarized by the real ``summarize``."""

from __future__ import annotations

from pathlib import Path

from bat.evaluation.cost import PriceBook, episode_cost, with_judges
from bat.evaluation.inputs.prices import Prices
from bat.evaluation.log.episode import Usage
from tests import logkit

# Per million tokens: an agent prompt token costs a millionth, a completion token two.
PRICES = {"m": {"input": 1, "output": 2}, "judge": {"input": 3, "output": 6}}
JUDGE_TOKENS = Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120)


class Spec:
    """A models: or judge: entry as far as prices go: a stand-in model (``script:``), so
    only ``prices:`` prices it and genai-prices is never asked."""

    def __init__(self, label: str) -> None:
        self.provider, self.model = label.split(":", 1)
        self.script = "rules.json"


def write_run(
    output: Path,
    run_id: str,
    letters: dict[str, str],
    *,
    agent: str = "script:m",
    judge: str = "script:judge",
    currency: str | None = None,
    priced: bool = True,
    tokens: int = 10,
) -> Path:
    """A finished run of one model ``m`` (``letters`` as :func:`logkit.outcomes`): each
    episode priced (agent ``tokens`` prompt tokens, half as many completion tokens, and
    one judge call) unless not ``priced`` (a run of a bat before prices); an ``agent`` or
    ``judge`` not in :data:`PRICES` is unpriced."""
    run_dir = logkit.new_run(output, run_id, list(letters))
    episodes = logkit.outcomes(letters, prompt_tokens=tokens, completion_tokens=tokens // 2)
    if priced:
        entries = {name: {**entry, "currency": currency or "USD"} for name, entry in PRICES.items()}
        book = PriceBook(Prices.model_validate(entries))
        for item in episodes:
            cost = episode_cost(book, item, Spec(agent))
            item.cost = with_judges(cost, book, [(Spec(judge), JUDGE_TOKENS)])
    logkit.write_model(run_dir / "m", episodes, run_id=run_id)
    return run_dir
