"""Reading input files safely: size, file kind, UTF-8, YAML bounds, duplicate keys, lines.

Every YAML/JSON file bat reads (eval.yaml, tasks.json, ./bat.yaml, ~/.bat.yaml, the -f
file) goes through ``bat.input_files``. Through the real ``bat`` command, each bad file
must end as exit 2 with one ``bat: error:`` line naming it, no traceback, and quickly.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.errors import InputError
from bat.evaluation.inputs import dataset as dataset_module
from bat.evaluation.inputs.dataset import check_dataset, load_dataset
from bat.input_files import (
    ALIAS_BUDGET,
    CONFIG_LIMIT,
    MAX_DEPTH,
    dotted,
    json_lines,
    parse_json,
    parse_yaml,
)
from bat.locate import line_index

# Nine levels of nine: 9**9 (387 million) items once expanded, 10 lines of text.
BOMB = "".join(
    [
        'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n',
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)),
    ]
)


def one_clean_error(result, name: str) -> str:
    """The single ``bat: error:`` line of a failed run, which must name ``name``."""
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    errors = [line for line in result.err.splitlines() if line.startswith("bat: error:")]
    assert len(errors) == 1, result.err
    assert name in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def project(tmp_path, bat, home):
    result = bat("eval.init", cwd=tmp_path)
    assert result.code == 0, result.err
    return tmp_path


# -- bat.yaml, ~/.bat.yaml and -f: every command reads them ----------------------------


def test_an_alias_bomb_in_bat_yaml_fails_fast(tmp_path, bat, home):
    (tmp_path / "bat.yaml").write_text(BOMB)
    start = time.monotonic()
    result = bat("version", cwd=tmp_path, timeout=30)
    assert time.monotonic() - start < 15  # it used to hang in Invoke's merge
    line = one_clean_error(result, "bat.yaml")
    assert "alias" in line and "(line " in line


def test_an_alias_bomb_is_refused_in_well_under_a_second():
    start = time.monotonic()
    with pytest.raises(InputError, match=r"bomb\.yaml: a\d\[\d\] \(line \d\): aliases expand"):
        parse_yaml(BOMB, "bomb.yaml")
    assert time.monotonic() - start < 0.5


def test_sharing_a_block_with_aliases_is_fine():
    text = "base: &base {provider: openai, env: {A: '1'}}\nmodels: [*base, *base]\n"
    data = parse_yaml(text, "ok.yaml")
    assert data["models"] == [data["base"], data["base"]]


def test_a_merge_key_may_be_overridden_but_a_key_not_repeated():
    merged = parse_yaml("b: &b {x: 1, y: 2}\nk:\n  <<: *b\n  x: 3\n", "m.yaml")
    assert merged["k"] == {"x": 3, "y": 2}
    with pytest.raises(InputError, match=r"d\.yaml: k\.x \(line 3\): duplicate key"):
        parse_yaml("k:\n  x: 1\n  x: 2\n", "d.yaml")


def test_a_recursive_alias_is_an_error():
    with pytest.raises(InputError, match=r"r\.yaml: a\.b \(line 2\): alias \*x .*own anchor"):
        parse_yaml("a: &x\n  b: *x\n", "r.yaml")


def test_nesting_is_bounded():
    deep = "a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n"
    with pytest.raises(InputError, match=f"nested deeper than {MAX_DEPTH} levels"):
        parse_yaml(deep, "deep.yaml")


@pytest.mark.parametrize("where", ["project", "home"])
def test_duplicate_keys_in_bat_yaml(tmp_path, bat, home, where):
    folder = tmp_path if where == "project" else home
    name = "bat.yaml" if where == "project" else ".bat.yaml"
    (folder / name).write_text("eval:\n  file: a.yaml\n  file: b.yaml\n")
    line = one_clean_error(bat("version", cwd=tmp_path), name)
    assert "eval.file (line 3): duplicate key" in line


@pytest.mark.parametrize("where", ["project", "dash-f"])
def test_duplicate_keys_in_a_json_settings_file(tmp_path, bat, home, where):
    name = "bat.json" if where == "project" else "given.json"
    (tmp_path / name).write_text('{"eval": {"file": "a.yaml", "file": "b.yaml"}}')
    args = ["version"] if where == "project" else ["-f", name, "version"]
    line = one_clean_error(bat(*args, cwd=tmp_path), name)
    assert "eval.file (line 1): duplicate key (the later one would win)" in line


@pytest.mark.parametrize("name", ["bat.yaml", "home/.bat.yaml", "given.yaml", "given.json"])
def test_non_utf8_config_files_name_the_line_and_byte(tmp_path, bat, home, name):
    path = tmp_path / name
    path.write_bytes(
        b"# ok\n" + (b'{"a": "caf\xe9"}\n' if name.endswith("json") else b"a: caf\xe9\n")
    )
    args = ("-f", str(path), "version") if name.startswith("given") else ("version",)
    line = one_clean_error(bat(*args, cwd=tmp_path), path.name)
    assert "not UTF-8 text (line 2, byte offset" in line


def test_a_config_file_that_is_a_fifo_or_a_device_is_refused(tmp_path, bat, home):
    os.mkfifo(tmp_path / "bat.yaml")  # reading it would wait for a writer for ever
    line = one_clean_error(bat("version", cwd=tmp_path, timeout=30), "bat.yaml")
    assert "not a regular file" in line
    (tmp_path / "bat.yaml").unlink()
    (tmp_path / "bat.yaml").symlink_to("/dev/zero")
    assert "not a regular file" in one_clean_error(bat("version", cwd=tmp_path), "bat.yaml")


def test_a_dash_f_file_that_is_a_fifo_or_a_directory_is_refused(tmp_path, bat, home):
    os.mkfifo(tmp_path / "settings.yaml")
    result = bat("-f", "settings.yaml", "version", cwd=tmp_path, timeout=30)
    assert "not a regular file" in one_clean_error(result, "settings.yaml")
    (tmp_path / "folder.yaml").mkdir()
    result = bat("-f", "folder.yaml", "version", cwd=tmp_path, timeout=30)
    assert "is a directory" in one_clean_error(result, "folder.yaml")


def test_an_alias_bomb_in_the_agents_config_yaml_fails_fast(project, bat):
    """The agent's own config.yaml is read by the same bounded reader as bat's files."""
    (project / "config.yaml").write_text(BOMB)
    start = time.monotonic()
    line = one_clean_error(bat("eval.run", cwd=project, timeout=60), "config.yaml")
    assert time.monotonic() - start < 15 and "aliases expand" in line
    assert not list((project / "eval/output").iterdir())  # no run folder begun
    shown = one_clean_error(bat("eval.show", cwd=project, timeout=60), "config.yaml")
    assert "aliases expand" in shown  # eval.show refuses what eval.run would


def test_the_agents_config_yaml_as_a_fifo_is_named_not_ignored(project, bat):
    os.mkfifo(project / "config.yaml")
    line = one_clean_error(bat("eval.run", cwd=project, timeout=30), "config.yaml")
    assert "not a regular file" in line


def test_a_huge_config_file_is_refused_before_it_is_read(tmp_path, bat, home):
    (tmp_path / "bat.yaml").write_text("# padding\n" * (CONFIG_LIMIT // 10 + 1))
    line = one_clean_error(bat("version", cwd=tmp_path), "bat.yaml")
    assert "may be at most 1.0 MiB" in line


def test_yaml_syntax_errors_name_the_file_and_line(tmp_path, bat, home):
    (tmp_path / "bat.yaml").write_text("eval:\n  file: [unclosed\n")
    line = one_clean_error(bat("version", cwd=tmp_path), "bat.yaml")
    assert "invalid YAML (line 3" in line and "<unicode string>" not in line


# -- eval.yaml ---------------------------------------------------------------------------


def test_a_bomb_plus_a_validation_error_in_eval_yaml_fails_fast(project, bat):
    path = project / "eval/eval.yaml"
    path.write_text(re.sub(r"(?m)^  k: \d+", "  k: 0", path.read_text()) + BOMB)
    start = time.monotonic()
    line = one_clean_error(bat("eval.show", cwd=project, timeout=60), "eval/eval.yaml")
    assert time.monotonic() - start < 15  # the line mapper once expanded it (4.4 GB)
    assert "aliases expand" in line


def test_duplicate_keys_in_eval_yaml(project, bat):
    path = project / "eval/eval.yaml"
    text = re.sub(r"(?m)^  k: \d+", "  k: 2\n  k: 3", path.read_text())
    path.write_text(text)
    line = one_clean_error(bat("eval.show", cwd=project), "eval/eval.yaml")
    second = next(n for n, row in enumerate(text.splitlines(), 1) if row.startswith("  k: 3"))
    assert f"eval/eval.yaml: evaluation.k (line {second}): duplicate key" in line


def test_eval_yaml_or_dataset_pointing_at_dev_zero(project, bat):
    result = bat("eval.show", cwd=project, env={"BAT_EVAL_FILE": "/dev/zero"}, timeout=30)
    assert "not a regular file" in one_clean_error(result, "/dev/zero")
    path = project / "eval/eval.yaml"
    path.write_text(re.sub(r"(?m)^  dataset: .*$", "  dataset: /dev/zero", path.read_text()))
    result = bat("eval.show", cwd=project, timeout=30)
    assert "not a regular file" in one_clean_error(result, "/dev/zero")


def test_lines_of_eval_yaml_with_aliases_are_where_the_alias_is_written():
    text = "base: &b\n  provider: openai\nmodels:\n  - *b\n  - *b\n"
    lines = line_index(text)
    assert lines[("models", 0)] == 4 and lines[("models", 1)] == 5
    assert ("models", 1, "provider") not in lines  # the alias was not followed


# -- tasks.json --------------------------------------------------------------------------


def test_non_utf8_in_tasks_json_is_an_error_not_a_replacement(project, bat):
    path = project / "eval/input/tasks.json"
    path.write_bytes(b'[\n {"id": "caf\xe9", "turns": ["hi"]}\n]\n')
    line = one_clean_error(bat("eval.show", cwd=project), "tasks.json")
    assert "not UTF-8 text (line 2, byte offset 14: 0xe9" in line


def test_a_valid_dataset_nested_500_levels_is_read(project, bat):
    deep: object = "bottom"
    for _ in range(500):
        deep = [deep]
    tasks = [{"id": "deep", "turns": ["hi"], "meta": {"deep": deep}}]
    path = project / "eval/input/tasks.json"
    path.write_text(json.dumps(tasks, indent=1))
    result = bat("eval.show", "--json", cwd=project)
    assert result.code == 0, result.err
    assert json.loads(result.out)["dataset"]["tasks"] == 1
    # ... and a problem after it is located without recursion.
    path.write_text(json.dumps([*tasks, {"id": "bad", "turns": []}], indent=1))
    result = bat("eval.show", cwd=project)
    assert result.code == 2 and "Traceback" not in result.err
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"bad"' in text)
    assert f"[1].turns (line {line + 1})" in result.err


def test_an_invalid_dataset_gets_lines_a_valid_one_is_never_mapped(tmp_path, monkeypatch):
    tasks = [
        {"id": f"t{i}", "turns": ["hi"], "expected": {"output_regex": "x"}} for i in range(500)
    ]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks, indent=2))

    def refuse(*args, **kwargs):
        raise AssertionError("lines were mapped for a valid dataset")

    monkeypatch.setattr(dataset_module, "json_lines", refuse)
    assert len(load_dataset(path).tasks) == 500
    monkeypatch.undo()
    tasks[321]["expected"]["output_regex"] = "("
    path.write_text(json.dumps(tasks, indent=2))
    with pytest.raises(InputError) as caught:
        load_dataset(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"("' in text)
    (detail,) = caught.value.details
    assert detail.startswith(
        f"{path}: [321].expected.output_regex (line {line}): not a valid regular expression"
    )


# -- properties --------------------------------------------------------------------------

# Printable text: PyYAML, the reference here, mis-reads escaped surrogate pairs and
# counts U+2028 as a line break, as JSON does not.
words = st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), max_size=5)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | words,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(words, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from([None, 1, 2]))
def test_json_lines_agree_with_the_yaml_composer(value, indent):
    """The one-pass JSON mapper finds the lines PyYAML's composer finds (JSON is YAML)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    assert json_lines(text) == line_index(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(json_values, max_size=6), st.sets(st.integers(0, 6)), st.booleans())
