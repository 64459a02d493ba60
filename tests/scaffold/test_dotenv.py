"""``.env`` updates keep every other byte of the file."""

import os
import re
import stat

import pytest

from bat.dotenv import apply_updates, update_env_file
from bat.errors import InputError, UsageError

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


# -- what bat refuses to rewrite, and the property that ties reading to writing ---------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bat.dotenv import check_env_text, merge_missing, parse_env  # noqa: E402


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"PORT=1\nKEY=\xff\n", ".env: KEY (line 2): byte 0xff is not UTF-8"),
        (b"PORT=1\n# caf\xe9\n", ".env (line 2): byte 0xe9 is not UTF-8"),
        (b"PORT=1\nKEY=a\x00b\n", ".env: KEY (line 2): contains a NUL byte"),
        (b'PORT=1\nKEY="open\nrest"\n', ".env: KEY (line 2): the quote of the value is not"),
        (b"PORT=1\rKEY=2\n", ".env: PORT (line 1): a carriage return inside the line"),
    ],
)
def test_unreadable_files_are_refused_and_left_alone(tmp_path, data, words):
    path = tmp_path / ".env"
    path.write_bytes(data)
    with pytest.raises(InputError) as refused:
        update_env_file(path, {"PORT": "2"})
    assert str(refused.value).startswith(str(tmp_path / words.split(" ", 1)[0]))
    assert words.split(" ", 1)[1] in str(refused.value)
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("PORT", "a\x00b", "PORT: the value contains a NUL byte"),
        ("PORT", "a\nb", "PORT: the value contains a newline"),
        ("PORT", "a\rb", "PORT: the value contains a carriage return"),
        ("PORT", "a\u2028b", "PORT: the value contains the control character U+2028"),
        ("PORT", "$x'y", "PORT: a value with both $ and '"),
        ("A=B", "1", "invalid key 'A=B'"),
        ("A\nB", "1", "invalid key 'A\\nB'"),
        ("", "1", "invalid key ''"),
    ],
)
def test_keys_and_values_that_cannot_be_one_line_are_refused(tmp_path, key, value, words):
    path = tmp_path / ".env"
    path.write_text(ORIGINAL)
    with pytest.raises(InputError, match="^" + str(path).replace("\\", "\\\\")) as refused:
        update_env_file(path, {key: value})
    assert words in str(refused.value)
    assert path.read_text() == ORIGINAL


def test_values_with_a_dollar_are_single_quoted():
    """Most readers expand ``${VAR}`` inside double quotes; single quotes are literal."""
    assert apply_updates("K=1\n", {"K": "pa$$${HOME}"}) == "K='pa$$${HOME}'\n"


def test_empty_value_before_an_inline_comment_is_quoted():
    updated = apply_updates("K=old # note\n", {"K": ""})
    assert updated == 'K="" # note\n'
    assert parse_env(updated) == {"K": ""}


def test_merge_missing_keeps_every_value_and_adds_new_keys():
    mine = "# mine\nOPENAI_API_KEY=sk-123\nPORT=9123\n"
    fresh = "PORT=9900\nMODEL=m\nOPENAI_API_KEY=\n"
    assert merge_missing(mine, fresh) == mine + "MODEL=m\n"
    assert merge_missing(mine + "MODEL=x\n", fresh) == mine + "MODEL=x\n"


_KEYS = st.sampled_from(["PORT", "MODEL", "K_1", "export"]) | st.from_regex(
    r"[A-Za-z_][A-Za-z0-9_]{0,4}", fullmatch=True
)
_LINES = st.one_of(
    st.builds(
        "{}{}{}{}".format,
        _KEYS,
        st.sampled_from(["=", " = ", "= "]),
        st.text(max_size=8),
        st.sampled_from(["", " # c", "# c", "  #c"]),
    ),
    st.builds("{}='{}'".format, _KEYS, st.text(max_size=6)),
    st.builds('export {}="{}"'.format, _KEYS, st.text(max_size=6)),
    st.builds("# {}=placeholder".format, _KEYS),
    st.text(max_size=10),
)
_TEXTS = st.builds(
    lambda lines, newline, end: newline.join(lines) + end,
    st.lists(_LINES, max_size=6),
    st.sampled_from(["\n", "\r\n"]),
    st.sampled_from(["", "\n"]),
)
_UPDATES = st.dictionaries(_KEYS | st.text(max_size=3), st.text(max_size=8), max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXTS, updates=_UPDATES)
def test_any_update_round_trips_or_is_refused_leaving_the_file(tmp_path_factory, text, updates):
    """Read back, every updated key has its new value and every other key its old one."""
    path = tmp_path_factory.mktemp("env") / ".env"
    data = text.encode("utf-8")
    path.write_bytes(data)
    try:
        update_env_file(path, updates)
    except (InputError, UsageError) as refused:
        assert str(refused).startswith(f"{path}") or "nothing to set" in str(refused)
        assert "\n" not in str(refused).strip()
        assert path.read_bytes() == data
        return
    after = path.read_text(encoding="utf-8")
    check_env_text(after)
    assert parse_env(after) == {**parse_env(text), **updates}


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=40))
def test_any_bytes_are_read_or_refused_with_the_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("env") / ".env"
    path.write_bytes(data)
    try:
        update_env_file(path, {"PORT": "1234"})
    except InputError as refused:
        assert re.match(rf"{re.escape(str(path))}(: \w+)? \(line \d+\): ", str(refused))
        assert path.read_bytes() == data
        return
    assert parse_env(path.read_text(encoding="utf-8"))["PORT"] == "1234"
