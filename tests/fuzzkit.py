"""Helpers of the fuzz suite (tests/test_fuzz_inputs.py): run bat, watch what it writes,
and mutate valid inputs.

Running the ``bat`` subprocess costs ~0.3 s, so most examples run the real program
in-process (:func:`run_in_process`): the same ``BatProgram`` the console script runs,
with its own cwd, HOME and environment, stdout/stderr captured, and a time limit so a
hanging parser fails its example instead of the suite. An audit hook (:class:`WriteWatch`)
records every file the program opens for writing, renames, creates or deletes, so "no
file outside the scratch folder is written" is checked on the operating system's words,
not guessed from a listing.

The mutations start from inputs the real code wrote (``bat init.agent`` and ``bat
eval.init``) and break them the way people and tools do: a key dropped or misspelt, a
value of the wrong type, a huge number, control characters, bytes that are not UTF-8,
deep nesting, YAML aliases and duplicate keys.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import re
import signal
import stat
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# -- running bat ----------------------------------------------------------------------

HANG_AFTER_S = 20  # an example still running after this is a hang, not a slow parser


class Hang(BaseException):
    """Raised inside the program by the alarm: a BaseException, so no ``except Exception``
    of bat's can swallow it and call the hang an accepted input."""


@dataclass
class Outcome:
    """What one run of bat printed and returned (``err`` holds any escaped traceback)."""

    code: int
    out: str
    err: str
    written_outside: list[str]

    def describe(self) -> str:
        """Exit status, stderr (a traceback's last lines: where it ended) and stdout's end."""
        err = "\n".join(self.err.splitlines()[-12:])
        return f"exit {self.code}\n--- stderr ---\n{err}\n--- stdout ---\n{self.out[-500:]}"


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# Events whose first (and, for the two-path ones, second) argument is a path being changed.
_PATH_EVENTS = {
    "os.mkdir": 1,
    "os.remove": 1,
    "os.rmdir": 1,
    "os.chmod": 1,
    "os.chown": 1,
    "os.truncate": 1,
    "os.utime": 1,
    "os.symlink": 2,
    "os.link": 2,
    "os.rename": 2,
    "os.replace": 2,
    "shutil.rmtree": 1,
}


class WriteWatch:
    """Every path the process writes while a watch is active, judged against one folder.

    Python's audit hooks cannot be removed, so one hook is installed for the session
    and does nothing unless a watch is active (only in the thread that started it: a
    server thread of a test is not the program under test).
    """

    _installed = False
    _active: WriteWatch | None = None

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self.outside: list[str] = []
        self.thread = threading.get_ident()

    @classmethod
    def _install(cls) -> None:
        if not cls._installed:
            sys.addaudithook(cls._hook)
            cls._installed = True

    @classmethod
    def _hook(cls, event: str, args: tuple) -> None:
        watch = cls._active
        if watch is None or threading.get_ident() != watch.thread:
            return
        paths: list[Any] = []
        if event == "open":
            path, mode, flags = args
            writing = bool(mode and any(c in mode for c in "wax+")) or bool(
                (flags or 0) & _WRITE_FLAGS
            )
            if writing:
                paths.append(path)
        elif event in _PATH_EVENTS:
            paths.extend(args[: _PATH_EVENTS[event]])
        for path in paths:
            watch._check(path)

    def _check(self, path: Any) -> None:
        if path is None or isinstance(path, int):
            return  # a file descriptor: its opening was checked
        text = os.fsdecode(path)
        full = os.path.abspath(text)
        if full == os.devnull or (full.endswith(".pyc") and "__pycache__" in full):
            return  # bytecode caches of modules first imported during the run
        resolved = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
        if resolved != self.root and not resolved.startswith(self.root + os.sep):
            self.outside.append(full)

    def __enter__(self) -> WriteWatch:
        self._install()
        WriteWatch._active = self
        return self

    def __exit__(self, *exc: object) -> None:
        WriteWatch._active = None


