"""Charts rendered once per change (``.charts.json``), and in parallel."""

import json
import re

from bat.evaluation.present.plot import render as render_module
from bat.evaluation.present.plot.render import RENDERED, plot_folder, render
from bat.evaluation.present.plot.runs import find_runs
from bat.evaluation.present.plot.specs import build_charts
from tests.evaluation.present.plot.runkit import write_run
from tests.logkit import NO_SECRETS

TASKS = {"alpha": "PPF", "beta": "FFF", "gamma": "PPP"}


def same_ids(svg: str) -> str:
    return re.sub(r"\b(gradient|clip|pattern)_?\d+", r"\1_N", svg)


def identities(folder):
    """(inode, mtime) of every chart file: an atomic rewrite changes the inode."""
    return {
        path.name: (path.stat().st_ino, path.stat().st_mtime_ns)
        for path in sorted(folder.iterdir())
        if path.suffix in (".svg", ".png")
    }


def test_an_unchanged_chart_is_not_rendered_again_and_a_changed_one_is(tmp_path, monkeypatch):
    write_run(tmp_path, "20260101-000000-a", "openai:gpt-4.1-mini", TASKS)
    first = plot_folder(tmp_path, scrubber=NO_SECRETS)
    before = identities(tmp_path)
    assert len(before) == 2 * 5  # five charts (no judge scores), PNG and SVG
    drawn = json.loads((tmp_path / RENDERED).read_text())
    assert sorted(drawn) == sorted(name.rsplit(".", 1)[0] for name in before if ".svg" in name)

    rendered = []
    real_render = render_module.render
    monkeypatch.setattr(
        render_module,
        "render",
        lambda chart_set: (
            rendered.append([c.name for c in chart_set.charts if not c.svg]),
            real_render(chart_set),
        ),
    )
    second = plot_folder(tmp_path, scrubber=NO_SECRETS)
    assert rendered == [[]]  # nothing changed: nothing to render
    assert identities(tmp_path) == before  # and no chart file rewritten
    assert second.written == first.written  # the report still lists, and links, them all
    report = (tmp_path / "report.html").read_text()
    assert report.count("data:image/svg+xml;base64,") == 5  # embedded from the files

    (tmp_path / "latency.png").unlink()  # a file gone: that chart is drawn again
    write_run(tmp_path, "20260102-000000-b", "openai:gpt-4.1-mini", {"alpha": "FFF"})
    plot_folder(tmp_path, scrubber=NO_SECRETS)
    after = identities(tmp_path)
    # a second run changes every chart's data, so all are drawn again
    assert sorted(rendered[-1]) == sorted(drawn)
    assert all(after[name] != before[name] for name in before if name in after)


def test_a_damaged_record_of_what_was_drawn_only_means_drawing_again(tmp_path):
    write_run(tmp_path, "20260101-000000-a", "openai:gpt-4.1-mini", TASKS)
    plot_folder(tmp_path, scrubber=NO_SECRETS)
    before = identities(tmp_path)
    for damage in ("not json", "[1, 2]", '{"pass_rate": 7}'):
        (tmp_path / RENDERED).write_text(damage)
        plot_folder(tmp_path, scrubber=NO_SECRETS)
        after = identities(tmp_path)
        assert after.keys() == before.keys()
        assert after["pass_rate.svg"] != before["pass_rate.svg"]
        before = after
        assert isinstance(json.loads((tmp_path / RENDERED).read_text())["pass_rate"], str)


def test_parallel_rendering_draws_what_one_thread_draws(tmp_path):
    write_run(tmp_path, "20260101-000000-a", "openai:gpt-4.1-mini", TASKS, judge=True)
    runs = find_runs(tmp_path, [])
    one, several = build_charts(runs), build_charts(runs)
    render(one, threads=1)
    render(several, threads=4)
    assert [c.name for c in several.charts] == [c.name for c in one.charts]
    assert len(one.charts) == 6
    # the converter numbers gradients across all it draws (gradient_0, gradient_1...)
    assert [same_ids(c.svg) for c in several.charts] == [same_ids(c.svg) for c in one.charts]
    assert all(c.png.startswith(b"\x89PNG") for c in several.charts)
