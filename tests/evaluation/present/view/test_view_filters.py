"""The run page's filters and the compare page of ``bat eval.view``, over HTTP against a
real viewer process, over runs a real ``bat eval.run`` made against the echo agent."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.evaluation.present.view.test_view import finished_run, viewer

XSS = "<script>alert(1)</script> <img src=x onerror=alert(2)>"
TASKS = [
    {"id": "greet-1", "turns": ["hello there"], "tags": ["smoke"]},
    {"id": "greet-2", "turns": ["hello again zebra"], "tags": ["smoke", "greeting"]},
    {"id": "hostile", "turns": [f"zebra {XSS}"]},
    {"id": "refused", "turns": ["FAIL: nope"], "expected": {"status": "completed"}},
    {"id": "question", "turns": ["ASK me"], "expected": {"status": "completed"}},
]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A project with one finished run of TASKS (k=2): the project, the run, a HOME."""
    return finished_run(tmp_path_factory.mktemp("filters"), TASKS, codes=(0, 1), k=2)


def rows(page: str) -> list[tuple[str, str, str]]:
    """The (task, attempt, outcome) of each row of the matches table."""
    found = re.findall(
        r'<tr class="match"><td>[^<]*</td><td>([^<]*)</td><td class="num">(\d+)</td>\s*'
        r'<td><a class="cell (\w+)"',
        page,
    )
    return [(html.unescape(t), a, o) for t, a, o in found]


def grid_tasks(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<th class="task" title="([^"]*)"', page)]


def test_without_filters_the_page_is_live_and_lists_no_matches(project):
    root, run_dir, home = project
    with viewer(cwd=root, home=home) as view:
        status, _, page = view.get(f"/runs/{run_dir.name}")
    assert status == 200
    assert 'data-page="run"' in page
    assert 'id="matches"' not in page
    assert '<form class="filters" method="get"' in page
    assert '<option value="smoke">' in page and '<option value="greeting">' in page
    assert grid_tasks(page) == [t["id"] for t in TASKS]


def test_task_glob_tag_and_status_filters(project):
    root, run_dir, home = project
    base = f"/runs/{run_dir.name}"
    with viewer(cwd=root, home=home) as view:
        _, _, by_glob = view.get(f"{base}?task=greet-*")
        _, _, by_tag = view.get(f"{base}?tag=greeting")
        _, _, failed = view.get(f"{base}?status=fail")
        _, _, passed_smoke = view.get(f"{base}?status=pass&tag=smoke")
        _, _, nothing = view.get(f"{base}?task=nope*")
    assert 'data-page="run-filtered"' in by_glob  # not live: the grid is partial
    assert [(t, a) for t, a, _ in rows(by_glob)] == [
        ("greet-1", "1"),
        ("greet-1", "2"),
        ("greet-2", "1"),
        ("greet-2", "2"),
    ]
    assert grid_tasks(by_glob) == ["greet-1", "greet-2"]
    assert {t for t, _, _ in rows(by_tag)} == {"greet-2"}
    assert grid_tasks(by_tag) == ["greet-2"]
    assert rows(failed) and all(o == "fail" for _, _, o in rows(failed))
    assert {t for t, _, _ in rows(failed)} == {"question"}  # "refused" is an agent error
    assert {t for t, _, _ in rows(passed_smoke)} == {"greet-1", "greet-2"}
    assert "0 episodes match" in nothing and rows(nothing) == []


def test_error_class_and_model_filters(project):
    root, run_dir, home = project
    base = f"/runs/{run_dir.name}"
    with viewer(cwd=root, home=home) as view:
        _, _, page = view.get(base)
        kinds = re.findall(r'name="error">(.*?)</select>', page, re.S)[0]
        choices = [k for k in re.findall(r'<option value="([^"]+)"', kinds)]
        assert choices, "the refused task is an agent error: its kind is a choice"
        _, _, by_error = view.get(f"{base}?error={choices[0]}")
        _, _, other_model = view.get(f"{base}?model=no-such-model")
        _, _, this_model = view.get(f"{base}?model=agent-default&task=refused")
    assert {t for t, _, _ in rows(by_error)} == {"refused"}
    assert "0 episodes match" in other_model and 'class="grid"' not in other_model
    assert len(rows(this_model)) == 2 and 'class="grid"' in this_model


def test_a_search_over_answers_shows_them_as_text(project):
    root, run_dir, home = project
    base = f"/runs/{run_dir.name}"
    with viewer(cwd=root, home=home) as view:
        _, _, zebra = view.get(f"{base}?q=ZEBRA")
        _, _, script = view.get(f"{base}?q=%3Cscript%3E")
    assert {t for t, _, _ in rows(zebra)} == {"greet-2", "hostile"}
    assert len(rows(zebra)) == 4
    assert {t for t, _, _ in rows(script)} == {"hostile"}
    for page in (zebra, script):
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'value="&lt;script&gt;"' in script  # the search box shows the words, escaped


def test_matches_are_paginated(project, monkeypatch):
    root, run_dir, home = project
    with viewer(cwd=root, home=home) as view:
        _, _, first = view.get(f"/runs/{run_dir.name}?task=*&page=1")
        _, _, beyond = view.get(f"/runs/{run_dir.name}?task=*&page=99")
    assert "10 episodes match" in first and len(rows(first)) == 10
    assert rows(beyond) == rows(first)  # a page past the last is the last
    assert "next</a>" not in first


def look_in_chromium(port: int, path: str, shot: Path, monkeypatch) -> dict:
    """``path`` at 1366×768 in headless Chromium: its text, scripts, style and console
    errors (CSP violations included); the screenshot is written to ``shot``."""
    import base64
    import time

    from tests.evaluation.present.plot import test_report_browser as chromium

    browser = chromium.laptop_browser(shot.parent / f"{shot.stem}-profile", monkeypatch)
    try:
        session = browser.open(f"http://127.0.0.1:{port}{path}")
        time.sleep(0.3)
        got = browser.send(
            "Runtime.evaluate",
            session,
            expression="({text: document.body.innerText, "
            "scripts: document.querySelectorAll('script').length, "
            "styled: getComputedStyle(document.body).backgroundColor})",
            returnByValue=True,
        )["result"]["value"]
        image = browser.send("Page.captureScreenshot", session, format="png")
        browser.send("Runtime.evaluate", session, expression="1")
        got["errors"] = chromium.errors_of(browser.events, session)
    finally:
        browser.close()
    png = base64.b64decode(image["data"])
    shot.write_bytes(png)
    got["blank"] = chromium.png_is_blank(png)
    return got


def test_a_filtered_page_in_chromium(project, tmp_path, monkeypatch):
    root, run_dir, home = project
    with viewer(cwd=root, home=home) as view:
        got = look_in_chromium(
            view.port, f"/runs/{run_dir.name}?q=zebra", tmp_path / "filtered.png", monkeypatch
        )
    assert got["errors"] == [], got["errors"]
    assert got["scripts"] == 1 and not got["blank"]
    assert got["styled"] == "rgb(246, 247, 249)"  # the style sheet loaded under the CSP
    assert "4 episodes match" in got["text"]
    assert XSS in got["text"]  # the answer is text on the page, not markup
