"""Checks of the bat repository: ``nox`` runs lint, tests and the wheel smoke test.

nox -s lint      ruff check + format check
nox -s tests     the whole pytest suite (pass pytest arguments after --)
nox -s wheel     build the wheel, install it in a fresh venv, run bat version + init.agent
nox -s e2e       only the end-to-end tests (a real bat-adk agent, wheel + bat-adk together)
"""

import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|venv"
nox.options.sessions = ["lint", "tests", "wheel"]

ROOT = Path(__file__).parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def tests(session):
    session.install("-e", ".[dev]")
    session.run("bash", ".ci/services.sh", external=True)  # Docker, registries, sshd
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def e2e(session):
    session.install("-e", ".[dev]")
    session.run(
        "python",
        "-m",
        "pytest",
        "-m",
        "slow",
        "tests/test_agent_e2e.py",
        "tests/test_coexistence.py",
        "tests/evaluation/test_eval_bat_adk.py",
        *session.posargs,
    )


@nox.session
def wheel(session):
    """The wheel alone, in a venv with nothing else of this checkout on its path."""
    session.install("build")
    dist = Path(session.create_tmp()).resolve() / "dist"
    session.run("python", "-m", "build", "--wheel", "--outdir", str(dist), ".")
    (built,) = dist.glob(f"bat_cli-{VERSION}-*.whl")
    session.install(str(built))
    work = Path(session.create_tmp()).resolve() / "smoke"
    work.mkdir(exist_ok=True)
    with session.chdir(work):
        out = session.run("bat", "version", silent=True)
        if out.strip() != f"bat-cli {VERSION}":
            session.error(f"bat version printed {out!r}")
        session.run("bat", "init.agent", "smoke", "-c", "planner", "--force")
        for name in (
            "agent.json",
            "config.yaml",
            ".env",
            "src/graph.py",
            "src/llm_clients/planner_client.py",
        ):
            if not (work / "smoke" / name).is_file():
                session.error(f"the wheel's init.agent did not write {name}")
        # report.html's template is package data: it must be in the wheel, not only here.
        session.run(
            "python",
            "-c",
            "from importlib.resources import files; "
            "assert (files('bat.evaluation.present.plot') / 'templates' / 'report.html.j2')"
            ".is_file(), "
            "'report.html.j2 is missing from the wheel'",
        )
