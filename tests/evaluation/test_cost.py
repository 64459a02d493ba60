"""What an evaluation costs: prices from genai-prices or prices:, each episode's parts.

The prices are genai-prices' own (the installed table, compared with the library's own
answer, never a number typed here); the run is a real one, a tool agent reporting its
tokens in its stream and a judge served by bat's scripted model over real HTTP.
"""

import http.server
import json
import threading

import pytest
import yaml
from genai_prices import Usage as LibraryUsage
from genai_prices import calc_price

from bat.evaluation import stats
from bat.evaluation.cost import AGENT_DEFAULT, PriceBook, episode_cost, with_judges
from bat.evaluation.inputs.prices import Prices
from bat.evaluation.log.episode import Usage
from tests import logkit
from tests.evalkit import episodes, make_project, run_dirs, summary


def library_cost(model: str, provider: str, prompt: int, completion: int) -> float:
    usage = LibraryUsage(input_tokens=prompt, output_tokens=completion)
    return float(calc_price(usage, model, provider_id=provider).total_price)


class Spec:
    """A models:, judge: or user: entry, as far as prices go."""

    def __init__(self, label: str, script: str | None = None) -> None:
        self.provider, self.model = label.split(":", 1)
        self.script = script


def test_a_model_genai_prices_lists_is_priced_from_it():
    book = PriceBook()
    price = book.price("openai", "gpt-4o-mini")
    assert price is not None and price.source.startswith("genai-prices 0.")
    assert price.cost(12_345, 678) == pytest.approx(
        library_cost("gpt-4o-mini", "openai", 12_345, 678), rel=1e-9
    )
    # bat's provider names that genai-prices spells otherwise
    gemini = book.price("gemini", "gemini-2.0-flash")
    assert gemini is not None and gemini.input == book.price("google", "gemini-2.0-flash").input
    record = book.record()
    assert record["library"] == "genai-prices" and record["auto_update"] is False
    assert record["models"]["openai:gpt-4o-mini"]["source"] == price.source


def test_a_prices_entry_overrides_genai_prices_and_bat_yaml():
    own = Prices.model_validate({"openai:gpt-4o-mini": {"input": 1, "output": 2, "note": "ours"}})
    team = Prices.model_validate(
        {"gpt-4o-mini": {"input": 5, "output": 6}, "m": {"input": 7, "output": 8}}
    )
    book = PriceBook(own, team)
    mine = book.price("openai", "gpt-4o-mini")
    assert (mine.input, mine.output, mine.source, mine.note) == (1, 2, "eval.yaml", "ours")
    assert mine.cost(1_000_000, 500_000) == 2.0  # 1 M prompt at 1 + 0.5 M completion at 2
    assert book.price("any", "m").source == "bat.yaml"  # a bare name, any provider
    assert book.price("openai", "gpt-4o-mini", stand_in=True).source == "eval.yaml"


def test_an_unpriced_model_is_said_once_and_its_cost_is_unknown_not_zero():
    said: list[str] = []
    book = PriceBook(say=said.append)
    spec = Spec("ollama:llama3.2")  # a provider genai-prices does not have: never guessed
    for _ in range(3):
        assert book.price_of(spec) is None
    assert said == ["no price for ollama:llama3.2: its cost is unknown (genai-prices does not "
                    "list it); give one in prices: in eval.yaml"]  # fmt: skip
    episode = logkit.episode("t", 1, True)
    cost = episode_cost(book, episode, spec)
    assert cost.agent is None and cost.unpriced == ["ollama:llama3.2"] and cost.total == 0
    # a stand-in model costs nothing real: unpriced without a word, unless prices: has it
    assert book.price_of(Spec("openai:gpt-4o", script="rules.json")) is None
    assert book.price_of(AGENT_DEFAULT) is None and len(said) == 1


