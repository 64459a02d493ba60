"""A tasks.json's judge instruction and evidence files (``meta.llm_scorer_*``).

Read with belt's rules (one shared module), when the dataset loads: each hostile or
missing path is one line naming the task and the path, before anything runs.
"""

import json
import os

import pytest

from bat.errors import InputError
from bat.evaluation.inputs import evidence
from bat.evaluation.inputs.dataset import check_dataset, load_dataset


def dataset(folder, *meta):
    path = folder / "tasks.json"
    tasks = [{"id": f"t{n}", "turns": ["hi"], "meta": m} for n, m in enumerate(meta)]
    path.write_text(json.dumps(tasks))
    return path


def refusal(path):
    with pytest.raises(InputError) as caught:
        load_dataset(path)
    message = caught.value.message
    assert not caught.value.details and "\n" not in message
    return message


def test_evidence_is_read_into_meta_and_the_snapshot_stands_alone(tmp_path):
    (tmp_path / "rubric.md").write_text("the rubric")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "facts.txt").write_text("the facts")
    files = ["rubric.md", "notes/facts.txt"]
    path = dataset(
        tmp_path,
        {"llm_scorer_instruction": "be strict", "llm_scorer_evidence_files": files},
        {"llm_scorer_evidence_files": ["rubric.md"]},  # one file, two tasks: read once
        {},
    )
    loaded = load_dataset(path)
    first = loaded.tasks[0].meta
    assert first["llm_scorer_instruction"] == "be strict"
    assert first["llm_scorer_evidence_files"] == [
        {"path": "rubric.md", "text": "the rubric"},
        {"path": "notes/facts.txt", "text": "the facts"},
    ]
    # The run's snapshot holds the texts: loaded from anywhere, it is the same dataset.
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    (elsewhere / "tasks.json").write_bytes(loaded.snapshot)
    again = load_dataset(elsewhere / "tasks.json")
    assert again.sha256 == loaded.sha256 and again.snapshot is None
    assert [t.meta for t in again.tasks] == [t.meta for t in loaded.tasks]
    # eval.show's check (no task kept) reads them too: the same hash, the same refusals.
    assert check_dataset(path).sha256 == loaded.sha256
    # A key spelled with JSON escapes is the same key.
    escaped = tmp_path / "escaped.json"
    escaped.write_text(
        '[{"id": "e", "turns": ["hi"], "meta": {"llm\\u005fscorer_evidence_files": ["gone"]}}]'
    )
    assert "'gone': no such file" in refusal(escaped)
    with pytest.raises(InputError, match="no such file"):
        check_dataset(escaped)
    # A dataset without judge words keeps its own bytes as its snapshot.
    plain = dataset(tmp_path / "run", {})
    assert load_dataset(plain).snapshot is None


def test_hostile_or_missing_evidence_is_one_line(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(root / "pipe")
    with open(root / "huge.txt", "wb") as handle:
        handle.truncate(evidence.EVIDENCE_LIMIT + 1)  # sparse: nothing written
    cases = {
        "../secret.txt": "'..' is not allowed in an evidence path",
        str(tmp_path / "secret.txt"): "an absolute path; give it relative to tasks.json",
        "link.txt": "leads out of the dataset folder",
        "pipe": "is not a regular file",
        "gone.md": "no such file",
        "huge.txt": "an evidence file may be at most 1.0 MiB",
    }
    for relative, why in cases.items():
        path = dataset(root, {"llm_scorer_evidence_files": [relative]})
        line = refusal(path)
        assert line.startswith(f"{path}: task 't0': meta.llm_scorer_evidence_files[0]: ")
        assert repr(relative[:80]) in line or str(root / relative) in line, line
        assert why in line, line
    many = dataset(root, {"llm_scorer_evidence_files": ["a"] * 21})
    assert "expected a list of at most 20 paths" in refusal(many)
    long = dataset(root, {"llm_scorer_instruction": "x" * 10_001})
    assert "meta.llm_scorer_instruction: expected text of at most 10,000" in refusal(long)
