"""The box turn templates render in (issue 27): depth refused at load, sizes, loop steps
and time bounded at render, Ctrl-C acted on, and a generated-template property test."""

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs import template_sandbox, turn_templates
from bat.evaluation.inputs.template_sandbox import (
    MAX_NESTING,
    MAX_OUTPUT_CHARS,
    MAX_TAG_TOKENS,
    Budget,
)
from bat.evaluation.inputs.turn_templates import (
    RenderError,
    TemplateProblem,
    check_turns,
    compile_turns,
    render_turn,
)
from tests.evalkit import make_project, run_dirs

DONE = [SimpleNamespace(input="a", status="completed", output="xyz")]


def render(source, seconds=0.5):
    """``source`` as turn 2 after one turn answered ``xyz``: checked, compiled, rendered."""
    turns = ["a", source]
    check_turns(turns)
    return render_turn(compile_turns(turns)[1], DONE, Budget(seconds))


def refused_at_render(source, seconds=0.5):
    started = time.monotonic()
    with pytest.raises(RenderError) as caught:
        render(source, seconds)
    assert time.monotonic() - started < seconds + 0.5
    message = str(caught.value)
    assert message and "\n" not in message
    return message


# -- loops and time --------------------------------------------------------------------


def test_nested_loops_over_long_texts_stop_within_the_budget():
    source = "{% for a in 'x'*999999 %}{% for b in 'x'*999999 %}{% endfor %}{% endfor %}"
    assert "loops ran more than 100,000 times" in refused_at_render(source)


# Two calls a level, 60 levels: no loop, no growth, and never ending without a clock.
EXPONENTIAL = "{% macro m(n) %}{% if n %}{{ m(n-1) }}{{ m(n-1) }}{% endif %}{% endmacro %}"


def test_calls_without_loops_stop_at_the_time_budget():
    assert "longer than 0.2 s" in refused_at_render(EXPONENTIAL + "{{ m(60) }}", seconds=0.2)


def test_a_cancelled_episode_stops_its_render_at_once():
    """Ctrl-C cancels the episode's task; the render runs in a worker thread, so the
    event loop takes the cancel at once and the thread stops at its next step."""
    from bat.evaluation.run import adapter

    template = compile_turns(["a", EXPONENTIAL + "{{ m(60) }}"])
    threads = threading.active_count()

    async def cancel_while_rendering():
        task = asyncio.create_task(adapter._render(template[1], DONE, 30.0))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert asyncio.run(cancel_while_rendering()) < 0.2
    deadline = time.monotonic() + 1
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= threads  # the worker thread stopped too


