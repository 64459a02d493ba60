"""The bundled demo, offline and without any key: `python eval_fixtures/demo/run_demo.py`.

It picks a free port for the demo agent and then *becomes* `bat eval.run` in this folder
(the process is replaced, not wrapped): bat starts the demo agent on that port, runs 18
tasks × 3 attempts (one a conversation with the stand-in simulated user of eval.yaml,
user-rules.yaml, served by bat on a free port), serves the stand-in LLM judge
(judge-rules.json, on a free port of its own, while it judges), writes summary.json and
metrics.json, and draws the charts and report.html into eval/output/.

Why exec: a wrapper killed with `kill -9` cannot stop what it started. With no wrapper,
whatever ends the demo ends bat itself, and bat leaves nothing behind: the agent has a
watchdog that stops it when bat is gone, the judge and the chart renderer end when bat's
end of their pipe closes. eval/eval.yaml reads the agent's port from DEMO_AGENT_PORT
(9960 when `bat eval.run` is run here by hand), so two demos, or a demo and a service
of yours, never fight over a port.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    env = {**os.environ, "DEMO_AGENT_PORT": str(free_port())}
    bat = Path(sys.executable).with_name("bat")  # the console script beside this Python
    program = [str(bat)] if bat.is_file() else [sys.executable, "-m", "bat.cli"]
    command = [*program, "eval.run"]
    os.chdir(HERE)
    sys.stdout.flush()
    os.execve(command[0], command, env)


if __name__ == "__main__":
    main()
