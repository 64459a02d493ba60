"""The README's promises: two set-up commands, CI runs the test one, docs for every group."""

import re

from tests.conftest import REPO


def setup_commands():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section, re.S)


def test_readme_has_exactly_two_setup_commands():
    commands = setup_commands()
    assert len(commands) == 2
    assert all("\n" not in command for command in commands)
    assert "run_demo.py" in commands[0] and "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text()
    assert setup_commands()[1] in ci.splitlines()


def test_every_command_group_has_a_docs_page():
    from bat.tasks import ns

    for group in ns.collections:
        page = REPO / "docs" / f"{group}.md"
        assert page.is_file(), page
        for task in ns.collections[group].task_names:
            assert f"{group}.{task}" in page.read_text()
    for task in ns.tasks:
        assert (REPO / "docs" / f"{task}.md").is_file()


def test_every_configuration_key_is_documented():
    from bat.tasks import ns

    text = (REPO / "docs" / "configuration.md").read_text()

    def keys(tree, prefix=""):
        for key, value in tree.items():
            if isinstance(value, dict):
                yield from keys(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}"

    for key in keys(ns.configuration()):
        assert f"`{key}`" in text, key