def test_ctrl_c_during_a_long_render_ends_bat_at_once(tmp_path, home):
    """A real ``bat eval.run`` interrupted while a template renders (each render here
    lasts its whole 2 s budget): exit 130 with one line within moments, where the render
    used to hold the event loop, and with it Ctrl-C, until it ended."""
    import signal
    import subprocess

    from tests.evalkit import start_bat

    turns = ["hello", EXPONENTIAL + "{{ m(60) }}"]
    tasks = [{"id": f"t{i}", "turns": turns} for i in range(3)]
    project = make_project(tmp_path, tasks, concurrency=1)
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
        deadline = time.monotonic() + 30
        while not list(project.glob("eval/**/agent-*.process.json")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
            time.sleep(0.05)
        time.sleep(1.0)  # the agent answered turn 1 in milliseconds: turn 2 is rendering
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        _, err = proc.communicate(timeout=10)
        elapsed = time.monotonic() - started
    except subprocess.TimeoutExpired:
        pytest.fail("bat did not act on Ctrl-C within 10 s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert elapsed < 1.5, elapsed
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("bat: error: interrupted"), err


# -- sizes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("{{ 'x'.ljust(999999999) }}", "a width for ljust() above 1,000,000"),
        ("{{ 'x'.center(999999999) }}", "a width for center() above 1,000,000"),
        ("{{ 'x'.zfill(999999999) }}", "a width for zfill() above 1,000,000"),
        ("{{ 'x' | center(999999999) }}", "a width for center above 1,000,000"),
        ("{{ 'x' | indent(999999999, true) }}", "an indent width above 1,000,000"),
        ("{{ 'a\nb' | indent('y' * 999999, true) }}", "indent would make more than"),
        ("{{ '%0999999999d' % 1 }}", "a width above 1,000,000"),
        ("{{ '%.999999999f' % 1.5 }}", "a width above 1,000,000"),
        ("{{ '%0999999999d' | format(1) }}", "a width above 1,000,000"),
        ("{{ '{:>999999999}'.format(1) }}", "a width above 1,000,000"),
        ("{{ '{:>{}}'.format(1, 999999999) }}", "a width above 1,000,000"),
        ("{{ '{0}{0}{0}{0}'.format('x' * 400000) }}", "format() would make more than"),
        (
            "{% set s = 'x' * 400000 %}{{ '%(a)s%(a)s%(a)s' % {'a': s} }}",
            "% formatting would make more than",
        ),
        ("{{ ('x' * 999999) | replace('x', 'yy') }}", "replace would make more than"),
        ("{{ 'x'.replace('', 'y' * 999999) }}", "replace() would make more than"),
        ("{{ ('y' * 999999) | join('y' * 999999) }}", "join would make more than"),
        ("{{ ('y' * 999).join('y' * 99999) }}", "join() would make more than"),
        ("{% set x = 'x' * 600000 %}{{ x ~ x }}", "joining with ~ would make more than"),
        ("{% set x = 'x' * 600000 %}{{ x + x }}", "joining two values with + would make"),
        ("{% set x = 'x' * 999999 %}{{ x * 2 }}", "a repetition would make more than"),
        ("{% set s = 'x' * 300000 %}{{ [s, s, s, s] | length }}", "a list would make more"),
        ("{{ 'x' | batch(999999999, 'y') | list }}", "batch by more than 10,000"),
        ("{{ 'x' | slice(999999999) | list }}", "slice by more than 10,000"),
        ("{{ (1).to_bytes(999999999, 'big') }}", "int.to_bytes() is not allowed"),
        ("{{ 'x'.translate({120: 'y' * 99999}) }}", "str.translate() is not allowed"),
        ("{{ 'x\tx'.expandtabs(999999999) }}", "a tab size above 1,000,000"),
        ("{{ (10 ** 64) ** 64 ** 1 * (10 ** 64) ** 60 }}", "a number of more than"),
    ],
)
def test_growing_operations_are_refused_before_they_grow(source, said):
    assert said in refused_at_render(source)


def test_doubling_a_text_ends_with_a_clear_error_not_a_memory_error():
    doubling = "{% set x = prev.output %}" + "{% set x = x ~ x %}" * 40 + "{{ x | length }}"
    assert "joining with ~ would make more than 1,000,000 characters" in (
        refused_at_render(doubling)
    )


def test_everything_made_in_one_render_is_counted():
    """A macro's text is not an operation of its own: it is counted as it is written."""
    source = (
        "{% set s = 'x' * 900000 %}"
        "{% macro m() %}{{ s }}{% endmacro %}"
        "{% for i in 'abcdefghijkl' %}{{ m() | length }}{% endfor %}"
    )
    assert "more than 10,000,000 characters in all" in refused_at_render(source)


def test_the_turn_itself_is_bounded():
    source = "{% set s = 'x' * 600000 %}{{ s }}{{ s }}"
    assert "longer than 1,000,000 characters" in refused_at_render(source)


def test_ordinary_templates_still_render():
    source = (
        "{{ prev.output ~ '!' }} {{ '%s-%05d' % (prev.output, 3) }} "
        "{{ '{}:{:>4}'.format(prev.output, 1) }} {{ prev.output | center(7) }}|"
        "{{ ['a', 'b'] | join(',') }} {{ prev.output | replace('y', 'Y') }} "
        "{{ prev.output.ljust(5, '.') }} {% for t in turns %}[{{ t.output }}]{% endfor %} "
        "{{ prev.output | indent(2, true) }} {{ 2 ** 10 }} {{ '%(a)s' % {'a': 1} }}"
    )
    assert render(source) == "xyz! xyz-00003 xyz:   1   xyz  |a,b xYz xyz.. [xyz]   xyz 1024 1"
    assert render("{{ '%d%%' | format(50) }} {{ 'x' * 3 }}") == "50% xxx"


