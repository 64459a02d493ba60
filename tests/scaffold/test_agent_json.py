"""agent.json read strictly, by the one JSON reader: each problem named by key and line."""

from __future__ import annotations

import pytest

from bat.errors import InputError
from bat.scaffold.agent_json import read_card_file


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            '{"name": "a",\n "skills": [{"id": "x",\n   "id": "y"}]}',
            "skills[0].id (line 3): duplicate key (the later one would win)",
        ),
        ('{"name": "a",\n "name": "b"}', "name (line 2): duplicate key"),
        ('{"name": "a",\n "version": NaN}', "NaN (line 2): not JSON: write a number or a string"),
        ('{"name": "Infinity",\n "x": [Infinity]}', "Infinity (line 2): not JSON"),
        ('{"skills": {"version": 1},\n "version": 2}', "version (line 2): must be text, not int"),
        ('{"name": "a",}', "invalid JSON (line 1, column 14)"),
        ("[]", "an agent card is a JSON object, not list"),
    ],
)
def test_a_card_bat_cannot_use_is_one_error_naming_the_file_key_and_line(tmp_path, text, words):
    card = tmp_path / "agent.json"
    card.write_text(text)
    with pytest.raises(InputError) as refused:
        read_card_file(card)
    assert refused.value.message.startswith(f"{card}: ")
    assert words in refused.value.message


def test_a_card_is_read_and_a_missing_one_is_empty(tmp_path):
    card = tmp_path / "agent.json"
    assert read_card_file(card) == {}
    card.write_text('\ufeff{"name": "weather", "version": "1.2.0", "skills": []}')
    assert read_card_file(card) == {"name": "weather", "version": "1.2.0", "skills": []}
