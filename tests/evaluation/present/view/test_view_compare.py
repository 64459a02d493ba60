"""The compare page of ``bat eval.view``, over HTTP against a real viewer process, over
two runs a real ``bat eval.run`` made against the echo agent, the dataset changed between
them so that one task regresses and one improves."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs
from tests.evaluation.present.view.test_view import viewer

XSS = "<script>alert(1)</script>"
COMPLETED = {"status": "completed"}


def tasks(down: str, up: str) -> list[dict]:
    return [
        {"id": "steady", "turns": ["hello"], "expected": COMPLETED},
        {"id": "goes-down", "turns": [down], "expected": COMPLETED},
        {"id": "goes-up", "turns": [up], "expected": COMPLETED},
        {"id": f"odd-{XSS}", "turns": ["hi"], "expected": COMPLETED},
    ]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    """The project, the earlier run, the later run, a HOME."""
    root = tmp_path_factory.mktemp("compare")
    home = root / "home"
    home.mkdir()
    project = make_project(root / "p", tasks("hello", "FAIL: not yet"))
    first = run_bat("eval.run", cwd=project, env={"HOME": str(home)}, timeout=120)
    assert first.code in (0, 1), first.err
    (project / "eval" / "input" / "tasks.json").write_text(
        json.dumps(tasks("FAIL: broken", "hello"))
    )
    second = run_bat("eval.run", cwd=project, env={"HOME": str(home)}, timeout=120)
    assert second.code in (0, 1), second.err
    earlier, later = sorted(run_dirs(project), key=lambda p: p.name)
    return project, earlier, later, home


def task_rows(page: str) -> list[tuple[str, str]]:
    """The (task, flip) of each row of the tasks table, in order."""
    found = re.findall(
        r'<tr class="task-row[^"]*"><td>([^<]*)</td>.*?<td>(\w*)</td></tr>', page, re.S
    )
    return [(html.unescape(t), f) for t, f in found]


def test_flipped_tasks_come_first(two_runs):
    project, earlier, later, home = two_runs
    with viewer(cwd=project, home=home) as view:
        status, headers, page = view.get(f"/compare?a={earlier.name}&b={later.name}/agent-default")
    assert status == 200, page
    assert "script-src 'self'" in headers["content-security-policy"]
    rows = task_rows(page)
    assert rows[:2] == [("goes-down", "regressed"), ("goes-up", "improved")]
    assert sorted(t for t, _ in rows[2:]) == sorted(["steady", f"odd-{XSS}"])
    assert "<b>1</b> regressed, <b>1</b> improved" in page
    # The figures spelled as the console and the report spell them.
    assert page.count('<td class="num">75.0 %</td>') == 2  # 3 tasks of 4 pass, both sides
    assert "4 tasks on both sides · mean change +0.0 points" in page
    assert "McNemar p = 1</p>" in page
    assert '<td class="num">-100.0 points</td>' in page
    assert '<td class="num">+100.0 points</td>' in page
    assert f'href="/runs/{earlier.name}"' in page and f'href="/runs/{later.name}"' in page
    assert "<script>alert" not in page and "odd-&lt;script&gt;" in page


def test_swapped_sides_swap_the_flips(two_runs):
    project, earlier, later, home = two_runs
    with viewer(cwd=project, home=home) as view:
        _, _, page = view.get(f"/compare?a={later.name}&b={earlier.name}")
    assert task_rows(page)[:2] == [("goes-up", "regressed"), ("goes-down", "improved")]


def test_the_form_offers_every_summarized_model_and_refuses_others(two_runs, tmp_path):
    project, earlier, later, home = two_runs
    with viewer(cwd=project, home=home) as view:
        status, _, form = view.get("/compare")
        missing, _, _ = view.get(f"/compare?a={earlier.name}/nobody&b={later.name}")
        outside, _, _ = view.get("/compare?a=../../etc&b=" + later.name)
        _, _, runs_page = view.get("/")
    assert status == 200
    options = re.findall(r'<option value="([^"]+)"( selected)?>', form)
    assert [value for value, _ in options][:2] == [
        f"{later.name}/agent-default",
        f"{earlier.name}/agent-default",
    ]
    assert 'id="tasks"' not in form  # nothing compared until both sides are chosen
    assert missing == 404 and outside == 404
    assert 'href="/compare"' in runs_page


def test_the_compare_page_in_chromium(two_runs, tmp_path, monkeypatch):
    from tests.evaluation.present.view.test_view_filters import look_in_chromium

    project, earlier, later, home = two_runs
    with viewer(cwd=project, home=home) as view:
        got = look_in_chromium(
            view.port,
            f"/compare?a={earlier.name}&b={later.name}",
            tmp_path / "compare.png",
            monkeypatch,
        )
    assert got["errors"] == [], got["errors"]
    assert got["scripts"] == 1 and not got["blank"]
    assert "regressed" in got["text"] and f"odd-{XSS}" in got["text"]
