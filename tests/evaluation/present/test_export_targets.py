"""Writes that cannot hurt: where ``eval.export --to`` and ``eval.run --export`` may
write, and run folders that are symbolic links.

Everything here runs the real ``bat`` on a real run of the echo agent (made once for the
module) against real devices, FIFOs and links; the property test feeds generated targets
to the real program in a scratch copy of the project and watches every write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests import fuzzkit as fk
from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs

TASKS = [
    {"id": "pass-me", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}},
    {"id": "fail-me", "turns": ["hello"], "expected": {"output_must_contain": ["nope"]}},
]
DOTENV = "OPENAI_API_KEY=sk-export-targets-key\n"
CONFIG_YAML = "name: demo\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A project (eval.yaml, tasks.json, .env, config.yaml) and one real finished run."""
    root = tmp_path_factory.mktemp("targets")
    (root / "home").mkdir()
    project = make_project(root / "project", TASKS, config_yaml=CONFIG_YAML)
    (project / ".env").write_text(DOTENV)
    result = run_bat("eval.run", cwd=project, env={"HOME": str(root / "home")})
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    return project, run_dir, root / "home"


def export(made, *args, cwd=None):
    project, _, home = made
    return run_bat("eval.export", *args, cwd=cwd or project, env={"HOME": str(home)}, timeout=20)


@pytest.fixture
def copied(made, tmp_path):
    """A copy of the project and its run, for a test a broken bat would write in (so a
    regression fails that test alone, not every test after it)."""
    project, _, home = made
    copy = tmp_path / "p"
    shutil.copytree(project, copy, symlinks=True)
    (run_dir,) = run_dirs(copy)
    return copy, run_dir, home


