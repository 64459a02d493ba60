"""``prices:`` (eval.yaml) and ``eval.prices`` (bat.yaml) refuse every bad value in one
located line, exit 2; any mapping either validates or is refused so, never otherwise.

Read by bat's own loader (``load_config``, what every ``eval.*`` command calls first), and
through ``bat eval.show`` in-process where the exit status and the output are the point.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bat.errors import InputError
from bat.evaluation.inputs.config import load_config
from bat.evaluation.inputs.prices import MAX_PRICES, Prices
from bat.evaluation.inputs.schemas import schema
from tests import fuzzkit as fk
from tests.evalkit import make_project

TASKS = [{"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["hi"]}}]
LOCATED = re.compile(r"[^\n]*eval\.yaml: prices[^\n]* \(line \d+\): [^\n]+")


def project(root: Path, prices: str) -> Path:
    """A project whose eval.yaml ends with ``prices:`` as written (raw YAML text)."""
    made = make_project(root, TASKS, start=False)
    config = made / "eval" / "eval.yaml"
    config.write_text(config.read_text() + "prices:\n" + prices)
    return made


def refusal(root: Path, prices: str) -> str:
    """The one problem load_config refuses ``prices`` with (eval.yaml's problems are told
    under one headline, ``eval.yaml has 1 problem``, a line each)."""
    made = project(root, prices)
    with pytest.raises(InputError) as caught:
        load_config(made / "eval" / "eval.yaml", base=made)
    (problem,) = caught.value.details or [caught.value.message]
    return problem


BAD = {
    "a string price": ("  m: {input: '0.2', output: 1}\n", "input", "a number"),
    "a negative price": ("  m: {input: -1, output: 1}\n", "input", "greater than or equal"),
    "1e400": ("  m: {input: 1.0e+400, output: 1}\n", "input", "finite"),
    ".inf": ("  m: {input: 1, output: .inf}\n", "output", "finite"),
    "a boolean": ("  m: {input: true, output: 1}\n", "input", "a number"),
    "an unknown key": ("  m: {inptu: 1, output: 1}\n", "m", "did you mean 'input'"),
    "a list for the mapping": ("  - m\n", "prices", "expected a mapping"),
    "a list for an entry": ("  m: [1, 2]\n", "m", ""),
    "mixed currencies": (
        "  a: {input: 1, output: 1, currency: EUR}\n  b: {input: 1, output: 1}\n",
        "prices",
        "EUR and USD",
    ),
    "a lower-case currency": ("  m: {input: 1, output: 1, currency: usd}\n", "currency", "USD"),
    "a control character": ('  "m\\x01": {input: 1, output: 1}\n', "prices", "no model name"),
    "an escape in a note": ('  m: {input: 1, output: 1, note: "a\\e[31m"}\n', "note", "control"),
    "1e-3, text to YAML": ("  m: {input: 1e-3, output: 1}\n", "input", "with a dot (0.001"),
    "a deeply nested value": (
        "  m: {input: " + "[" * 60 + "]" * 60 + ", output: 1}\n",
        "input",
        "a number",
    ),
}


@pytest.mark.parametrize("text, key, words", BAD.values(), ids=BAD.keys())
def test_each_bad_price_is_one_located_line(tmp_path, text, key, words):
    message = refusal(tmp_path, text)
    assert LOCATED.fullmatch(message), message
    assert key in message and words in message, message


def test_a_thousand_and_one_entries_are_refused(tmp_path):
    entries = "".join(f"  m{n}: {{input: 1, output: 1}}\n" for n in range(MAX_PRICES + 1))
    message = refusal(tmp_path, entries)
    assert LOCATED.fullmatch(message) and str(MAX_PRICES) in message, message


def test_eval_show_refuses_a_bad_price_with_exit_2(tmp_path, bat, home):
    made = project(tmp_path, "  openai:gpt-4.1-mini: {input: 1, output: '2'}\n")
    result = bat("eval.show", cwd=made)
    assert result.code == 2 and result.err.count("\n") == 2, result.err
    assert result.err.startswith("bat: error: eval/eval.yaml has 1 problem\n"), result.err
    assert "eval.yaml: prices.openai:gpt-4.1-mini.output (line " in result.err
    assert "Traceback" not in result.err


def test_a_bad_bat_yaml_price_is_one_line_naming_the_file(tmp_path, bat, home):
    made = project(tmp_path, "  m: {input: 1, output: 1}\n")
    (made / "bat.yaml").write_text("eval:\n  prices:\n    m: {input: 1, output: -2}\n")
    result = bat("eval.show", cwd=made)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert f"{made / 'bat.yaml'}: eval.prices.m.output (line 3): " in result.err


def test_eval_show_says_each_models_price_and_where_it_is_from(tmp_path, bat, home):
    """eval.yaml's entry over bat.yaml's, bat.yaml's over genai-prices', genai-prices'
    with its version, and a model found nowhere unpriced."""
    from importlib.metadata import version

    made = project(tmp_path, "  openai:m-one: {input: 0.5, output: 2, note: ours}\n")
    config = yaml.safe_load((made / "eval" / "eval.yaml").read_text())
    config["models"] = ["openai:m-one", "openai:m-two", "openai:gpt-4.1-mini", "openai:m-x"]
    (made / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    team = {"m-one": {"input": 9, "output": 9}, "openai:m-two": {"input": 1, "output": 3}}
    (made / "bat.yaml").write_text(yaml.safe_dump({"eval": {"prices": team}}))
    # ~/.bat.yaml's entry of the same model: replaced whole, not merged key by key
    mine = {"openai:m-two": {"input": 7, "output": 7, "cached_input": 4}}
    (home / ".bat.yaml").write_text(yaml.safe_dump({"eval": {"prices": mine}}))
    result = bat("eval.show", cwd=made)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("prices "))
    shown = [" ".join(line.split()) for line in lines[start + 1 :]]
    assert shown == [
        "- model openai:m-one 0.5 / 2 from eval.yaml: ours",
        "- model openai:m-two 1 / 3 from bat.yaml",
        f"- model openai:gpt-4.1-mini 0.4 / 1.6 from genai-prices {version('genai-prices')}",
        "- model openai:m-x unpriced (its cost is unknown)",
    ]
    listed = yaml.safe_load(bat("eval.show", "--json", cwd=made).out)["prices"]["models"]
    assert [entry["price"] and entry["price"]["source"] for entry in listed][:2] == [
        "eval.yaml",
        "bat.yaml",
    ]
    assert listed[1]["price"]["cached_input"] == 1  # the project's entry, whole


def test_the_schema_of_eval_yaml_has_prices_and_their_entries():
    found = schema("eval.yaml")
    entry = found["$defs"]["PriceEntry"]
    assert set(entry["properties"]) == {"input", "output", "cached_input", "currency", "note"}
    assert entry["additionalProperties"] is False and set(entry["required"]) == {
        "input",
        "output",
    }
    assert "prices" in found["properties"]


# -- any mapping: valid, or a ValidationError load_config tells in located lines ---------------

price_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.none(),
    fk.weird_scalar,
    st.lists(st.integers(), max_size=2),
)
entries = st.one_of(
    st.dictionaries(
        st.sampled_from(["input", "output", "cached_input", "currency", "note", "inptu"]),
        st.one_of(price_values, st.sampled_from(["USD", "EUR", "usd", "", "x" * 201])),
        max_size=5,
    ),
    price_values,
)
names = st.one_of(fk.weird_text, st.sampled_from(["openai:gpt-4.1-mini", "m", " "]))
tables = st.one_of(st.dictionaries(names, entries, max_size=4), price_values)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(table=tables)
def test_any_prices_validate_or_are_refused_in_located_lines(table):
    try:
        Prices.model_validate(table)
    except ValidationError:
        valid = False
    else:
        valid = True
    root = Path(tempfile.mkdtemp(prefix="prices-"))
    try:
        made = make_project(root, TASKS, start=False)
        config = made / "eval" / "eval.yaml"
        data = yaml.safe_load(config.read_text()) | {"prices": table}
        config.write_text(yaml.safe_dump(data, allow_unicode=True))
        try:
            load_config(config, base=made)
        except InputError as refused:
            assert not valid, (table, refused.message)
            problems = refused.details or [refused.message]
            for problem in problems:
                assert re.search(r"prices[^\n]* \(line \d+\): ", problem), problem
                assert "\n" not in problem
        else:
            assert valid, table
    finally:
        shutil.rmtree(root, ignore_errors=True)