def test_an_episodes_parts_are_priced_apart_and_summed_in_the_figures():
    own = Prices.model_validate(
        {"a:agent": {"input": 1, "output": 2}, "j:judge": {"input": 3, "output": 4}}
    )
    book = PriceBook(own)
    rows = []
    for attempt, passed in ((1, True), (2, False)):
        episode = logkit.episode("t", attempt, passed, prompt_tokens=1000, completion_tokens=500)
        episode.cost = episode_cost(book, episode, Spec("a:agent"))
        assert episode.cost.agent == (1000 * 1 + 500 * 2) / 1e6
        judged = Usage(prompt_tokens=2000, completion_tokens=100)
        episode.cost = with_judges(episode.cost, book, [(Spec("j:judge"), judged)])
        assert episode.cost.judge == (2000 * 3 + 100 * 4) / 1e6
        assert episode.cost.total == pytest.approx(episode.cost.agent + episode.cost.judge)
        rows.append(stats.row_of(episode))
    figures = stats.cost_figures(rows)
    assert figures.total == pytest.approx(2 * (0.002 + 0.0064))
    assert figures.per_pass == figures.total  # one attempt passed: it carries both costs
    assert (figures.agent, figures.judge, figures.user) == (0.004, 0.0128, 0.0)
    assert figures.unpriced_episodes == 0 and figures.per_episode.max == 0.0084


JUDGE_REPLY = json.dumps(
    {
        name: {"reasoning": "fine", "score": 0.5}
        for name in (
            "response_relevance",
            "task_completion_quality",
            "hallucination_score",
            "tool_call_appropriateness",
        )
    }
)


def test_a_run_prices_the_agent_from_genai_prices_the_judge_from_prices_and_names_the_unpriced(
    tmp_path, bat, home
):
    tasks = [{"id": "sum", "turns": ["calculate 6*7"], "expected": {"output_must_contain": ["42"]}}]
    project = make_project(tmp_path / "p", tasks, agent="tool_agent", k=2, qualitative=True)
    (project / "judge.json").write_text(json.dumps([{"reply": JUDGE_REPLY}]))
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["models"] = [
        {"provider": "openai", "model": "gpt-4o-mini", "name": "listed"},
        {"provider": "ollama", "model": "llama3.2", "name": "self-hosted"},
    ]
    config["judge"] = {"provider": "openai", "model": "house-judge", "script": "judge.json"}
    config["prices"] = {"openai:house-judge": {"input": 0.5, "output": 1.5}}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", cwd=project, env={"OPENAI_API_KEY": "sk-not-used"})
    assert result.code == 0, result.err
    assert result.err.count("no price for ollama:llama3.2") == 1  # said once, not per episode
    lines = {line.split("]")[0]: line for line in result.out.splitlines() if "passed (" in line}
    assert "; cost at least " in lines["[self-hosted"]  # a lower bound, and said so
    assert "; cost 0.0" in lines["[listed"] and " per pass" in lines["[listed"]
    (run_dir,) = run_dirs(project)

    for episode in episodes(run_dir, "listed").values():
        usage, cost = episode["trace"]["usage"], episode["cost"]
        assert usage["total_tokens"] > 0 and cost["currency"] == "USD"
        assert cost["agent"] == pytest.approx(
            library_cost(
                "gpt-4o-mini", "openai", usage["prompt_tokens"], usage["completion_tokens"]
            )
        )
        (judged,) = episode["scores"]["usage"].values()  # the judge's tokens, apart
        assert judged["prompt_tokens"] > usage["prompt_tokens"]
        expected = (judged["prompt_tokens"] * 0.5 + judged["completion_tokens"] * 1.5) / 1e6
        assert cost["judge"] == pytest.approx(expected)
        assert cost["total"] == pytest.approx(cost["agent"] + cost["judge"])
        assert cost["unpriced"] == [] and "user" not in cost

    for episode in episodes(run_dir, "self-hosted").values():
        assert episode["cost"]["agent"] is None and episode["cost"]["judge"] > 0
        assert episode["cost"]["unpriced"] == ["ollama:llama3.2"]
    listed, unpriced = summary(run_dir, "listed")["cost"], summary(run_dir, "self-hosted")["cost"]
    assert listed["unpriced_episodes"] == 0 and listed["episodes"] == 2
    assert listed["total"] == pytest.approx(listed["agent"] + listed["judge"])
    assert unpriced["unpriced"] == ["ollama:llama3.2"] and unpriced["unpriced_episodes"] == 2
    assert unpriced["agent"] == 0 and unpriced["total"] == unpriced["judge"]
    metrics = json.loads((run_dir / "listed" / "metrics.json").read_text())
    assert metrics["summary"]["cost"] == listed  # the same figures in both files
    assert metrics["summary"]["tokens"]["total_tokens_total"] > 0  # bat-cli's keys as before