def test_json_lines_within_some_items_are_those_of_the_whole(items, chosen, wrapped):
    """Mapping only the tasks with problems (skipping the others whole) gives the same
    lines for them as mapping everything."""
    prefix: tuple = ("tasks",) if wrapped else ()
    text = json.dumps({"tasks": items} if wrapped else items, indent=1)
    within = [(*prefix, index) for index in chosen]
    every = json_lines(text)
    expected = {
        path: line
        for path, line in every.items()
        if any(path[: len(root)] == root for root in within)
    }
    assert json_lines(text, within=within) == expected


@settings(max_examples=150, deadline=None)
@given(
    st.lists(json_values, max_size=4),
    st.dictionaries(words, json_values, min_size=1, max_size=4),
    json_values,
    st.booleans(),
)
def test_a_json_key_written_twice_is_named_by_key_path_and_line(before, obj, again, wrapped):
    """Wherever an object repeats a key, the one JSON hook refuses it, and the message
    names the key path and the line of the second writing, in the words YAML's use."""
    first = next(iter(obj))
    pairs = [f"{json.dumps(k)}: {json.dumps(v, indent=1)}" for k, v in obj.items()]
    repeated = "{" + ", ".join(pairs) + f",\n {json.dumps(first)}: {json.dumps(again)}}}"
    items = [json.dumps(item, indent=1) for item in before]
    text = "[" + "".join(item + ",\n" for item in items) + repeated + "]"
    if wrapped:
        text = '{"tasks":\n' + text + "}"
    line = text.count("\n", 0, text.rindex(f"\n {json.dumps(first)}: ")) + 2
    where = dotted((*(["tasks"] if wrapped else []), len(before), first))
    with pytest.raises(InputError) as refused:
        parse_json(text, "f.json")
    assert refused.value.message == (
        f"f.json: {where} (line {line}): duplicate key (the later one would win)"
    )


