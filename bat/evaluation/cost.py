"""What an evaluation costs: each model's price per million tokens, and the cost of an
episode's tokens at those prices.

**Where a price comes from**, first found wins:

1. ``prices:`` in eval.yaml, under the model's ``provider:model`` or its bare name;
2. ``eval.prices`` in ``bat.yaml`` (a team's rates, kept once for every project), the same;
3. genai-prices (pydantic's price database, shipped inside the package: it works offline).
   Its updater stays off: a run's prices are those of the installed version, which the
   card records. ``evaluation.update_prices`` turns it on for a run: the newer table is
   fetched once, before the first episode (genai-prices' URL, or one of the user's), and
   used for this run only (never set as the library's global table); a fetch that fails
   is said in one line and the installed table is used.

A model found nowhere is **unpriced**: its cost is unknown (None), never guessed, and the
run says so once per model. bat's scripted stand-in model (``script:``) costs nothing
real, so it is priced only from ``prices:`` (the demo's illustrative price), and is
unpriced without a word otherwise; a provider
genai-prices does not know (``ollama``, ``nvidia``) is not matched by the model name
alone, which could be another provider's price.

Tiered prices (a higher rate past a prompt length) are taken at their base tier: bat
prices an episode's summed tokens, not each call's. A2A agents do not report cached
prompt tokens, so an agent's prompt tokens are all priced as input.

Invoke-free; genai-prices is imported at the first lookup, never by ``bat --help``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bat.evaluation.inputs.prices import PriceEntry, Prices
from bat.evaluation.log.episode import EpisodeCost, EpisodeResult, Usage
from bat.secrets import display_url

LIBRARY = "genai-prices"
# genai-prices' own newer table (its updater's default), for ``update_prices: true``
PRICES_URL = (
    "https://raw.githubusercontent.com/pydantic/genai-prices/refs/heads/main/prices/"
    "new_data/v2/data.json"
)
MILLION = 1_000_000
# bat's provider names (models[].provider, judge.provider) -> genai-prices' provider ids,
# where they differ; a provider in neither is not looked up.
_PROVIDER_IDS = {
    "gemini": "google",
    "google_genai": "google",
    "mistralai": "mistral",
    "xai": "x-ai",
    "azure_openai": "azure",
}


@dataclass(frozen=True)
class _Model:
    provider: str
    model: str
    script: str | None = None


# The model of a run without models: (the agent's own settings): priced only by an entry
# ``agent-default`` in prices:, the name its folder and label have.
AGENT_DEFAULT = _Model("agent", "agent-default")


def label_of(provider: str, model: str) -> str:
    """A model as messages and files name it: ``provider:model``, or ``agent-default``."""
    if (provider, model) == (AGENT_DEFAULT.provider, AGENT_DEFAULT.model):
        return AGENT_DEFAULT.model
    return f"{provider}:{model}"


@dataclass(frozen=True)
class ModelPrice:
    """One model's prices per million tokens, and where they came from."""

    label: str  # provider:model
    input: float
    output: float
    cached_input: float
    currency: str
    source: str  # "eval.yaml", "bat.yaml" or "genai-prices 0.2.5"
    note: str | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """What these tokens cost (``cached_tokens`` are part of ``prompt_tokens``)."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        amount = (
            (prompt_tokens - cached) * self.input
            + cached * self.cached_input
            + completion_tokens * self.output
        )
        return round(amount / MILLION, 10)

    def record(self) -> dict[str, Any]:
        """As the card keeps it."""
        shown = {
            "input": self.input,
            "output": self.output,
            "cached_input": self.cached_input,
            "currency": self.currency,
            "source": self.source,
        }
        return shown | ({"note": self.note} if self.note else {})


def library_version() -> str:
    """The installed genai-prices' version ("" when it cannot be told)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(LIBRARY)
    except PackageNotFoundError:
        return ""


