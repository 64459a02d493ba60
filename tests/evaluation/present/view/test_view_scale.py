"""``bat eval.view`` on runs larger than one page: the grid in pages of task rows, counts
that cover every task (live too, in Chromium), a search that reads the answers from the
episode files, and the charts page. Runs are made by a real ``bat eval.run`` against the
echo agent."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from tests.evalkit import make_project, start_bat
from tests.evaluation.present.view.test_view import finished_run, viewer, wait_for_run

ROWS = 100  # the grid's task rows on a page (pages.GRID_ROWS)
# 130 tasks: a second page of the grid; the two agent errors are on it, off the first
MANY = [{"id": f"t{n:03}", "turns": [f"task {n}"], "expected": {}} for n in range(128)]
MANY += [{"id": f"t{n:03}", "turns": ["FAIL: late"], "expected": {}} for n in (128, 129)]


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, Path, Path]:
    return finished_run(tmp_path_factory.mktemp("view-scale"), MANY, concurrency=16, charts=True)


def cells(page: str) -> list[str]:
    return re.findall(r'id="(c0-\d+-\d+)"', page)


def test_the_grid_comes_in_pages_of_task_rows_and_the_counts_cover_all(big):
    project, run_dir, home = big
    with viewer(cwd=project, home=home) as view:
        _, _, first = view.get(f"/runs/{run_dir.name}")
        _, _, second = view.get(f"/runs/{run_dir.name}?grid=2")
        _, _, beyond = view.get(f"/runs/{run_dir.name}?grid=99")
    assert cells(first) == [f"c0-{row}-1" for row in range(ROWS)]
    assert cells(second) == [f"c0-{row}-1" for row in range(ROWS, len(MANY))]
    assert cells(beyond) == cells(second)  # past the last page: the last one
    assert "Tasks 1–100 of 130 · page 1 of 2" in first and 'href="?grid=2"' in first
    assert "Tasks 101–130 of 130 · page 2 of 2" in second
    for page in (first, second):  # every task counted, whichever rows are shown
        assert re.search(r'id="done-0">130<', page)
        assert re.search(r'id="n-0-pass">128</b> <span class="word"[^>]*>passed<', page)
        assert re.search(r'id="n-0-error">2</b> <span class="word"[^>]*>agent errors<', page)


def test_filters_keep_their_page_of_the_grid(big):
    project, run_dir, home = big
    with viewer(cwd=project, home=home) as view:
        _, _, page = view.get(f"/runs/{run_dir.name}?task=t1*&grid=2")
    # t1* is t100-t129 (30 rows): one page, whatever page was asked for
    assert cells(page) == [f"c0-{row}-1" for row in range(100, 130)]
    assert "page 1 of" not in page


def test_a_search_reads_the_answers_from_the_episode_files(big, tmp_path):
    """The viewer keeps no answer in memory (a run can have millions): a search reads
    the files, so an episode file gone unreadable since is no longer found."""
    import shutil

    project, run_dir, home = big
    copy = tmp_path / "copy" / "eval" / "output"
    shutil.copytree(run_dir, copy / run_dir.name)
    episodes = copy / run_dir.name / "agent-default" / "episodes"
    with viewer("-f", str(copy), cwd=project, home=home) as view:
        _, _, before = view.get(f"/runs/{run_dir.name}?q=task+127")
        for path in episodes.glob("t1*.json"):
            path.write_text("{")  # unreadable now
        time.sleep(1.0)  # past the viewer's look at the folder (0.5 s): a new page
        _, _, after = view.get(f"/runs/{run_dir.name}?q=task+127")
    assert "1 episode match" in before and "echo: task 127" in before
    assert "0 episodes match" in after and "echo: task 127" not in after


def test_the_charts_page_shows_what_eval_plot_drew(big, tmp_path):
    project, run_dir, home = big
    output = run_dir.parent
    with viewer(cwd=project, home=home) as view:
        status, _, page = view.get("/charts")
        assert status == 200
        for name in ("pass_rate", "task_heatmap", "pass_hat_k", "latency", "tokens"):
            assert f'<img src="/charts/{name}.svg"' in page
            status, headers, svg = view.get(f"/charts/{name}.svg")
            assert status == 200 and headers["content-type"].startswith("image/svg+xml")
            assert "default-src 'none'" in headers["content-security-policy"]
            assert svg == (output / f"{name}.svg").read_text()
        assert "judge_scores" not in page  # not drawn: no run has judge scores
        for path in ("/charts/report.html", "/charts/..%2Frun.json", "/charts/x.svg"):
            assert view.get(path)[0] == 404, path
    empty = tmp_path / "nothing-yet"
    empty.mkdir()
    with viewer("-f", str(empty), cwd=project, home=home) as view:
        status, _, page = view.get("/charts")
    assert status == 200 and "No charts here yet" in page


def test_a_chart_that_is_a_link_is_not_served(big, tmp_path):
    project, _, home = big
    folder = tmp_path / "runs"
    folder.mkdir()
    secret = tmp_path / "secret.svg"
    secret.write_text("<svg>not a chart of ours</svg>")
    (folder / "pass_rate.svg").symlink_to(secret)
    with viewer("-f", str(folder), cwd=project, home=home) as view:
        assert view.get("/charts/pass_rate.svg")[0] == 404
        assert "pass_rate" not in view.get("/charts")[2]


PAGED_FACTS = """(() => ({
  status: document.getElementById('run-status').textContent,
  shown: document.querySelectorAll('table.grid a.cell, table.grid .cell.pending').length,
  filled: document.querySelectorAll('table.grid a.cell').length,
  done: document.getElementById('done-0').textContent,
  passed: document.getElementById('n-0-pass').textContent,
  errors: document.getElementById('n-0-error').parentElement.innerText,
}))()"""


def test_a_live_page_counts_the_episodes_of_rows_it_does_not_show(tmp_path, home, monkeypatch):
    """The first page of the grid shows 100 of 130 rows; the run's last two episodes (agent
    errors, off this page) are counted as they land, without a reload."""
    from tests.evaluation.present.plot import test_report_browser as chromium

    browser = chromium.laptop_browser(tmp_path / "chromium-profile", monkeypatch)
    project = make_project(tmp_path / "p", MANY, concurrency=4, agent_env={"LATENCY_MS": "60"})
    run = start_bat("eval.run", cwd=project, home=home)
    try:
        run_dir = wait_for_run(project, run)
        with viewer(cwd=project, home=home) as view:
            session = browser.open(f"http://127.0.0.1:{view.port}/runs/{run_dir.name}")

            def facts() -> dict:
                got = browser.send(
                    "Runtime.evaluate", session, expression=PAGED_FACTS, returnByValue=True
                )
                return got["result"]["value"]

            at_load = facts()
            deadline = time.monotonic() + 120
            now = at_load
            while now["status"] == "running" and time.monotonic() < deadline:
                time.sleep(0.2)
                now = facts()
            browser.send("Runtime.evaluate", session, expression="1")
            errors = chromium.errors_of(browser.events, session)
        assert run.wait(timeout=120) == 0, run.communicate()
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            run.wait(timeout=30)
        browser.close()
    assert errors == [], errors
    assert int(at_load["done"]) < len(MANY), "the run was over before the page"
    assert now["status"] == "completed", now
    assert now["shown"] == now["filled"] == ROWS
    assert now["done"] == "130" and now["passed"] == "128"
    assert now["errors"] == "2 agent errors"


def test_many_streams_of_one_live_run_each_get_every_episode_once(tmp_path, home):
    """The streams share one look at the folder per interval; each still gets every
    episode exactly once, in order, then the end, whenever it joined."""
    import threading

    from tests.evaluation.present.view.test_view import Stream

    tasks = [{"id": f"t{n:02}", "turns": [f"task {n}"], "expected": {}} for n in range(40)]
    project = make_project(tmp_path / "p", tasks, concurrency=2, agent_env={"LATENCY_MS": "80"})
    run = start_bat("eval.run", cwd=project, home=home)
    got: dict[int, list] = {}
    try:
        run_dir = wait_for_run(project, run)
        with viewer(cwd=project, home=home) as view:

            def follow(n: int) -> None:
                time.sleep(0.05 * n)  # they join one after another, while the run goes
                stream = Stream(view.port, f"/runs/{run_dir.name}/events")
                got[n] = [(event, ident) for event, ident, _ in stream.events()]
                stream.close()

            threads = [threading.Thread(target=follow, args=(n,)) for n in range(20)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
        assert run.wait(timeout=120) == 0, run.communicate()
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            run.wait(timeout=30)
    expected = [("episode", str(n)) for n in range(len(tasks))] + [("end", None)]
    assert sorted(got) == list(range(20))
    assert all(events == expected for events in got.values()), got