def test_json_that_is_not_json_is_refused_where_asked_at_its_line():
    text = '{"a": "NaN, Infinity",\n "b": [1,\n -Infinity]}'
    assert parse_json(text, "c.json")["b"] == [1, float("-inf")]  # Python's reading
    with pytest.raises(InputError) as refused:
        parse_json(text, "c.json", constants=False)
    assert refused.value.message == (
        "c.json: -Infinity (line 3): not JSON: write a number or a string"
    )


yaml_tokens = st.sampled_from(
    ["a", "b", ": ", "- ", "&x ", "&y ", "*x", "*y", "[", "]", "{", "}", ", ", "\n", "  ",
     "<<: ", "'q'", "1", "? ", "!!str ", "#c", "\t", "\ufeff", "\x7f", "\x00", '"', '\\']
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(yaml_tokens, max_size=40).map("".join))
def test_any_yaml_text_loads_or_is_one_input_error(text):
    try:
        parse_yaml(text, "fuzz.yaml")
    except InputError as exc:
        assert str(exc).startswith("fuzz.yaml") and "\n" not in str(exc)


shared = st.recursive(
    st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=100, deadline=None)
@given(shared, st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=6))
def test_aliases_written_by_pyyaml_load_back_or_hit_the_budget(block, width, levels):
    """``yaml.safe_dump`` writes a shared object once (an anchor) and then aliases: the
    loader gives back the same data, unless the expansion is over the budget."""
    data: object = block
    for _ in range(levels):
        data = [data] * width  # each level repeats the one below through aliases
    text = yaml.safe_dump({"top": data, "again": data})
    try:
        assert parse_yaml(text, "shared.yaml") == {"top": data, "again": data}
    except InputError as exc:
        assert "aliases expand to more than" in str(exc)
        assert width**levels * 2 > ALIAS_BUDGET // 100  # refused only when large


