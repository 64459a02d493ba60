"""Agent and client names: what is accepted, what each derives to, what is refused."""

import pytest

from bat.errors import InputError
from bat.scaffold.names import AgentName, ClientName, parse_client_list


@pytest.mark.parametrize(
    ("raw", "project", "identifier", "class_prefix"),
    [
        ("demo", "demo", "demo", "Demo"),
        ("Weather-Bot", "weather-bot", "weather_bot", "WeatherBot"),
        ("my_agent2", "my-agent2", "my_agent2", "MyAgent2"),
        ("a--b__c", "a-b-c", "a_b_c", "ABC"),
    ],
)
def test_agent_name_derivations(raw, project, identifier, class_prefix):
    name = AgentName.parse(raw)
    assert (name.project, name.identifier, name.class_prefix) == (project, identifier, class_prefix)
    assert name.identifier.isidentifier()


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "9lives",
        "-x",
        "has space",
        "dot.ted",
        "x/y",
        "../up",
        "bat",
        "bat-adk",
        "a-",
        "é",
        "x" * 65,
    ],
)
def test_bad_agent_names_are_refused(raw):
    with pytest.raises(InputError):
        AgentName.parse(raw)


def test_client_names_derive_module_and_class():
    client = ClientName.parse("Query-Planner")
    assert (client.name, client.module, client.class_name) == (
        "query_planner",
        "query_planner_client",
        "QueryPlannerClient",
    )
    assert ClientName.parse("planner_client") == ClientName.parse("planner")


@pytest.mark.parametrize("raw", ["", "1x", "class", "a b", "x;y", "ü"])
def test_bad_client_names_are_refused(raw):
    with pytest.raises(InputError):
        ClientName.parse(raw)


def test_client_lists_split_commas_keep_order_and_drop_repeats():
    clients = parse_client_list(["planner,executor", "critic", "planner", " , "])
    assert [c.name for c in clients] == ["planner", "executor", "critic"]


def test_client_from_module_ignores_other_files():
    assert ClientName.from_module("planner_client").class_name == "PlannerClient"
    assert ClientName.from_module("helpers") is None
