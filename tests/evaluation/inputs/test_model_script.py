"""A model's script (``script:`` of eval.yaml): the rule file of bat's stand-in model.

Any document is a script or one clear error naming the rule and the key, never another
exception; the keys that make bat's test server fail on purpose are refused here.
"""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.model_script import Conversation, Rules, ScriptError
from tests import fuzzkit as fk

SCRIPT = [
    {"after_tool": "add", "reply": "The sum is {result}."},
    {"after_tool": "*", "regex": "^no", "reply": "Never mind."},
    {"match": "plus", "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]},
    {"match": "name", "scope": "prompt", "reply": "{first} ({user_count}/{message_count})"},
    {"regex": "^slow", "delay_ms": 1500, "reply": "at last"},
    {"reply": "echo: {last}"},
]
KEYS = ["match", "regex", "scope", "reply", "tool_calls", "after_tool", "delay_ms"]
KEYS += ["status", "body", "retry_after", "times", "name", "args", "", "Reply"]

json_values = st.recursive(
    fk.weird_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(fk.weird_text, inner, max_size=4)
    ),
    max_leaves=20,
)
# Rule-shaped mappings: known keys, test-only keys and typos, each with any value.
rules_like = st.lists(
    st.one_of(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4), json_values),
    max_size=4,
)


def assert_script_or_one_clear_error(load) -> None:
    try:
        rules = load()
    except ScriptError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message, message
        assert "PydanticUndefined" not in message and "validation error" not in message
        return
    assert isinstance(rules, Rules)
    for rule in rules.root:  # what a valid script holds is usable as it stands
        assert rule.reply is not None or rule.tool_calls
        for call in rule.tool_calls:
            json.loads(call.arguments)


@settings(max_examples=300, deadline=None)
@given(document=st.one_of(json_values, rules_like))
def test_any_document_is_a_script_or_one_clear_error(document):
    assert_script_or_one_clear_error(lambda: Rules.from_data(document))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_file_is_a_script_or_one_clear_error(tmp_path, data):
    """A valid script broken the way files break (a key dropped, misspelt or given a
    wrong value; bytes cut, repeated or not UTF-8), in YAML or JSON."""
    document = fk.mutate(SCRIPT, data.draw)
    suffix = data.draw(st.sampled_from([".yaml", ".json"]))
    text = fk.to_json(document) if suffix == ".json" else fk.to_yaml(document)
    if data.draw(st.booleans()):
        text = data.draw(fk.byte_mutations(text))
    path = tmp_path / f"script{suffix}"
    path.write_bytes(text)
    with fk.time_limit(fk.HANG_AFTER_S):
        assert_script_or_one_clear_error(lambda: Rules.load(path))


def test_the_script_answers_as_written(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    rules = Rules.load(path)
    asked = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "my name?"}]
    rule = rules.first(Conversation.of(asked))
    assert rule is rules.root[3]
    assert Conversation.of(asked).reply(rule) == "my name? (1/2)"
    slow = Conversation.of([{"role": "user", "content": "slowly"}])
    assert rules.first(slow).delay_ms == 1500
    added = Conversation.of(
        [
            {"role": "user", "content": "2 plus 3"},
            {"role": "tool", "tool_name": "add", "content": "5"},
        ]
    )
    assert added.reply(rules.first(added)) == "The sum is 5."  # not the tool_calls rule


@pytest.mark.parametrize(
    "rule",
    [
        {"match": "x", "status": 500},
        {"body": "<html>oops"},
        {"reply": "x", "retry_after": 2},
        {"reply": "x", "times": 1},
    ],
)
def test_a_stand_in_script_refuses_the_test_servers_failures(rule):
    """status, body, retry_after and times belong to eval_fixtures/model_server.py: a
    stand-in model always answers, so its script names them as what they are."""
    with pytest.raises(ScriptError) as caught:
        Rules.from_data([{"reply": "fine"}, rule])
    message = str(caught.value)
    assert message.startswith("rule 1: unknown key(s) [")
    assert "failing on purpose is for bat's own tests, not a stand-in model" in message


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"match": "x"}, "a rule file holds a list of rules, got {'match': 'x'}"),
        (["reply: x"], "rule 0: expected a mapping, got 'reply: x'"),
        ([{"reply": "x"}, {"match": "y"}], "rule 1: needs 'reply' or 'tool_calls'"),
        ([{"reply": 5}], "rule 0: reply: Input should be a valid string"),
        (
            [{"reply": "x", "regex": "("}],
            "rule 0: regex: not a valid regular expression: missing )",
        ),
        ([{"reply": "x", "match": "a", "regex": "b"}], "rule 0: give 'match' or 'regex', not"),
        ([{"reply": "x", "scope": "all"}], "rule 0: scope: Input should be 'last' or 'prompt'"),
        ([{"reply": "x", "delay_ms": True}], "rule 0: delay_ms: Input should be a valid integer"),
        ([{"reply": "x", "delay_ms": 10**9}], "rule 0: delay_ms: Input should be less than"),
        ([{"reply": "x", "Reply": "y"}], "rule 0: unknown key(s) ['Reply']; known: after_tool,"),
        (
            [{"tool_calls": [{"name": "t", "args": {"when": object()}}]}],
            "rule 0: tool_calls[0].args.when: input was not a valid JSON value",
        ),
    ],
)
def test_a_bad_script_is_one_line_naming_the_rule_and_key(document, words):
    with pytest.raises(ScriptError) as caught:
        Rules.from_data(document)
    assert words in str(caught.value) and "\n" not in str(caught.value), caught.value


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("s.yaml", "- reply: x\n  reply: y\n", "duplicate key"),
        ("s.yaml", fk.alias_bomb(), "alias bomb"),
        ("s.json", fk.nested_json(5000), "nested too deeply"),
        ("s.json", '[{"reply": "x",}]', "invalid JSON (line 1"),
        ("s.yaml", "", "a rule file holds a list of rules, got None"),
    ],
)
def test_a_file_that_is_no_script_is_one_line(tmp_path, name, text, words):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError) as caught:
        Rules.load(path)
    message = str(caught.value)
    assert words in message and "\n" not in message and str(path) not in message, message


@pytest.mark.parametrize(
    "line",
    [
        "I'm currently working in the directory: /work/x y",  # Qwen Code's context message
        "  Working directory: /work/x y",  # opencode's <env> block
        " - Primary working directory: /work/x y",  # Claude Code's system prompt
    ],
)
def test_cwd_is_the_working_directory_each_cli_states(line):
    rules = Rules.from_data([{"tool_calls": [{"name": "W", "args": {"p": "{cwd}/a.txt"}}]}])
    context = f"Today's date is Monday.\n{line}\nHere is the folder structure:"
    conversation = Conversation.of(
        [{"role": "user", "content": context}, {"role": "user", "content": "go"}]
    )
    (call,) = conversation.calls(rules.first(conversation))
    assert call.args == {"p": "/work/x y/a.txt"}