task_dicts = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "c", "", "x/y"]), "turns": st.lists(words, max_size=2)},
    optional={
        "expected": st.fixed_dictionaries(
            {},
            optional={
                "status": st.sampled_from(["completed", "failed", "nope", None]),
                "output_must_contain": st.lists(words, max_size=2),
                "max_tokens": st.integers(min_value=-2, max_value=5),
            },
        ),
        "meta": st.dictionaries(words, st.integers(), max_size=2),
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(task_dicts, max_size=5), st.booleans(), st.sampled_from([None, 1]))
def test_checking_a_dataset_agrees_with_loading_it(tmp_path, tasks, wrapped, indent):
    """eval.show's check (no tasks kept) accepts and refuses exactly what a run's full
    read does, with the same messages, and counts the same tasks."""
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": tasks} if wrapped else tasks, indent=indent))
    try:
        loaded = load_dataset(path)
    except InputError as exc:
        with pytest.raises(InputError) as caught:
            check_dataset(path, chunk=2)
        assert (str(caught.value), caught.value.details) == (str(exc), exc.details)
        return
    checked = check_dataset(path, chunk=2)  # small chunks: several per dataset
    assert (checked.count, checked.sha256) == (len(loaded.tasks), loaded.sha256)
    weak = [task for task in loaded.tasks if not task.expected.checks_beyond_status]
    assert checked.weak == weak