class _Table(http.server.BaseHTTPRequestHandler):
    """A newer price table, as genai-prices publishes it (a provider array)."""

    table = [
        {
            "id": "openai",
            "name": "OpenAI",
            "api_pattern": r"https://api\.openai\.com",
            "models": [
                {
                    "id": "gpt-4o-mini",
                    "match": {"equals": "gpt-4o-mini"},
                    "prices": {"input_mtok": 9, "output_mtok": 99},
                }
            ],
        }
    ]

    def do_GET(self):
        body = json.dumps(self.table).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_price_update_is_off_unless_turned_on_and_then_for_the_run_only():
    assert PriceBook().record()["auto_update"] is False
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Table)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/data.json"
        book = PriceBook(update_from=url)
        price = book.price("openai", "gpt-4o-mini")
        assert (price.input, price.output) == (9, 99) and price.source.endswith("(updated)")
        record = book.record()
        assert record["auto_update"] is True and record["updated"] is True
        # the library's own table is untouched: another run (or this process) is not
        installed = PriceBook().price("openai", "gpt-4o-mini")
        assert installed.input != 9 and "(updated)" not in installed.source
    finally:
        server.shutdown()
        server.server_close()
    said: list[str] = []
    book = PriceBook(say=said.append, update_from=url)  # the server is gone now
    assert book.price("openai", "gpt-4o-mini").input == installed.input
    assert len(said) == 1 and said[0].startswith(f"could not update the prices from {url} (")
    assert book.record()["updated"] is False


def test_an_agent_that_reports_no_tokens_is_free_where_it_failed_unknown_where_it_never_does():
    book = PriceBook(Prices.model_validate({"a:agent": {"input": 1, "output": 2}}))

    def row(passed: bool, tokens: int):
        episode = logkit.episode("t", 1, passed, prompt_tokens=tokens, completion_tokens=0)
        episode.trace.usage_source = "stream" if tokens else "none"
        episode.cost = episode_cost(book, episode, Spec("a:agent"))
        return stats.row_of(episode)

    silent = row(False, 0)
    assert silent.cost.untracked and silent.cost.agent is None
    # it reports its tokens elsewhere: the silent episode failed before any model call
    mixed = stats.cost_figures([row(True, 1_000_000), silent])
    assert (mixed.total, mixed.unpriced_episodes, mixed.unpriced) == (1.0, 0, [])
    # it never reports them: what it cost is unknown, and the figures say so
    never = stats.cost_figures([silent, row(True, 0)])
    assert never.unpriced_episodes == 2 and never.unpriced == [stats.NO_TOKENS]


def test_a_cached_judgement_costs_its_own_episode_again_and_another_nothing(tmp_path):
    from bat.evaluation.judging.cache import JudgeCache

    cache = JudgeCache(tmp_path / "judge-cache")
    cache.put("k", "{}", (1200, 80), episode="m/t/1", judge="openai:j")
    assert cache.entry("k", "m/t/1") == ("{}", (1200, 80))  # a re-judge: the same cost
    assert cache.entry("k", "other/t/1") == ("{}", (0, 0))  # reused: paid once, not twice


def test_prices_in_two_currencies_are_refused_before_any_run_folder(tmp_path, bat, home):
    project = make_project(tmp_path / "p", [{"id": "t", "turns": ["hi"], "expected": {}}])
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["prices"] = {"a:m": {"input": 1, "output": 2}}  # USD
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    (project / "bat.yaml").write_text(
        "eval:\n  prices:\n    b:m: {input: 1, output: 2, currency: EUR}\n"
    )
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "eval.yaml's prices: are in USD and bat.yaml's eval.prices in EUR" in result.err
    assert run_dirs(project) == []  # nothing written
