"""The prices in the card, and ``eval.compare``'s warning when two runs' differ.

No agent is started: each card is written by bat's own card writer (``write_card``) with
the record of a real price book (eval.yaml's prices over genai-prices'), in a run folder
holding a real run.json; the warnings are compare's own over two such folders.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from bat.evaluation.card import write_card
from bat.evaluation.cost import PriceBook
from bat.evaluation.inputs.config import load_config
from bat.evaluation.inputs.dataset import load_dataset
from bat.evaluation.inputs.schemas import schema
from bat.evaluation.log import run as rundir
from bat.evaluation.present.compare import card_warnings
from bat.secrets import Scrubber
from tests.evalkit import make_project

TASKS = [{"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["hi"]}}]
MODELS = ["openai:m-one", "openai:gpt-4.1-mini"]


def carded_run(root: Path, name: str, prices: dict, version: str | None = None) -> Path:
    """A run folder with run.json and a card whose prices are ``prices`` (eval.yaml's),
    as eval.run writes them before the first episode."""
    made = make_project(root / name, TASKS, start=False)
    path = made / "eval" / "eval.yaml"
    config = yaml.safe_load(path.read_text()) | {"models": MODELS, "prices": prices}
    path.write_text(yaml.safe_dump(config))
    resolved = load_config(path, base=made)
    book = PriceBook(resolved.config.prices)
    book.look_up_all(resolved)
    record = book.record()
    if version is not None:
        record["version"] = version
    run_dir = root / "runs" / name
    (run_dir / "openai_m-one").mkdir(parents=True)
    done = rundir.RunRecord(
        run_id=name, status="completed", started_at=rundir.now_iso(), config_file=str(path)
    )
    rundir.write_run(run_dir, done, scrubber=Scrubber())
    write_card(run_dir, resolved, load_dataset(resolved.dataset), Scrubber(), record)
    return run_dir


def test_the_card_keeps_the_prices_and_compare_warns_when_they_differ(tmp_path):
    ours = {"openai:m-one": {"input": 0.5, "output": 2}}
    a = carded_run(tmp_path, "run-a", ours)
    card = json.loads((a / "card.json").read_text())
    jsonschema.Draft202012Validator(schema("card.json")).validate(card)
    assert card["prices"]["models"]["openai:m-one"]["source"] == "eval.yaml"
    assert card["prices"]["models"]["openai:gpt-4.1-mini"]["source"].startswith("genai-prices ")

    same = carded_run(tmp_path, "run-same", ours)
    assert card_warnings(a / "openai_m-one", same / "openai_m-one") == []

    dearer = carded_run(tmp_path, "run-b", {"openai:m-one": {"input": 0.5, "output": 3}})
    assert card_warnings(a / "openai_m-one", dearer / "openai_m-one") == [
        "the prices differ for 1 model: openai:m-one (0.5/2 USD per million tokens in/out "
        "in run-a, 0.5/3 USD per million tokens in/out in run-b)"
    ]
    newer = carded_run(tmp_path, "run-c", ours, version="9.9.9")
    (line,) = card_warnings(a / "openai_m-one", newer / "openai_m-one")
    assert line.startswith("the genai-prices version differs: ") and "9.9.9 in run-c" in line

    # A card from before prices were recorded: nothing to compare, nothing said.
    older = json.loads((newer / "card.json").read_text())
    del older["prices"]
    (newer / "card.json").write_text(json.dumps(older))
    assert card_warnings(a / "openai_m-one", newer / "openai_m-one") == []