class PriceBook:
    """The prices of one run: eval.yaml's entries over bat.yaml's over genai-prices'.

    Looked up once per model and remembered (judge threads share one book); each model
    that has no price is told once through ``say``.
    """

    def __init__(
        self,
        own: Prices | None = None,
        team: Prices | None = None,
        *,
        say: Callable[[str], None] | None = None,
        update_from: str | None = None,
    ) -> None:
        self._entries: list[tuple[str, dict[str, PriceEntry]]] = [
            ("eval.yaml", dict((own or Prices()).root)),
            ("bat.yaml", dict((team or Prices()).root)),
        ]
        currencies = {p.currency for p in (own, team) if p is not None and p.currency}
        if len(currencies) > 1:
            from bat.errors import InputError

            raise InputError(
                f"eval.yaml's prices: are in {(own.currency if own else '')} and bat.yaml's "
                f"eval.prices in {(team.currency if team else '')}: give every price in one "
                "currency (a total of two currencies means nothing)"
            )
        self.currency = currencies.pop() if currencies else "USD"
        # genai-prices' table is in dollars: with another currency it is not asked.
        self.uses_library = self.currency == "USD"
        self._say = say
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str, bool], ModelPrice | None] = {}
        self.update_from = update_from  # where a newer table is fetched from (None: off)
        self.updated: bool | None = None  # whether that fetch worked (None: not tried)
        self._table: Any = None  # genai-prices' table for this run (a DataSnapshot)

    def price(self, provider: str, model: str, *, stand_in: bool = False) -> ModelPrice | None:
        """The price of ``provider:model`` (None: unpriced). ``stand_in``: bat's scripted
        model, priced from ``prices:`` only."""
        key = (provider, model, stand_in)
        with self._lock:
            if key in self._found:
                return self._found[key]
        found = self._look_up(provider, model, stand_in)
        with self._lock:
            first = key not in self._found
            self._found[key] = found
        if found is None and first and not stand_in and self._say is not None:
            self._say(unpriced_line(f"{provider}:{model}", stand_in, self.currency))
        return found

    def price_of(self, spec: Any) -> ModelPrice | None:
        """The price of a models:, judge: or user: entry (anything with provider, model
        and script)."""
        # The agent's own model (no models:) is one bat cannot name: like a stand-in, it
        # is priced only from prices: (``agent-default``), without a word otherwise.
        stand_in = getattr(spec, "script", None) is not None or spec is AGENT_DEFAULT
        return self.price(spec.provider, spec.model, stand_in=stand_in)

    def look_up_all(self, resolved: Any) -> None:
        """Look up every model a run pays for (its models:, judges and user model), so
        each unpriced one is said before the first episode and the card has them all."""
        for spec in [*(m or AGENT_DEFAULT for m in resolved.models), *resolved.config.judges]:
            self.price_of(spec)
        if resolved.config.user is not None:
            self.price_of(resolved.config.user)

    def _look_up(self, provider: str, model: str, stand_in: bool) -> ModelPrice | None:
        label = f"{provider}:{model}"
        for source, entries in self._entries:
            entry = entries.get(label) or entries.get(model)
            if entry is not None:
                return ModelPrice(
                    label, entry.input, entry.output, entry.cached, entry.currency, source,
                    entry.note,
                )  # fmt: skip
        if stand_in or not self.uses_library:
            return None
        return _library_price(self._library_table(), provider, model)

    def _library_table(self) -> Any:
        """genai-prices' table: the installed one, or once fetched from ``update_from``."""
        with self._lock:
            if self._table is None:
                self._table = self._fetch_table()
            return self._table

    def _fetch_table(self) -> Any:
        from genai_prices import data_snapshot

        if self.update_from is None:
            return data_snapshot.get_snapshot()
        from genai_prices.update_prices import UpdatePrices

        try:  # fetch() alone: no background thread, and the library's global table untouched
            table = UpdatePrices(url=self.update_from).fetch()
        except Exception as exc:  # any failure of a fetch the user asked for: said, not fatal
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            self.updated = False
            if self._say is not None:
                shown = display_url(self.update_from) or self.update_from
                self._say(
                    f"could not update the prices from {shown} ({reason}); "
                    f"priced from {LIBRARY} {library_version()}'s own table"
                )
            return data_snapshot.get_snapshot()
        self.updated = table is not None
        return table if table is not None else data_snapshot.get_snapshot()

    def record(self) -> dict[str, Any]:
        """What the card keeps: the library and its version, and each price looked up."""
        with self._lock:
            found = sorted(self._found.items(), key=lambda item: item[0])
        models: dict[str, Any] = {}
        for (provider, model, _), price in found:
            models[label_of(provider, model)] = None if price is None else price.record()
        record: dict[str, Any] = {
            "library": LIBRARY,
            "version": library_version(),
            "auto_update": self.update_from is not None,
        }
        if self.update_from is not None:
            shown = display_url(self.update_from) or self.update_from
            # updated: null when no model needed genai-prices, so nothing was fetched
            record |= {"updated_from": shown, "updated": self.updated}
        return record | {"currency": self.currency, "models": models}


