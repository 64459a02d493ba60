"""Developer tasks of the bat repository (run them with ``invoke``, e.g. ``invoke check``).

This file doubles as the working example of reusing bat's collections in another
project's ``tasks.py``: the whole ``bat`` command tree is mounted below as ``bat``, so
``invoke bat.init.agent demo`` runs the same task as ``bat init.agent demo``, and a task
of this project can chain one of bat's with ``pre``/``post``.
"""

from invoke import Collection, task

from bat.tasks import ns as bat_commands
from bat.tasks import version as bat_version


@task
def test(c):
    """Run the whole test suite."""
    c.run("python -m pytest", pty=False)


@task
def lint(c):
    """ruff: lint and formatting check."""
    c.run("ruff check .")
    c.run("ruff format --check .")


@task
def bench(c):
    """Start-up benchmark of the bat program (medians)."""
    c.run("python benchmarks/startup.py")


@task(pre=[lint, test], post=[bat_version.version])
def check(c):
    """Lint and test, then print which bat-cli was checked (a bat task chained as `post`)."""
    print("all checks passed")


ns = Collection(test, lint, bench, check)
ns.add_collection(bat_commands, name="bat")