@contextlib.contextmanager
def environment(home: Path, env: dict[str, str] | None) -> Iterator[None]:
    """``os.environ`` for one run: the developer's BAT_* removed, HOME and TMPDIR in the
    scratch folder, ``env`` added; everything restored afterwards."""
    saved = dict(os.environ)
    saved_tempdir = tempfile.tempdir
    try:
        for key in [k for k in os.environ if k.startswith("BAT_")]:
            del os.environ[key]
        tmp = home.parent / "tmp"
        tmp.mkdir(exist_ok=True)
        os.environ.update({"HOME": str(home), "NO_COLOR": "1", "TMPDIR": str(tmp)})
        tempfile.tempdir = str(tmp)
        os.environ.update(env or {})
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        tempfile.tempdir = saved_tempdir


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in this (main) thread after ``seconds``."""

    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_in_process(
    argv: list[str], *, cwd: Path, scratch: Path, env: dict[str, str] | None = None
) -> Outcome:
    """Run ``bat ARGV`` as the console script would, in this process.

    Anything that escapes the program (it should not: the program turns every failure
    into a status) is written into ``err`` as the traceback a user would have seen.
    """
    from bat.cli.program import BatProgram

    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    code = -1
    with WriteWatch(scratch) as watch:
        try:
            with environment(scratch / "home", env), time_limit(HANG_AFTER_S):
                os.chdir(cwd)
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = BatProgram().run(["bat", *argv], exit=False)
        except Hang as exc:
            where = traceback.format_exc().splitlines()[-9:-1]  # where it was stopped
            err.write("\n".join(["", *where, f"HANG: {exc}", ""]))
            code = -2
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            err.write(traceback.format_exc())
            code = -1
        finally:
            os.chdir(previous)
    return Outcome(code, out.getvalue(), err.getvalue(), watch.outside)


# -- what a run may do ----------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, str]:
    """``{relative path: digest}`` of every file and symlink under ``folder`` (modes too:
    a file made world-readable has changed)."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path):
                found[rel] = "link:" + os.readlink(path)
                continue
            kind = os.lstat(path).st_mode
            if not stat.S_ISREG(kind):  # a FIFO would block the open below
                found[rel] = f"special:{stat.S_IFMT(kind):o}"
                continue
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as handle:
                    for block in iter(lambda h=handle: h.read(1 << 20), b""):
                        digest.update(block)
                mode = oct(os.stat(path).st_mode & 0o7777)
            except OSError as exc:  # unreadable on purpose (mode 0), still compared
                found[rel] = f"unreadable:{exc.errno}"
                continue
            found[rel] = f"{mode}:{digest.hexdigest()}"
    return found


def changed_files(before: dict[str, str], after: dict[str, str], allowed=()) -> list[str]:
    """Files of ``before`` that are gone or different in ``after`` (but ``allowed``)."""
    return sorted(p for p, d in before.items() if after.get(p) != d and p not in allowed)


def check_outcome(outcome: Outcome, what: str, *, accepted=(0,)) -> None:
    """The rules of the suite: exit 0 (accepted) or 2 with exactly one ``bat: error:``
    headline (only ``  - `` detail lines after it), never a traceback or a hang, and
    nothing written outside the scratch folder. ``accepted`` may add statuses a test
    expects (1: the operation was tried and failed), also with one headline."""
    context = f"{what}\n{outcome.describe()}"
    assert "Traceback" not in outcome.err, context
    assert outcome.code in (*accepted, 2), context
    assert not outcome.written_outside, f"{context}\nwritten outside: {outcome.written_outside}"
    lines = outcome.err.splitlines()
    headlines = [i for i, line in enumerate(lines) if line.startswith("bat: error:")]
    if outcome.code != 0:
        assert len(headlines) == 1, context
        after = lines[headlines[0] + 1 :]
        assert all(line.startswith("  - ") for line in after), context
    else:
        assert not headlines, context


# -- mutations ------------------------------------------------------------------------

CONTROL = "".join(chr(c) for c in range(32) if chr(c) not in "\t\n\r") + "\x7f\x85\u2028\ufffe"

weird_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(CONTROL + "ab\\'\"{}[]:#&*!|>%@`$"), max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            "x" * 100_000,
            "\x00",
            "\x1b[31mred",
            "../../../etc/passwd",
            "${HOME}",
            "${NOPE:-}",
            "${",
            "http://user:pass@127.0.0.1:1/",
            "http://[::1",
            "http://127.0.0.1:99999/",
            "grpc://[::1]:x",
            "é" * 300,
            "\U0001f600" * 60,
            "1e999",
            "-0",
            "NaN",
            "0x10",
            "true",
            "off",
            "~",
            ".",
        ]
    ),
)

weird_urls = st.sampled_from(
    [
        "http://[::1",
        "http://[::1]:80/a2a",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:-1/",
        "http://user:pass@127.0.0.1:1/",
        "grpc://[::1]:x",
        "127.0.0.1:50051",
        "http://a b/",
        "",
        "\x00",
        "//",
        "http:",
    ]
)

weird_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 1, 65535, 65536, 10**30, -(10**30), 2**63, 10**4200]),
    st.floats(allow_nan=True, allow_infinity=True),
    weird_text,
)


_DEEP = re.compile(r"[\"']?__DEEP_(\d+)__[\"']?")


def deep(depth: int) -> str:
    """A list nested ``depth`` levels deep, as a marker: json and yaml cannot write one
    deeper than Python's recursion limit, so :func:`to_json`/:func:`to_yaml` put the
    brackets in the text."""
    return f"__DEEP_{depth}__"


def _expand(text: str) -> str:
    return _DEEP.sub(lambda m: "[" * int(m[1]) + "1" + "]" * int(m[1]), text)


weird_value = st.one_of(
    weird_scalar,
    st.lists(weird_scalar, max_size=4),
    st.dictionaries(weird_text, weird_scalar, max_size=3),
    # A fresh copy each time: the same sampled ``{"": None}``, changed in one example's
    # document by a later round, was changed for every later example (Hypothesis then saw
    # the same choices draw differently and called the test flaky).
    st.sampled_from([[], {}, [[]], {"": None}]).map(copy.deepcopy),
    st.integers(min_value=50, max_value=3000).map(deep),
)


def paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) to a node of a JSON-like document."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += paths(value, (*prefix, index))
    return found


def _parent(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def set_at(doc: Any, path: tuple, value: Any) -> None:
    """Put ``value`` at ``path`` (a non-empty path of :func:`paths`) of ``doc``."""
    _parent(doc, path)[path[-1]] = value


def mutate(doc: Any, draw: Any, rounds: int = 3) -> Any:
    """``doc`` with 1..``rounds`` structural changes: drop, replace, misspell, wrap."""
    doc = json.loads(json.dumps(doc))  # a private copy
    for _ in range(draw(st.integers(1, rounds))):
        path = draw(st.sampled_from(paths(doc)))
        operation = draw(st.sampled_from(["drop", "replace", "replace", "misspell", "wrap"]))
        if not path:
            if operation in ("replace", "wrap"):
                doc = draw(weird_value) if operation == "replace" else [doc]
            continue
        parent, last = _parent(doc, path), path[-1]
        if operation == "drop":
            del parent[last]
        elif operation == "replace":
            parent[last] = draw(weird_value)
        elif operation == "wrap":
            parent[last] = [parent[last]]
        elif isinstance(parent, dict):
            # A new name, made unique by hand: a filter whose lambda differs only in its
            # default (the names taken) draws differently once Hypothesis has seen another
            # such lambda in the process, which it calls inconsistent data generation.
            name = draw(weird_text)
            while name in parent:
                name += "_"
            parent[name] = parent.pop(last)
    return doc


def to_json(doc: Any) -> bytes:
    """JSON as Python writes it (``NaN`` and ``Infinity`` included, as some tools do)."""
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    return _expand(text).encode("utf-8", "surrogatepass")


def to_yaml(doc: Any) -> bytes:
    import yaml

    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=10_000)
    return _expand(text).encode("utf-8", "surrogatepass")


NOT_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3(", b"\xed\xa0\x80", b"\x80abc", b"\xf4\x90\x80\x80"]


@st.composite
def byte_mutations(draw: Any, data: bytes) -> bytes:
    """``data`` broken at the byte level: cut short, bad bytes, a line repeated (a
    duplicate key), control characters, a byte-order mark, or another file's text."""
    operation = draw(
        st.sampled_from(["cut", "bytes", "duplicate", "control", "bom", "insert", "empty"])
    )
    at = draw(st.integers(0, len(data)))
    if operation == "cut":
        return data[:at]
    if operation == "bytes":
        return data[:at] + draw(st.sampled_from(NOT_UTF8)) + data[at:]
    if operation == "duplicate":
        lines = data.splitlines(keepends=True)
        if not lines:
            return data
        index = draw(st.integers(0, len(lines) - 1))
        return b"".join([*lines[: index + 1], lines[index], *lines[index + 1 :]])
    if operation == "control":
        char = draw(st.sampled_from(CONTROL)).encode("utf-8", "surrogatepass")
        return data[:at] + char + data[at:]
    if operation == "bom":
        return b"\xef\xbb\xbf" + data
    if operation == "insert":
        return data[:at] + draw(st.binary(max_size=30)) + data[at:]
    return b""


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A YAML "billion laughs": ``width ** levels`` strings from a few hundred bytes."""
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_yaml(depth: int) -> str:
    return "[" * depth + "]" * depth


BELT_TRAPS = [
    nested_json(5000).encode(),
    b'{"name": "NAME", "turns": ' + nested_json(900).encode() + b"}",
    b'{"name": "NAME", "turns": [{"message": "{{ prev.nope }}"}]}',
    b'{"name": "NAME", "turns": [{"message": "x", "expect": ' + nested_json(800).encode() + b"}]}",
    b'{"name": "NAME", "turns": [{"message": "x", "expect": {"files_created": ["/etc/x"]}}]}',
    b'{"name": "NAME", "turns": [{"message": "x"}], "llm_scorer_evidence_files": ["../x"]}',
    b'{"working_dir": ".", "fixture_repo": "x", "resources": [{"source": 1}]}',
    b'{"name": "NAME", "description": "\\ud800", "turns": [{"message": "\\udc00"}]}',
    b"null",
    b"",
]


@st.composite
def belt_group_files(draw: Any, files: dict[str, Any]) -> dict[str, bytes]:
    """belt group files (``{file name: document}``: a ``_config.json`` and scenarios),
    each as it is, mutated, broken at the byte level, or a known trap (``NAME`` in a
    trap is the scenario's name)."""
    out = {}
    for name, doc in files.items():
        if draw(st.booleans()):
            doc = mutate(doc, draw)
        text = to_json(doc)
        choice = draw(st.sampled_from(["as is", "as is", "bytes", "trap"]))
        if choice == "bytes":
            text = draw(byte_mutations(text))
        elif choice == "trap":
            stem = name.removesuffix(".json").encode()
            text = draw(st.sampled_from(BELT_TRAPS)).replace(b"NAME", stem)
        out[name] = text
    return out
