"""bat.locate.line_of: the line of one key path in a YAML file or text, for a message."""

from __future__ import annotations

import time

from hypothesis import given, settings

from bat.locate import line_index, line_of
from tests.test_input_files import BOMB, json_values

SETTINGS = """\
# bat's settings
eval:
  file: eval/eval.yaml
  dry_run: false
init:
  agent:
    port: 9100
models:
  - provider: openai
  - provider: ollama
"""


def test_a_dotted_path_or_a_tuple_in_a_file_or_a_text(tmp_path):
    path = tmp_path / "bat.yaml"
    path.write_text(SETTINGS)
    for source in (path, SETTINGS):
        assert line_of(source, "eval.file") == 3
        assert line_of(source, "init.agent.port") == 7
        assert line_of(source, ("init", "agent", "port")) == 7
        assert line_of(source, ("models", 1)) == 10
        assert line_of(source, ("models", 1, "provider")) == 10


def test_a_path_the_file_holds_only_the_start_of_is_at_its_deepest_key():
    assert line_of(SETTINGS, "init.agent.host") == 6  # init.agent is there, host is not
    assert line_of(SETTINGS, "eval.file.deeper") == 3
    assert line_of(SETTINGS, "images.host") is None  # not even its first key


def test_what_cannot_be_read_has_no_line(tmp_path):
    assert line_of(tmp_path / "missing.yaml", "eval.file") is None
    assert line_of(tmp_path, "eval.file") is None  # a folder
    assert line_of("eval: [unclosed\n", "eval") is None
    assert line_of("", "eval") is None


def test_aliases_are_not_expanded():
    """A billion laughs under the key asked for costs what its ten lines do."""
    text = "eval:\n  file: x\n" + BOMB
    started = time.monotonic()
    assert line_of(text, "a8") == 11
    assert line_of(text, ("a8", 3)) == 11  # the alias, where it is written
    assert line_of(text, "eval.file") == 2
    assert time.monotonic() - started < 2


@settings(max_examples=100, deadline=None)
@given(json_values.filter(lambda value: isinstance(value, dict | list)))
def test_every_key_path_is_where_the_whole_map_says(value):
    """One path walked agrees with the map of every path (JSON text is YAML)."""
    import json

    text = json.dumps(value, indent=1, ensure_ascii=False)
    for path, line in line_index(text).items():
        if path:
            assert line_of(text, path) == line