# -- depth and names, at load ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("{{ " + "(" * 500 + "1" + ")" * 500 + " }}", "nested too deep"),
        ("{% if 1 %}" * 1000 + "x" + "{% endif %}" * 1000, "nested too deep"),
        ("{% for a in turns %}" * 300 + "{% endfor %}" * 300, "nested too deep"),
        ("{{ " + "[" * 10000 + " }}", "nested too deep"),
        ("{{ " + "not " * 300 + "1 }}", f"a tag of more than {MAX_TAG_TOKENS} tokens"),
        ("{{ " + " + ".join(["1"] * 300) + " }}", f"a tag of more than {MAX_TAG_TOKENS}"),
        ("{{ prev.output" + " | upper" * 300 + " }}", f"a tag of more than {MAX_TAG_TOKENS}"),
        ("{{ self }}", "'self' is not allowed"),
        ("{{ prev.output | attr('__class__') }}", "the filter 'attr' is not allowed"),
        ("{{ prev.output | attr('upper') }}", "the filter 'attr' is not allowed"),
        ("{{ turns | map(attribute='__class__') | list }}", "'__class__' is not allowed"),
        ("{% for t in turns recursive %}{{ loop(turns) }}{% endfor %}", "recursive loop"),
    ],
)
def test_deep_or_forbidden_templates_are_refused_at_load(source, said):
    started = time.monotonic()
    with pytest.raises(TemplateProblem) as caught:
        check_turns(["a", source])
    assert time.monotonic() - started < 0.5
    assert said in str(caught.value) and str(caught.value).startswith("turn 2: ")
    assert "\n" not in str(caught.value)


def test_nesting_up_to_the_limit_is_allowed():
    depth = MAX_NESTING // 2
    source = "{% if prev.output %}" * depth + "{{ " + "(" * depth + "1" + ")" * depth + " }}"
    assert render(source + "{% endif %}" * depth) == "1"


@pytest.mark.parametrize(
    "turn",
    ["{{ " + "(" * 500 + "1" + ")" * 500 + " }}", "{{ self }}", "{{ prev.output|attr('x') }}"],
)
def test_a_refused_template_exits_2_naming_file_task_and_turn(tmp_path, bat, home, turn):
    project = make_project(tmp_path, [{"id": "deep", "turns": ["hello", turn]}])
    result = bat("eval.show", cwd=project)
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    (line,) = [line for line in result.err.splitlines() if "turn 2" in line]
    assert "tasks.json" in line and "task 'deep'" in line
    assert run_dirs(project) == []


# -- generated templates ---------------------------------------------------------------

ATOMS = [
    "prev.output",
    "turns[0].output",
    "turn_1.status",
    "'x'",
    "'%05d'",
    "'{:>9}'",
    "1",
    "999999999",
    "[1, 2]",
    "turns",
    "self",
    "'x' * 99999",
]
FILTERS = [
    "upper",
    "center(999999999)",
    "indent(99)",
    "replace('x', 'yy')",
    "join('ab')",
    "format(3)",
    "batch(3, 'y')",
    "length",
    "attr('__class__')",
    "list",
    "string",
]
OPERATORS = [" * ", " + ", " ~ ", " % ", " ** ", " // "]
METHODS = [".ljust(999999999)", ".format(1)", ".replace('x', 'xx')", ".upper()", ".split()"]


def expressions():
    atom = st.sampled_from(ATOMS)
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(OPERATORS), inner).map("".join),
            st.tuples(inner, st.sampled_from(FILTERS)).map(lambda p: f"({p[0]}) | {p[1]}"),
            st.tuples(inner, st.sampled_from(METHODS)).map(lambda p: f"({p[0]}){p[1]}"),
            inner.map(lambda e: f"({e})"),
        ),
        max_leaves=6,
    )


def templates():
    """Template sources: output tags, loops and conditions over generated expressions,
    nested, with stray brackets and tag markers mixed in."""
    tag = st.one_of(
        expressions().map(lambda e: "{{ " + e + " }}"),
        st.sampled_from(["{{", "}}", "{%", "%}", "(", "[", "{% endfor %}", "{% raw %}", "x"]),
    )
    return st.recursive(
        st.lists(tag, min_size=1, max_size=4).map("".join),
        lambda inner: st.one_of(
            st.tuples(expressions(), inner).map(
                lambda p: "{% for a in " + p[0] + " %}" + p[1] + "{% endfor %}"
            ),
            st.tuples(expressions(), inner).map(
                lambda p: "{% if " + p[0] + " %}" + p[1] + "{% endif %}"
            ),
            st.lists(inner, min_size=2, max_size=3).map("".join),
        ),
        max_leaves=4,
    )


