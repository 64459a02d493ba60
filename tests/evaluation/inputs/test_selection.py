"""Choosing what runs: --task, --tag, --exclude-tag, --limit (recorded, kept on resume), and
--dry-run, which checks everything and starts and writes nothing."""

import json
import socket

import yaml

from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs, summary

CHECK = {"output_must_contain": ["echo"]}
TASKS = [
    {"id": "login-ok", "tags": ["smoke", "auth"], "turns": ["a"], "expected": CHECK},
    {"id": "login-bad", "tags": ["auth"], "turns": ["b"], "expected": CHECK},
    {"id": "search", "meta": {"category": "smoke"}, "turns": ["c"], "expected": CHECK},
    {"id": "checkout", "tags": ["slow"], "turns": ["d"], "expected": CHECK},
]


def bat(*args, cwd):
    return run_bat(*args, cwd=cwd, env={"HOME": str(cwd / ".home")})


def chosen(project, *flags):
    result = bat("eval.run", *flags, cwd=project)
    assert result.code == 0, result.err
    run = json.loads((run_dirs(project)[-1] / "run.json").read_text())
    return run, result


def test_each_flag_chooses_and_the_run_records_it(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=1)
    run, result = chosen(project, "--task", "login-*")
    assert run["tasks"] == ["login-ok", "login-bad"]
    assert run["selection"] == {
        "task": ["login-*"],
        "tag": [],
        "exclude_tag": [],
        "limit": None,
        "chosen": 2,
        "of": 4,
    }
    assert "2 of 4 tasks chosen by --task login-*" in result.out
    card = json.loads((run_dirs(project)[-1] / "card.json").read_text())
    assert card["selection"] == run["selection"] and card["dataset"]["tasks"] == 2
    assert [t["task_id"] for t in summary(run_dirs(project)[-1])["attempts"]] == run["tasks"]
    # --tag: all of them; meta.category counts as a tag; --task: any glob.
    assert chosen(project, "--tag", "smoke")[0]["tasks"] == ["login-ok", "search"]
    assert chosen(project, "--tag", "smoke", "--tag", "auth")[0]["tasks"] == ["login-ok"]
    assert chosen(project, "--task", "search", "--task", "check*")[0]["tasks"] == [
        "search",
        "checkout",
    ]
    assert chosen(project, "--exclude-tag", "auth")[0]["tasks"] == ["search", "checkout"]
    assert chosen(project, "--limit", "3", "--exclude-tag", "smoke")[0]["tasks"] == [
        "login-bad",
        "checkout",
    ]
    everything, _ = chosen(project)
    assert everything["selection"] is None and len(everything["tasks"]) == 4


def test_resume_runs_the_recorded_selection_and_refuses_another(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=2)
    chosen(project, "--tag", "auth")
    run_dir = run_dirs(project)[0]
    episode = run_dir / "agent-default/episodes/login-bad__try2.json"
    episode.unlink()
    result = bat("eval.run", "--resume", cwd=project)
    assert result.code == 0, result.err
    assert episode.is_file()
    files = sorted(p.name for p in (run_dir / "agent-default/episodes").iterdir())
    assert [f.split("__")[0] for f in files] == ["login-bad"] * 2 + ["login-ok"] * 2
    result = bat("eval.run", "--resume", "--tag", "smoke", cwd=project)
    assert result.code == 2
    assert result.err.splitlines() == [
        f"bat: error: {run_dir.name} ran --tag auth; --resume runs that selection again "
        "(leave out --tag smoke)"
    ]


def test_a_selection_of_nothing_or_a_bad_flag_is_exit_2_and_writes_nothing(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=1)
    for flags, message in [
        (["--tag", "nope"], "is chosen by --tag nope"),
        (["--limit", "0"], "--limit 0: give a number of tasks, 1 or more"),
        (["--limit", "two"], "--limit 'two': give a whole number"),
        (["--task", ""], "--task needs a value"),
    ]:
        result = bat("eval.run", *flags, cwd=project)
        assert result.code == 2, (flags, result.err)
        assert len(result.err.splitlines()) == 1 and message in result.err
    assert not (project / "eval/output").exists()


def test_dry_run_prints_the_plan_and_starts_and_writes_nothing(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=3)
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["models"] = ["openai:gpt-a", "openai:gpt-b"]
    config["gates"] = ["pass_rate >= 0.9"]
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    port = int(config["evaluation"]["agent_url"].rsplit(":", 1)[1])
    result = bat(
        "eval.run", "--dry-run", "--tag", "auth", "--gate", "pass_hat_3 >= 0.5", cwd=project
    )
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "plan           2 models × 2 tasks × k = 3 = 12 episodes" in lines
    assert "tasks          2 of 4 chosen by --tag auth: login-ok, login-bad" in lines
    assert "gates          pass_rate >= 0.9; pass_hat_3 >= 0.5" in lines
    assert any(line.startswith("agent ") and "eval_fixtures.echo_agent" in line for line in lines)
    assert lines[-1] == "dry run: nothing was started or written"
    assert not (project / "eval/output").exists()
    with socket.socket() as sock:  # no agent was started on its port
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    # What a run would refuse, a dry run refuses too.
    config["gates"] = ["speed > 1"]
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", "--dry-run", cwd=project)
    assert result.code == 2 and "no figure named 'speed'" in result.err
    (project / "eval/input/tasks.json").write_text("[{]")
    config["gates"] = []
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", "--dry-run", cwd=project)
    assert result.code == 2 and "tasks.json" in result.err
    assert not (project / "eval/output").exists()
