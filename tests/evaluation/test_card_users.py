"""Simulated users in the benchmark card, ``eval.compare``'s warnings and ``eval.show``.

No agent is started: the card is made by bat's own card writer (``write_card``) from an
eval.yaml and a dataset read by bat's loaders, in a run folder holding a real run.json;
``eval.compare``'s card warnings are its own function over two such run folders.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import yaml

from bat.evaluation.card import write_card
from bat.evaluation.inputs.config import load_config
from bat.evaluation.inputs.dataset import load_dataset
from bat.evaluation.inputs.schemas import schema
from bat.evaluation.log import run as rundir
from bat.evaluation.present.compare import card_warnings
from bat.secrets import Scrubber
from tests.evalkit import make_project

USER_RULES = "- match: how many\n  reply: '4 people ###STOP###'\n"
BOOK = {
    "id": "book",
    "user": {"instructions": "You are Ada; you want a table for 4.", "max_turns": 4},
    "expected": {"conversation_must_contain": ["how many"]},
}
FIXED = {"id": "fixed", "turns": ["hello"], "expected": {"output_must_contain": ["hello"]}}
PASSWORD = "user-pass-Q3r7"


def project(root: Path, tasks: list[dict], user: dict | None) -> Path:
    made = make_project(root, tasks, start=False)
    (made / "user-rules.yaml").write_text(USER_RULES)
    if user is not None:
        path = made / "eval" / "eval.yaml"
        config = yaml.safe_load(path.read_text())
        config["user"] = user
        path.write_text(yaml.safe_dump(config, sort_keys=False))
    return made


def carded_run(root: Path, name: str) -> Path:
    """A run folder of the project at ``root`` with its run.json and its card, as
    eval.run writes them before the first episode (the model folder: what compare reads)."""
    resolved = load_config(root / "eval" / "eval.yaml", base=root)
    dataset = load_dataset(resolved.dataset)
    run_dir = resolved.output_dir / name
    (run_dir / "agent-default").mkdir(parents=True)
    record = rundir.RunRecord(
        run_id=name, status="completed", started_at=rundir.now_iso(), config_file=str(root)
    )
    rundir.write_run(run_dir, record, scrubber=Scrubber())
    write_card(run_dir, resolved, dataset, Scrubber())
    return run_dir


def card_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "card.json").read_text())


def warnings(a: Path, b: Path) -> list[str]:
    return card_warnings(a / "agent-default", b / "agent-default")


def test_the_card_records_the_user_model_and_each_tasks_instructions(tmp_path):
    root = project(tmp_path, [BOOK, FIXED], {"script": "user-rules.yaml", "seed": 7})
    run_dir = carded_run(root, "run-1")
    text = (run_dir / "card.json").read_text()
    card = json.loads(text)
    jsonschema.Draft202012Validator(schema("card.json")).validate(card)
    rules = hashlib.sha256(USER_RULES.encode()).hexdigest()
    assert card["user_model"] == {
        "label": "script:user-rules.yaml",
        "provider": "openai",
        "model": "scripted",
        "base_url": None,
        "temperature": 0.0,
        "seed": 7,
        "concurrency": 8,
        "timeout_s": 60.0,
        "max_retries": 2,
        "script_sha256": rules,
    }
    instructions = hashlib.sha256(BOOK["user"]["instructions"].encode()).hexdigest()
    assert card["user_instructions"] == {"book": instructions}  # the fixed task: none

    # A chat model: its URL without credentials, no script hash.
    other = project(
        tmp_path / "chat",
        [BOOK],
        {"model": "m", "base_url": f"http://u:{PASSWORD}@127.0.0.1:9/v1", "temperature": 0.5},
    )
    user = card_of(carded_run(other, "run-2"))["user_model"]
    assert (user["label"], user["base_url"]) == ("openai:m", "http://127.0.0.1:9/v1")
    assert (user["temperature"], user["seed"], user["script_sha256"]) == (0.5, None, None)
    assert PASSWORD not in (other / "eval" / "output" / "run-2" / "card.json").read_text()


def test_a_run_without_simulated_users_keeps_its_card_as_it_was(tmp_path):
    # Even with a user: section, a dataset with no user task records no user model.
    root = project(tmp_path, [FIXED], {"script": "user-rules.yaml"})
    card = card_of(carded_run(root, "run-1"))
    assert "user_model" not in card and "user_instructions" not in card


def test_compare_warns_when_the_user_models_differ_either_way(tmp_path):
    plain = carded_run(project(tmp_path / "a", [FIXED], None), "plain")
    scripted = carded_run(
        project(tmp_path / "b", [BOOK, FIXED], {"script": "user-rules.yaml"}), "s"
    )
    seeded = carded_run(
        project(tmp_path / "c", [BOOK, FIXED], {"script": "user-rules.yaml", "seed": 7}), "seeded"
    )
    rules = hashlib.sha256(USER_RULES.encode()).hexdigest()[:12]
    shown = f"script:user-rules.yaml (temperature 0, seed {{}}, script {rules})"
    line = "the user models differ: {} in {}, {} in {}"
    assert line.format("none", "plain", shown.format(None), "s") in warnings(plain, scripted)
    assert line.format(shown.format(None), "s", "none", "plain") in warnings(scripted, plain)
    found = warnings(scripted, seeded)
    assert line.format(shown.format(None), "s", shown.format(7), "seeded") in found
    assert not any("instructions" in w for w in found)  # the same task, the same words
    again = carded_run(tmp_path / "c", "again")  # the same user model: no word of it
    assert not any("user" in w for w in warnings(seeded, again))


def test_compare_names_the_tasks_whose_instructions_changed(tmp_path):
    section = {"script": "user-rules.yaml"}
    before = carded_run(project(tmp_path / "a", [BOOK, FIXED], section), "before")
    changed = {**BOOK, "user": {**BOOK["user"], "instructions": "You are Bo; 2 people."}}
    after = carded_run(project(tmp_path / "b", [changed, FIXED], section), "after")
    found = warnings(before, after)
    assert "the simulated users' instructions differ between before and after (1 task: book)" in (
        found
    )
    assert not any("user models" in w for w in found)


def test_eval_show_shows_the_user_model_and_its_tasks(tmp_path, bat, home):
    section = {"script": "user-rules.yaml", "seed": 7, "env": {"USER_TOKEN": PASSWORD}}
    root = project(tmp_path, [BOOK, FIXED], section)
    text = bat("eval.show", cwd=root)
    assert text.code == 0, text.err
    assert (
        "user model     script:user-rules.yaml, scripted by bat from user-rules.yaml "
        "(temperature 0, seed 7, concurrency 8): 1 task with a simulated user"
    ) in text.out.splitlines()
    view = json.loads(bat("eval.show", "--json", cwd=root).out)
    assert view["dataset"]["simulated_users"] == 1
    assert view["user"]["label"] == "script:user-rules.yaml"
    assert (view["user"]["seed"], view["user"]["script"], view["user"]["env"]) == (
        7,
        "user-rules.yaml",
        ["USER_TOKEN"],  # by name only: a value may be a key
    )
    assert PASSWORD not in text.out + json.dumps(view)

    # A dataset of fixed turns only: no line, user null.
    plain = project(tmp_path / "plain", [FIXED], None)
    assert "user model" not in bat("eval.show", cwd=plain).out
    view = json.loads(bat("eval.show", "--json", cwd=plain).out)
    assert (view["user"], view["dataset"]["simulated_users"]) == (None, 0)


def test_run_json_keeps_the_user_model_without_its_secrets(tmp_path):
    """run.json's config holds eval.yaml's user: as the other sections: env by name only
    (a value may be a key), the URL without credentials."""
    from bat.evaluation.pipeline import _config_without_secrets

    section = {
        "model": "m",
        "base_url": f"http://u:{PASSWORD}@127.0.0.1:9/v1",
        "env": {"USER_KEY": PASSWORD},
        "seed": 3,
    }
    resolved = load_config(project(tmp_path, [BOOK], section) / "eval" / "eval.yaml", base=tmp_path)
    recorded = _config_without_secrets(resolved)["user"]
    assert PASSWORD not in json.dumps(recorded)
    assert (recorded["env"], recorded["base_url"]) == (["USER_KEY"], "http://127.0.0.1:9/v1")
    assert (recorded["model"], recorded["seed"]) == ("m", 3)
