"""``.env`` updates keep every other byte of the file."""

import os
import stat

import pytest

from bat.errors import InputError, UsageError
from bat.scaffold.dotenv import apply_updates, update_env_file

ORIGINAL = """# settings
PORT=9900  # the A2A port
export MODEL="gpt-4.1-mini"

OPENAI_API_KEY=sk-secret
# BAT_DOCKER_REGISTRY=localhost:5000
# trailing comment
"""


def test_changes_only_the_named_values():
    updated = apply_updates(ORIGINAL, {"PORT": "9901", "MODEL": "gpt-4.1"})
    assert updated == ORIGINAL.replace("PORT=9900", "PORT=9901").replace(
        'MODEL="gpt-4.1-mini"', "MODEL=gpt-4.1"
    )


def test_missing_key_goes_after_its_placeholder_comment():
    updated = apply_updates(ORIGINAL, {"BAT_DOCKER_REGISTRY": "registry.local:5000"})
    lines = updated.splitlines()
    at = lines.index("# BAT_DOCKER_REGISTRY=localhost:5000")
    assert lines[at + 1] == "BAT_DOCKER_REGISTRY=registry.local:5000"
    assert [line for line in lines if line != lines[at + 1]] == ORIGINAL.splitlines()


def test_missing_key_without_placeholder_is_appended():
    updated = apply_updates("A=1", {"BAT_DOCKER_REPO": "team/agent"})
    assert updated == "A=1\nBAT_DOCKER_REPO=team/agent\n"


def test_crlf_files_stay_crlf():
    text = "PORT=1\r\nMODEL=x\r\n"
    assert apply_updates(text, {"MODEL": "y", "NEW": "z"}) == "PORT=1\r\nMODEL=y\r\nNEW=z\r\n"


def test_values_needing_quotes_are_quoted():
    assert apply_updates("M=1\n", {"M": 'a "b" #c'}) == 'M="a \\"b\\" #c"\n'


def test_quoted_value_with_inline_comment_keeps_the_comment():
    assert apply_updates('M="a # b" # note\n', {"M": "c"}) == "M=c # note\n"


def test_newlines_in_values_are_refused():
    with pytest.raises(InputError):
        apply_updates("M=1\n", {"M": "a\nb"})


def test_update_keeps_permissions_and_writes_atomically(tmp_path):
    path = tmp_path / ".env"
    path.write_text(ORIGINAL)
    os.chmod(path, 0o600)
    update_env_file(path, {"PORT": "1234"})
    assert "PORT=1234  # the A2A port" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [".env"]


def test_refuses_without_file_or_values(tmp_path):
    with pytest.raises(UsageError, match="no "):
        update_env_file(tmp_path / ".env", {"PORT": "1"})
    (tmp_path / ".env").write_text("PORT=1\n")
    with pytest.raises(UsageError, match="nothing to set"):
        update_env_file(tmp_path / ".env", {})