def in_copy(copied, *args):
    project, _, home = copied
    return run_bat("eval.export", *args, cwd=project, env={"HOME": str(home)}, timeout=20)


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file and link under ``folder``: its content's hash, or where it points."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink():
                found[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def refused(result, *says: str) -> None:
    """Exit 2 with exactly one ``bat: error:`` line saying each of ``says``."""
    assert result.code == 2, (result.code, result.out, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bat: error: "), result.err
    for words in says:
        assert words in lines[0], result.err


def is_char_device(path: str | Path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


# -- devices, FIFOs and links -----------------------------------------------------------


def test_a_character_device_stays_one(made, tmp_path):
    """``--to junit:/dev/null`` as root once replaced the machine's /dev/null with a
    regular file. A device of the test's own (made as root) is tried first, so a bat that
    still writes over devices fails here before it can reach /dev/null itself."""
    devices = []
    own = tmp_path / "null"
    try:
        os.mknod(own, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        devices.append(str(own))
    except PermissionError:
        pass  # not root: /dev is not ours to replace anyway
    devices += ["/dev/null", "/dev/full"]
    for device in devices:
        if not os.path.exists(device):
            continue
        rdev = os.lstat(device).st_rdev
        result = export(made, "--to", f"junit:{device}")
        assert is_char_device(device) and os.lstat(device).st_rdev == rdev, device
        refused(result, f"--to junit:{device}: {device} is a character device", "regular file")


def test_a_fifo_is_refused_without_blocking(made, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = export(made, "--to", f"csv:{fifo}")  # a time limit of 20 s: a hang fails
    refused(result, f"{fifo} is a FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_links_are_refused_whatever_they_point_at(made, tmp_path):
    """A link to /dev/stdout (the natural thing to type in CI), to a device, or to a
    regular file: refused, the link and its target left as they were. The link of the
    test's own is tried before /dev/stdout itself."""
    regular = tmp_path / "real.xml"
    regular.write_text("mine\n")
    for target in ("/dev/stdout", "/dev/null", regular):
        link = tmp_path / "out.xml"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        result = export(made, "--to", f"junit:{link}")
        refused(result, f"{link} is a symbolic link", "name the file the link points at")
        assert os.readlink(link) == str(target)
    assert regular.read_text() == "mine\n"
    if os.path.islink("/dev/stdout"):
        points = os.readlink("/dev/stdout")
        refused(export(made, "--to", "junit:/dev/stdout"), "/dev/stdout is a symbolic link")
        assert os.readlink("/dev/stdout") == points


def test_a_folder_is_refused(made, tmp_path):
    refused(export(made, "--to", f"json:{tmp_path}"), f"{tmp_path} is a folder")


# -- standard output ----------------------------------------------------------------------


def test_dash_writes_to_standard_output(made, tmp_path):
    """``-`` is bat's own standard output: the export alone (no ``Wrote`` line), no file
    named ``-``, and a file target beside it still written."""
    project, run_dir, _ = made
    out = tmp_path / "e.csv"
    result = export(made, "--to", "junit:-", "--to", f"csv:{out}")
    assert result.code == 0, result.err
    head, _, rest = result.out.partition("</testsuites>\n")
    assert head.startswith("<?xml") and run_dir.name in head
    assert rest == f"Wrote {out}\n"
    assert out.is_file() and not (project / "-").exists()


def test_dash_is_bytes_on_a_real_standard_output(made):
    """As a process: the export goes through the binary stdout, whole, and parses."""
    project, run_dir, home = made
    result = run_bat(
        "eval.export", "--to", "json:-", cwd=project, env={"HOME": str(home)}, process=True
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["run"]["run_id"] == run_dir.name


# -- the run and bat's inputs -----------------------------------------------------------


def _run_files(run_dir: Path) -> dict[str, Path]:
    episode = next((run_dir / "agent-default" / "episodes").glob("*.json"))
    return {
        "run.json": run_dir / "run.json",
        "episode": episode,
        "summary.json": run_dir / "agent-default" / "summary.json",
        "a new file in the run": run_dir / "agent-default" / "new.xml",
    }


@pytest.mark.parametrize("which", ["run.json", "episode", "summary.json", "a new file in the run"])
def test_no_file_of_the_run_is_written(copied, which):
    project, run_dir, _ = copied
    path = _run_files(run_dir)[which]
    before = fingerprint(project)
    for spec in (f"junit:{path}", f"csv:{path.relative_to(project)}"):  # either spelling
        refused(in_copy(copied, "--to", spec), "is inside the run being exported")
        assert fingerprint(project) == before


def test_another_run_folder_is_not_written_either(made, tmp_path):
    """A file inside any run folder (run.json beside it) or model folder (summary.json)."""
    _, run_dir, _ = made
    other = tmp_path / "old-run"
    shutil.copytree(run_dir, other)
    before = fingerprint(other)
    for path in (other / "report.xml", other / "agent-default" / "x" / "y.xml"):
        refused(export(made, "--to", f"junit:{path}"), "is inside the run folder")
        assert not path.exists()
    assert fingerprint(other) == before
    assert not (other / "agent-default" / "x").exists()  # no folder made for it either


@pytest.mark.parametrize(
    ("spec", "source"),
    [
        ("csv:.env", ".env"),
        ("junit:eval/eval.yaml", "eval/eval.yaml"),
        ("json:eval/input/tasks.json", "eval/input/tasks.json"),
        ("markdown:config.yaml", "config.yaml"),
        ("csv:./eval/../.env", ".env"),
    ],
)
def test_bat_inputs_are_refused_with_their_content_unchanged(copied, spec, source):
    project, _, _ = copied
    before = fingerprint(project)
    refused(in_copy(copied, "--to", spec), f"is one of bat's inputs ({source})")
    assert fingerprint(project) == before
    assert (project / ".env").read_text() == DOTENV


def test_an_input_is_refused_by_any_name(copied, tmp_path):
    """A hard link to .env, or .env by its absolute path with --run: the same file."""
    project, run_dir, _ = copied
    hard = tmp_path / "keys.csv"
    os.link(project / ".env", hard)
    refused(in_copy(copied, "--to", f"csv:{hard}"), "one of bat's inputs")
    refused(
        in_copy(copied, "--run", str(run_dir), "--to", f"csv:{project / '.env'}"),
        "one of bat's inputs",
    )
    assert (project / ".env").read_text() == DOTENV and hard.read_text() == DOTENV


def test_a_config_path_file_is_an_input_too(copied):
    """The agent's config file as CONFIG_PATH names it (eval.yaml's agent env)."""
    project, _, _ = copied
    (project / "agent.yaml").write_text(CONFIG_YAML)
    (project / ".env").write_text(DOTENV + "CONFIG_PATH=agent.yaml\n")
    refused(in_copy(copied, "--to", "csv:agent.yaml"), "agent.yaml is one of bat's inputs")
    assert (project / "agent.yaml").read_text() == CONFIG_YAML


# -- malformed targets ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("junit:{tmp}/a\x01b.xml", "the path holds a control character"),
        ("junit:{tmp}/a\x00b.xml", "the path holds a control character"),
        ("junit:{tmp}/reports/", "the path names a folder, not a file"),
        ("junit:{tmp}/" + "x" * 5000, "the path is longer than 4,096 bytes"),
        ("junit\n:{tmp}/x.xml", "is not NAME:PATH"),
        ("junit:{tmp}/first.csv/x.xml", "is not a folder, so"),
    ],
    ids=["control", "nul", "folder", "long", "newline-in-name", "file-as-folder"],
)
def test_a_malformed_target_is_one_line(made, tmp_path, spec, says):
    (tmp_path / "first.csv").write_text("mine\n")
    before = fingerprint(tmp_path)
    result = export(made, "--to", f"csv:{tmp_path / 'new.csv'}", "--to", spec.format(tmp=tmp_path))
    refused(result, says)
    assert fingerprint(tmp_path) == before


def test_one_file_named_twice_is_refused(made, tmp_path):
    out = tmp_path / "same"
    result = export(made, "--to", f"junit:{out}", "--to", f"csv:{tmp_path}/./same")
    refused(result, "junit:", "writes that file already")
    assert not out.exists()


# -- a run folder that is a symbolic link -------------------------------------------------


def test_a_symlinked_run_folder_is_refused_by_every_writer(made, tmp_path):
    """``output/RUN`` pointing elsewhere: every command that writes in a run refuses it
    (the log layer's one check), so gates.json and the summaries never land outside."""
    project, _, home = made
    copy = tmp_path / "p"
    shutil.copytree(project, copy, symlinks=True)
    (run_dir,) = run_dirs(copy)
    outside = tmp_path / "outside"
    shutil.move(run_dir, outside)
    run_dir.symlink_to(outside, target_is_directory=True)
    before = fingerprint(outside)
    for args in (
        ["eval.gate", "--save", "--gate", "pass_at_1 >= 0.5"],
        ["eval.gate", "--save", "--run", run_dir.name, "--gate", "pass_at_1 >= 0.5"],
        ["eval.summarize", "--run", str(run_dir)],
        ["eval.verdict"],
        ["eval.judge"],
        ["eval.run", "--resume", run_dir.name],
    ):
        result = run_bat(*args, cwd=copy, env={"HOME": str(home)}, timeout=30)
        assert result.code == 2, (args, result.out, result.err)
        assert f"bat: error: {run_dir} is a symbolic link to {outside}" in result.err, args
        assert "Traceback" not in result.err
        assert not (outside / "gates.json").exists(), args
        assert fingerprint(outside) == before, args


# -- eval.run --export: checked before anything runs --------------------------------------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("xlsx:x", "no exporter named 'xlsx'"),
        ("junit", "--export 'junit' is not NAME:PATH"),
        ("junit:/dev/null", "--export junit:/dev/null: /dev/null is a character device"),
        ("csv:.env", "one of bat's inputs"),
        ("junit:eval/eval.yaml", "one of bat's inputs"),
    ],
    ids=["unknown-name", "not-name-path", "device", "dotenv", "eval-yaml"],
)
def test_eval_run_refuses_a_bad_export_before_the_agent_starts(made, tmp_path, spec, says):
    """No run folder, no agent, no episode: the bad --export is found first. The agent
    is a real one that would write a file the moment it started."""
    _, _, home = made
    copy = make_project(
        tmp_path / "p",
        TASKS,
        command=f"{{python}} -c \"open({str(tmp_path / 'started')!r}, 'w')\"",
    )
    (copy / ".env").write_text(DOTENV)
    rdev = os.lstat("/dev/null").st_rdev
    result = run_bat("eval.run", "--export", spec, cwd=copy, env={"HOME": str(home)}, timeout=20)
    refused(result, says)
    assert run_dirs(copy) == [] and not (copy / "eval" / "output").exists()
    assert not (tmp_path / "started").exists()
    assert is_char_device("/dev/null") and os.lstat("/dev/null").st_rdev == rdev
    assert (copy / ".env").read_text() == DOTENV


def test_eval_run_exports_to_standard_output_at_its_end(made, tmp_path):
    _, _, home = made
    copy = make_project(tmp_path / "p", TASKS[:1])
    result = run_bat("eval.run", "--export", "markdown:-", cwd=copy, env={"HOME": str(home)})
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(copy)
    assert run_dir.name in result.out and "| agent-default |" in result.out
    assert "Wrote -" not in result.out and not (copy / "-").exists()


# -- property test: any target, one line or an export, nothing else touched ---------------

# Mostly real names and one colon, so most examples reach the path's checks.
NAMES = st.sampled_from(
    ["junit", "csv", "markdown", "json"] * 4 + ["xlsx", "", "JUnit", "a b", "-"]
)
SEPARATORS = st.sampled_from([":"] * 8 + ["", "::"])
PLACES = [
    "-",
    "out.xml",
    "reports/deep/out.csv",
    "{scratch}/elsewhere.json",
    ".env",
    "eval/eval.yaml",
    "eval/input/tasks.json",
    "config.yaml",
    "./.env",
    "eval/../config.yaml",
    "{run}/run.json",
    "{run}/agent-default/summary.json",
    "{run}/agent-default/new.xml",
    "{run}",
    "fifo",
    "device",
    "link-to-device",
    "link-to-file",
    "link-to-env",
    "hard-link-to-env",
    "existing.txt",
    ".",
    "..",
    "eval/",
    "",
    " ",
    "x" * 5000,
]


@st.composite
def targets(draw) -> list[str]:
    """One to three ``NAME:PATH`` specs: a name (known, unknown, malformed) and a place
    (a new file, stdout, an input, a run's file, a device, FIFO or link, a folder, text
    no path can be), sometimes broken with control characters, sometimes without the
    colon."""
    specs = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        how = draw(st.sampled_from(["place", "place", "broken place", "text"]))
        if how == "text":
            place = draw(fk.weird_text).lstrip("/")  # never a new file at the machine's /
        else:
            place = draw(st.sampled_from(PLACES))
            if how == "broken place":
                place += draw(st.sampled_from(["/", "/x", "\x1b", "\x00", "é", "/../.env"]))
        specs.append(f"{draw(NAMES)}{draw(SEPARATORS)}{place}")
    return specs


SCALE = float(os.environ.get("FUZZ_SCALE", "1"))  # as tests/test_fuzz_inputs.py


def fuzz(examples: int):
    """This module's Hypothesis settings, as tests/test_fuzz_inputs.py's: deterministic,
    no database, no deadline."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


WORK = "a/b/c/project"


def _scratch(made) -> Path:
    """A scratch folder: a copy of the project (with its run), a FIFO, a device of its
    own when root can make one, links to them and to .env, a hard link to .env."""
    project, _, _ = made
    root = Path(tempfile.mkdtemp(prefix="targets-fuzz-", dir=project.parent))
    (root / "home").mkdir()
    work = root / WORK  # deep: ../../../etc/passwd stays in the scratch folder
    shutil.copytree(project, work, symlinks=True)
    os.mkfifo(work / "fifo")
    try:
        os.mknod(work / "device", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        os.mkfifo(work / "device")  # not root: a FIFO stands in
    (work / "link-to-device").symlink_to(work / "device")
    (work / "existing.txt").write_text("mine\n")
    (work / "link-to-file").symlink_to(work / "existing.txt")
    (work / "link-to-env").symlink_to(work / ".env")
    os.link(work / ".env", work / "hard-link-to-env")
    return root


def snapshot(folder: Path) -> dict[str, str]:
    """``{relative path: what it is}`` under ``folder``: a regular file's mode and
    content hash, a link's target, any other kind by its type and device number.
    (:func:`tests.fuzzkit.snapshot` opens every file, and opening a FIFO blocks.)"""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, folder)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = "link:" + os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                found[rel] = f"{oct(info.st_mode)}:{digest}"
            elif not stat.S_ISDIR(info.st_mode):
                found[rel] = f"{stat.S_IFMT(info.st_mode):o}:{info.st_rdev}"
    return found


def check_targets(made, specs: list[str]) -> None:
    """Run ``bat eval.export`` with ``specs`` in a scratch copy: exit 0, or 2 with one
    line; no traceback or hang; nothing written outside the scratch folder; no file of
    the project changed but a new export or the regular file ``existing.txt``; the FIFO
    and the device are what they were."""
    root = _scratch(made)
    try:
        work = root / WORK
        (run_dir,) = run_dirs(work)
        filled = [s.replace("{scratch}", str(root)).replace("{run}", str(run_dir)) for s in specs]
        argv = ["eval.export", *[a for spec in filled for a in ("--to", spec)]]
        before = snapshot(root)
        outcome = fk.run_in_process(argv, cwd=work, scratch=root)
        fk.check_outcome(outcome, f"targets: {filled!r}"[:600])
        changed = fk.changed_files(before, snapshot(root))
        allowed = {f"{WORK}/existing.txt"} if outcome.code == 0 else set()
        assert set(changed) <= allowed, f"{filled!r}\n{outcome.describe()}\nchanged: {changed}"
        assert stat.S_ISFIFO(os.lstat(work / "fifo").st_mode)
        mode = os.lstat(work / "device").st_mode
        assert stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)
        assert os.path.islink(work / "link-to-device") and os.path.islink(work / "link-to-env")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@fuzz(60)
@given(specs=targets())
def test_any_export_target_is_an_export_or_one_line(made, specs):
    check_targets(made, specs)


def test_the_target_check_can_fail(made, monkeypatch):
    """The canary: with a broken path check (a bare ValueError, as a parser's bug would
    raise) the same check reports the traceback, so the property test can fail."""
    from bat.evaluation.present.export import targets as checks

    def broken(text: str) -> str | None:
        raise ValueError(f"broken on {text!r}")

    monkeypatch.setattr(checks, "path_problem", broken)
    monkeypatch.setattr("bat.evaluation.present.export.path_problem", broken)
    with pytest.raises(AssertionError, match=r"Traceback|exit"):
        check_targets(made, ["junit:out.xml"])


# -- the step summary, a file named "-", and the atomic writer's backstop -----------------


def test_a_step_summary_fifo_nobody_reads_fails_at_once(made, tmp_path):
    """``$GITHUB_STEP_SUMMARY`` is appended to, never replaced; a FIFO there without a
    reader is one line naming it, not a job that hangs."""
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    project, _, home = made
    result = run_bat(
        "eval.export",
        "--to",
        f"markdown:{tmp_path / 's.md'}",
        cwd=project,
        env={"HOME": str(home), "GITHUB_STEP_SUMMARY": str(fifo)},
        timeout=20,
    )
    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith(f"bat: error: $GITHUB_STEP_SUMMARY: {fifo} is a FIFO")
    assert len(result.err.splitlines()) == 1
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("where", ["eval/eval.yaml", ".env", "RUN/run.json"])
def test_a_step_summary_at_an_input_or_in_a_run_is_refused_unchanged(copied, tmp_path, where):
    """An outside probe pointed ``$GITHUB_STEP_SUMMARY`` at eval.yaml and at run.json: the
    Markdown was appended to them and neither could be read again. The step summary is
    now checked like a ``--to`` target, before anything is written."""
    project, run_dir, home = copied
    summary = run_dir / "run.json" if where.startswith("RUN") else project / where
    before = summary.read_bytes()
    result = run_bat(
        "eval.export",
        "--to",
        f"markdown:{tmp_path / 's.md'}",
        cwd=project,
        env={"HOME": str(home), "GITHUB_STEP_SUMMARY": str(summary)},
        timeout=20,
    )
    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith("bat: error: $GITHUB_STEP_SUMMARY: ")
    assert len(result.err.splitlines()) == 1
    assert summary.read_bytes() == before and not (tmp_path / "s.md").exists()


def test_dot_slash_dash_is_a_file_named_dash(copied):
    project, _, _ = copied
    result = in_copy(copied, "--to", "csv:./-")
    assert result.code == 0, result.err
    assert result.out == "Wrote -\n" and (project / "-").read_text().startswith("run_id,")


def test_the_atomic_writer_never_renames_over_a_device_or_fifo(tmp_path):
    """Every file bat writes goes through bat.atomic: whatever a caller checked or not,
    a device or FIFO at the path is refused, and left what it was."""
    from bat.atomic import write_text_atomic
    from bat.errors import UsageError

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    places = [fifo]
    with contextlib.suppress(PermissionError):  # not root: no device of our own
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        places.append(tmp_path / "null")
    for place in places:
        kind = stat.S_IFMT(os.lstat(place).st_mode)
        with pytest.raises(UsageError, match="is not a regular file"):
            write_text_atomic(place, "x")
        assert stat.S_IFMT(os.lstat(place).st_mode) == kind
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in places)


# -- the parsers alone: any text, a Target or a one-line error ------------------------------


@fuzz(400)
@given(spec=st.one_of(fk.weird_text, st.builds(lambda n, p: f"{n}:{p}", NAMES, fk.weird_text)))
def test_parse_target_is_a_target_or_one_input_error(spec):
    """Any text: a Target (its path text clean, ``-`` only for stdout) or an InputError
    whose message is one line; never another exception."""
    from bat.errors import InputError
    from bat.evaluation.present.export import parse_target

    try:
        target = parse_target(spec)
    except InputError as exc:
        assert exc.message.strip() and not exc.details
        return
    text = spec.partition(":")[2]
    assert target.stdout == (text == "-")
    assert not any(ord(ch) < 32 or ch == "\x7f" for ch in text) and not text.endswith("/")


@pytest.fixture(scope="module")
def fixed_scratch(made):
    """One scratch folder for the pure check (which writes nothing), made once."""
    root = _scratch(made)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@fuzz(300)
@given(place=st.one_of(st.sampled_from(PLACES), fk.weird_text))
def test_check_target_refuses_or_allows_with_one_error_class(fixed_scratch, place):
    """Any path text against a real folder of FIFOs, devices and links: allowed only
    for what is a regular file or nothing yet, else a UsageError; never another
    exception, and nothing opened (a FIFO would block)."""
    from bat.errors import UsageError
    from bat.evaluation.present.export.targets import check_target, path_problem

    root = fixed_scratch
    work = root / WORK
    (run_dir,) = run_dirs(work)
    text = place.replace("{scratch}", str(root)).replace("{run}", str(run_dir))
    if path_problem(text) is not None or text == "-":
        return  # refused by parse_target, or standard output
    path = work / text
    with fk.time_limit(5):
        try:
            check_target("--to x", path, run_dir=run_dir, inputs=[work / ".env"])
        except UsageError as exc:
            assert exc.message.startswith("--to x: ") and "\n" not in exc.message
            return
    info = None
    with contextlib.suppress(OSError):
        info = os.lstat(path)
    assert info is None or stat.S_ISREG(info.st_mode), text
    assert not os.path.realpath(path).startswith(os.path.realpath(run_dir) + os.sep)
    assert os.stat(work / ".env").st_ino != (info.st_ino if info else None)


@pytest.mark.parametrize("spec", ["csv:-", "csv:./-", "junit:reports/j.xml", "json:/abs/x.json"])
def test_a_target_label_parses_back_to_the_same_target(spec):
    """eval.run hands its --export values to the export stage as text: ``./-`` (a file)
    must not come back as ``-`` (standard output)."""
    from bat.evaluation.present.export import parse_target

    target = parse_target(spec)
    assert parse_target(target.label) == target


def test_eval_run_refuses_an_export_into_an_earlier_run_before_starting(copied):
    """The earlier run's folder is found before the agent starts: no new run is made."""
    project, run_dir, home = copied
    before = fingerprint(project)
    for args in (
        ["--export", f"junit:{run_dir.relative_to(project)}/junit.xml"],
        ["--dry-run", "--export", "xlsx:x"],
    ):
        result = run_bat("eval.run", *args, cwd=project, env={"HOME": str(home)}, timeout=20)
        refused(result, "is inside the run folder" if "junit" in args[1] else "'xlsx'")
        assert run_dirs(project) == [run_dir] and fingerprint(project) == before
