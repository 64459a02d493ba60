"""Natural-language assertions and per-task judge words, in one real run.

The echo agent answers; bat serves a scripted judge (``judge: script:``) whose rules
match the prompt it is sent (``scope: prompt``): so a rule that needs the task's
instruction and evidence text to match proves they reached the judge, and the episode
files prove they never reached the agent. ``evaluation.qualitative`` is off: the tasks
with assertions are judged all the same (a judge is configured), the others are not.
"""

import json

import yaml

from tests.evalkit import episodes, make_project, run_dirs, summary
from tests.evaluation.judging.test_eval_judge import judge_reply

INSTRUCTION = "JUDGE-NOTE-7: a greeting must be warm"
EVIDENCE = "EVIDENCE-TEXT-42: warm greetings say hello"
TASKS = [
    {  # the judge passes its assertion, on the strength of the instruction and evidence
        "id": "greets",
        "turns": ["hello there"],
        "expected": {
            "output_must_contain": ["hello"],
            "assertions": ["The agent greets the user warmly"],
            "assertions_in_verdict": True,
        },
        "meta": {"llm_scorer_instruction": INSTRUCTION, "llm_scorer_evidence_files": ["rubric.md"]},
    },
    {  # the judge fails its assertion: the verdict fails though every other check passed
        "id": "leaves",
        "turns": ["goodbye"],
        "expected": {
            "output_must_contain": ["goodbye"],
            "assertions": ["The agent greets the user warmly"],
            "assertions_in_verdict": True,
        },
    },
    {  # assertions recorded only; the judge leaves the second one out: undecided
        "id": "records",
        "turns": ["recorded only"],
        "expected": {"assertions": ["The agent echoes", "The agent is brief"]},
    },
    {"id": "plain", "turns": ["nothing to assert"], "expected": {}},  # not judged at all
]


def reply(*decisions):
    data = json.loads(judge_reply(0.5))
    data["assertions"] = [
        {"index": index, "passed": passed, "reason": f"scripted {index}"}
        for index, passed in decisions
    ]
    return json.dumps(data)


RULES = [
    {
        "scope": "prompt",
        "regex": "JUDGE-NOTE-7[\\s\\S]*EVIDENCE-TEXT-42[\\s\\S]*greets the user",
        "reply": reply((0, True)),
    },
    {"scope": "prompt", "match": "goodbye", "reply": reply((0, False))},
    {"scope": "prompt", "match": "recorded only", "reply": reply((0, True))},
    {"reply": judge_reply(0.5)},  # no assertions key at all
]


def test_assertions_decide_the_verdict_and_evidence_reaches_only_the_judge(tmp_path, bat, home):
    project = make_project(tmp_path / "p", TASKS, k=1)
    (project / "eval" / "input" / "rubric.md").write_text(EVIDENCE)
    (project / "eval" / "judge.yaml").write_text(yaml.safe_dump(RULES))
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["judge"] = {"provider": "openai", "model": "stand-in", "script": "eval/judge.yaml"}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))

    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    assert "judging the episodes of 3 tasks with assertions" in result.out
    assert "judged 3 episodes" in result.out and "1 assertion undecided" in result.out
    (run_dir,) = run_dirs(project)
    found = {e["task_id"]: e for e in episodes(run_dir).values()}

    greets = found["greets"]
    assert greets["scores"]["assertions"] == [
        {
            "assertion": "The agent greets the user warmly",
            "passed": True,
            "reason": "scripted 0",
            "per_judge": {"openai:stand-in": True},
        }
    ]
    assert greets["verdict"]["passed"] and not greets["verdict"]["vacuous"]
    assert greets["verdict"]["checks"][-1] == {
        "name": "assertion:0",
        "passed": True,
        "detail": "assertion:0: passed ('The agent greets the user warmly'): scripted 0",
    }
    # The agent was never sent the task's words to the judge: not in its turns, its
    # answer, nor anywhere in the episode.
    text = json.dumps(greets)
    assert "JUDGE-NOTE-7" not in text and "EVIDENCE-TEXT-42" not in text
    assert greets["final_output"] == "echo: hello there"

    leaves = found["leaves"]
    assert leaves["scores"]["assertions"][0]["passed"] is False
    assert not leaves["verdict"]["passed"]
    assert [c["name"] for c in leaves["verdict"]["checks"] if not c["passed"]] == ["assertion:0"]
    assert (
        "assertion:0: failed ('The agent greets the user warmly'): scripted 0"
        in (leaves["verdict"]["reason"])
    )

    records = found["records"]
    first, second = records["scores"]["assertions"]
    assert first["passed"] is True and second["passed"] is None
    assert second["reason"] == "undecided: the judge left this assertion out"
    assert second["per_judge"] == {"openai:stand-in": None}
    assert not any(c["name"].startswith("assertion:") for c in records["verdict"]["checks"])

    assert found["plain"]["scores"] is None  # qualitative off: only assertions are judged
    totals = summary(run_dir)["totals"]
    assert totals["passed"] == 3 and totals["attempts"] == 4  # leaves failed

    # The run's snapshot holds the evidence's text, for a re-judging from the run alone.
    snapshot = json.loads((run_dir / "tasks.json").read_text())
    assert snapshot[0]["meta"]["llm_scorer_evidence_files"] == [
        {"path": "rubric.md", "text": EVIDENCE}
    ]

    # Re-checking the verdicts keeps the assertion checks (read back from the scores).
    again = bat("eval.verdict", cwd=project)
    assert again.code == 0 and "0 verdicts changed" in again.out, again.out + again.err
    rechecked = {e["task_id"]: e for e in episodes(run_dir).values()}
    assert rechecked["leaves"]["verdict"] == leaves["verdict"]


def test_assertions_in_the_verdict_without_a_judge_is_one_line(tmp_path, bat, home):
    project = make_project(tmp_path / "p", TASKS[1:2], k=1)
    refused = bat("eval.run", cwd=project)
    assert refused.code == 2, refused.out + refused.err
    (line,) = refused.err.strip().splitlines()
    assert "1 task (leaves) put expected.assertions in the verdict" in line
    assert "sets no judge:" in line and not run_dirs(project)