def unpriced_line(label: str, stand_in: bool = False, currency: str = "USD") -> str:
    """The one line said of a model without a price."""
    if currency != "USD":
        return (
            f"no price for {label}: its cost is unknown (the prices are in {currency}, so "
            f"genai-prices' dollar prices are not used); give one in prices: in eval.yaml"
        )
    if stand_in:
        return (
            f"{label} is bat's scripted stand-in model: it costs nothing real, and its "
            f"cost is shown only with a price for it in prices: (eval.yaml)"
        )
    return (
        f"no price for {label}: its cost is unknown (genai-prices does not list it); "
        f"give one in prices: in eval.yaml"
    )


def _library_price(table: Any, provider: str, model: str) -> ModelPrice | None:
    """The price ``table`` (genai-prices' DataSnapshot) has for the model at the provider;
    None when it lists neither."""
    provider_id = _PROVIDER_IDS.get(provider.lower(), provider.lower())
    try:
        from genai_prices import Usage as LibraryUsage

        if provider_id not in {p.id for p in table.providers}:
            return None
        nothing = LibraryUsage(input_tokens=0, output_tokens=0)
        found = table.calc(nothing, model, provider_id, None, None)
    except (LookupError, ValueError, ImportError):
        return None
    prices = found.model_price
    rates = [_rate(getattr(prices, name, None)) for name in ("input_mtok", "output_mtok")]
    if any(rate is None for rate in rates):
        return None
    cached = _rate(getattr(prices, "cache_read_mtok", None))
    source = f"{LIBRARY} {library_version()}".strip()
    if getattr(table, "from_auto_update", False):
        source += " (updated)"
    return ModelPrice(
        f"{provider}:{model}", rates[0], rates[1], rates[0] if cached is None else cached,  # type: ignore[arg-type]
        "USD", source,
    )  # fmt: skip


def _rate(value: Any) -> float | None:
    """A genai-prices price per million tokens as a float; a tiered one at its base."""
    if value is None:
        return None
    value = getattr(value, "base", value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# --- an episode's cost ---------------------------------------------------------------


def usage_cost(price: ModelPrice | None, usage: Usage) -> float | None:
    """What ``usage`` cost at ``price`` (None: unpriced)."""
    if price is None:
        return None
    return price.cost(usage.prompt_tokens, usage.completion_tokens)


def episode_cost(
    book: PriceBook, episode: EpisodeResult, agent: Any, user: Any = None
) -> EpisodeCost:
    """The agent's and the simulated user's part of an episode's cost (the judges' part
    is added when it is judged, :func:`with_judges`). ``agent`` and ``user`` are the
    models: and user: entries (provider, model, script)."""
    unpriced: list[str] = []
    agent_price = book.price_of(agent)
    trace = episode.trace
    reported = trace.usage_source != "none" or trace.usage.total_tokens > 0
    if agent_price is None:
        unpriced.append(label_of(agent.provider, agent.model))
    agent_cost = usage_cost(agent_price, trace.usage) if reported else None
    user_cost = None
    if trace.simulated_user is not None and user is not None:
        user_price = book.price_of(user)
        if user_price is None:
            unpriced.append(f"{user.provider}:{user.model}")
        user_cost = usage_cost(user_price, trace.simulated_user.usage)
    return EpisodeCost(
        currency=book.currency,
        agent=agent_cost,
        user=user_cost,
        unpriced=unpriced,
        untracked=agent_price is not None and not reported,
    )


def with_judges(
    cost: EpisodeCost | None,
    book: PriceBook,
    judges: Iterable[tuple[Any, Usage]],
) -> EpisodeCost:
    """``cost`` with the judges' part: each judge's tokens of this episode at its price.
    ``judges`` are (judge: entry, its usage) pairs; unpriced judges are named."""
    cost = cost or EpisodeCost(currency=book.currency)
    unpriced = list(cost.unpriced)
    total: float | None = None
    for spec, usage in judges:
        price = book.price_of(spec)
        if price is None:
            label = f"{spec.provider}:{spec.model}"
            unpriced += [label] if label not in unpriced else []
            continue
        total = (total or 0.0) + price.cost(usage.prompt_tokens, usage.completion_tokens)
    judge = None if total is None else round(total, 10)
    return cost.model_copy(update={"judge": judge, "unpriced": unpriced})


__all__ = [
    "AGENT_DEFAULT",
    "LIBRARY",
    "PRICES_URL",
    "ModelPrice",
    "PriceBook",
    "episode_cost",
    "library_version",
    "unpriced_line",
    "usage_cost",
    "with_judges",
]