SECONDS = 0.3


def verdict(source):
    """What is wrong with how bat treats ``source`` as turn 2, or None: load gives a
    template or one TemplateProblem line; render gives text within the limits or one
    RenderError line; never anything else, never past the time budget."""
    turns = ["a", source]
    started = time.monotonic()
    try:
        check_turns(turns)
    except TemplateProblem as exc:
        return None if str(exc) and "\n" not in str(exc) else f"problem of lines: {exc!r}"
    except Exception as exc:
        return f"load raised {type(exc).__name__}: {exc}"
    try:
        text = render_turn(compile_turns(turns)[1], DONE, Budget(SECONDS))
    except RenderError as exc:
        text = None
        if not str(exc) or "\n" in str(exc):
            return f"render error of lines: {exc!r}"
    except Exception as exc:
        return f"render raised {type(exc).__name__}: {exc}"
    if text is not None and len(text) > MAX_OUTPUT_CHARS:
        return f"rendered {len(text)} characters"
    if time.monotonic() - started > SECONDS + 1:
        return f"took {time.monotonic() - started:.1f} s"
    return None


GENERATED = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


@GENERATED
@given(templates())
def test_generated_templates_load_or_render_within_the_limits(source):
    assert verdict(source) is None, source


def test_the_generated_check_can_fail(monkeypatch):
    """Canary: with a parser that raises a bare ValueError on a loop, the same property
    finds it; the property above is able to fail."""
    real = turn_templates._problem.__wrapped__

    def broken(text, index):
        if "for" in text:
            raise ValueError("boom")
        return real(text, index)

    monkeypatch.setattr(turn_templates, "_problem", broken)

    @settings(GENERATED, phases=[Phase.generate])  # found is enough: no shrinking
    @given(templates())
    def same_property(source):
        assert verdict(source) is None, source

    with pytest.raises(AssertionError, match="load raised ValueError: boom"):
        same_property()


def test_the_limits_module_is_what_renders():
    """The module's names the docs quote (docs/security.md)."""
    assert template_sandbox.MAX_VALUE_CHARS == 1_000_000
    assert template_sandbox.MAX_RENDER_SECONDS == 2.0


def test_a_run_records_a_limit_as_the_template_failure_of_that_episode(tmp_path, bat, home):
    """The limit reached in a real ``eval.run``: the episode ends before that turn with
    the infrastructure failure ``template`` naming the limit; the other task passes."""
    from tests.evalkit import episodes

    loops = "{% for a in 'x' * 999999 %}{% for b in 'x' * 999999 %}{% endfor %}{% endfor %}"
    tasks = [
        {"id": "loops", "turns": ["hello", loops]},
        {"id": "fine", "turns": ["hello"], "expected": {"output_must_contain": ["echo"]}},
    ]
    project = make_project(tmp_path, tasks)
    result = bat("eval.run", cwd=project)
    assert result.code == 3, result.out + result.err
    assert "Traceback" not in result.err
    (run_dir,) = run_dirs(project)
    found = {e["task_id"]: e for e in episodes(run_dir).values()}
    infra = found["loops"]["infra_error"]
    assert infra["kind"] == "template"
    assert infra["message"] == (
        "turn 2 could not be made from its template: loops ran more than 100,000 times in all"
    )
    assert [t["input"] for t in found["loops"]["trace"]["turns"]] == ["hello"]
    assert found["fine"]["verdict"]["passed"]


# -- what an outside probe found (each a traceback or a wrong text before) --------------


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("{{ prev.output|truncate(1) }}", "AssertionError"),  # Jinja's own assert
        ("{{ prev.output|truncate(5, leeway=-100) }}", "AssertionError"),
        ("{{ prev.output|dictsort }}", "AttributeError"),
        ("{{ prev.output|xmlattr }}", "AttributeError"),
        ('{{ "\\ud800" }}', "lone surrogate"),  # no JSON writer can hold it
        ("{{ turns }}", "a turn is printed whole"),  # an object's address otherwise
        ("{{ turns|first }}", "a turn is printed whole"),
        ("{{ turns|join(',') }}", "a turn is printed whole"),
    ],
)
def test_a_filter_or_a_value_that_fails_is_the_template_failure_of_its_turn(source, said):
    assert said in refused_at_render(source)