def test_eval_show_counts_a_wrapped_dataset(project, bat):
    tasks = [{"id": "a", "turns": ["hi"]}, {"id": "b", "turns": ["ho"]}]
    (project / "eval/input/tasks.json").write_text(json.dumps({"tasks": tasks}))
    result = bat("eval.show", "--json", cwd=project)
    assert result.code == 0, result.err
    assert json.loads(result.out)["dataset"]["tasks"] == 2
    assert "2 tasks check nothing but the final status (a, b)" in result.err


def test_eval_show_refuses_ids_whose_episode_files_collide(project, bat):
    """eval.show keeps no tasks, yet refuses what a run's load refuses: two ids whose
    episode file stems agree (8 hex digits of sha256, found by a birthday search)."""
    seen: dict[str, str] = {}
    for chars in itertools.product("!#$%&()*+,:;=?@~", repeat=6):
        task_id = "".join(chars)  # every one sanitizes to "______" and takes a hash
        digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
        if digest in seen:
            pair = [seen[digest], task_id]
            break
        seen[digest] = task_id
    tasks = [{"id": task_id, "turns": ["hi"]} for task_id in pair]
    (project / "eval/input/tasks.json").write_text(json.dumps(tasks))
    result = bat("eval.show", cwd=project)
    assert result.code == 2 and "Traceback" not in result.err
    assert "would share the episode file name" in result.err


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bat.yaml", "eval:\n  n: 1" + "0" * 5000 + "\n"),
        ("given.json", '{"eval": {"n": 1' + "0" * 5000 + "}}"),
        ("tasks.json", '[{"id": "a", "turns": ["x"], "meta": {"n": 1' + "0" * 5000 + "}}]"),
    ],
)
def test_a_number_of_5000_digits_is_one_error(project, bat, name, content):
    """Python refuses to read an integer of over 4300 digits (a ValueError)."""
    path = project / ("eval/input/tasks.json" if name == "tasks.json" else name)
    path.write_text(content)
    args = ("-f", str(path), "version") if name == "given.json" else ("eval.show",)
    line = one_clean_error(bat(*args, cwd=project), name)
    assert "4300 digits" in line
