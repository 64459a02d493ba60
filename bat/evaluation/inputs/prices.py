"""``prices:`` in eval.yaml (and ``eval.prices`` in ``bat.yaml``): what a model's tokens cost.

Each key names a model as bat names it, ``provider:model`` (``openai:gpt-4.1-mini``) or
the bare model (``gpt-4.1-mini``, any provider); each value its prices per million
tokens::

    prices:
      openai:my-llama:        # a self-hosted model genai-prices cannot know
        input: 0.20           # per million prompt tokens
        output: 0.60          # per million completion tokens
        cached_input: 0.05    # per million cached prompt tokens (default: input)
        currency: USD         # (default USD)
        note: our GPU cluster's internal rate

An entry sets the price of a model genai-prices does not list, or overrides the one it
does. Every entry of a run has one currency: a total of dollars and euros means nothing,
so mixing them is refused, and with another currency than USD genai-prices (in dollars)
is not asked at all. Prices are bounded (at most a million per million tokens) and so is
the table (``MAX_PRICES`` entries): a price is typed by a person.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUndefined

MAX_PRICES = 1000  # entries of one prices: section
MAX_PRICE = 1_000_000  # per million tokens: far above any model's, far below an overflow
_CURRENCY = re.compile(r"[A-Z]{3}")
_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,200}")


def _shown(value: Any) -> str:
    """A value quoted for an error line, cut short: a line stays one line of a screen."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _looks_like_a_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def finite_number(what: str) -> Callable[[Any], Any]:
    """A validator of a number typed in YAML (not a boolean, not text, finite):
    ``input: "0.2"`` is a typo for 0.2; ``what`` names it in the error
    ("a price per million tokens", "an amount of money")."""

    def check(value: Any) -> Any:
        if isinstance(value, str) and _looks_like_a_number(value):
            # YAML 1.1 reads 1e-3 (no dot in the mantissa) as text
            raise ValueError(
                f"expected {what} (a number), got the text {_shown(value)}: write it "
                "unquoted, with a dot (0.001 or 1.0e-3)"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected {what} (a number), got {_shown(value)}")
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {_shown(value)}")
        return value

    return check


_price = finite_number("a price per million tokens")


def _currency(value: Any) -> Any:
    """A currency code in capitals, as the prices are written: ``usd`` is refused, not
    read as USD, so one spelling is kept across files."""
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise ValueError(
            f"expected a three-letter currency code in capitals (USD), got {_shown(value)}"
        )
    return value


Price = Annotated[float, BeforeValidator(_price), Field(ge=0, le=MAX_PRICE)]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$"), BeforeValidator(_currency)]


class PriceEntry(BaseModel):
    """One model's prices, per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Price
    output: Price
    cached_input: Price | None = None  # None: the input price
    currency: Currency = "USD"
    # shown in eval.show, the report and the card: no control character (an ESC would
    # recolour a terminal)
    note: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("note")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        """Shown by eval.show, the report and the card: an ESC would recolour a terminal."""
        if value is not None and re.search(r"[\x00-\x1f\x7f]", value):
            raise ValueError("has a control character (a note is shown on terminals)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:
        """An unknown key (``inptu:``) in one line naming the likely one, before pydantic
        would add that ``input`` is missing too."""
        if not isinstance(value, dict):
            return value
        known = list(cls.model_fields)
        for key in value:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ValueError(f"unknown key {_shown(key)}{hint}: a price has {', '.join(known)}")
        return value

    @property
    def cached(self) -> float:
        return self.input if self.cached_input is None else self.cached_input


class Prices(RootModel[dict[str, PriceEntry]]):
    """The whole ``prices:`` mapping: model name -> its prices, one currency."""

    root: dict[str, PriceEntry] = Field(default_factory=dict, max_length=MAX_PRICES)

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> Any:
        if value is None or value is PydanticUndefined:
            return {}  # `prices:` with every entry commented out (or no argument)
        if not isinstance(value, dict):
            raise ValueError(
                "expected a mapping of model names to prices, e.g. "
                "{'openai:gpt-4.1-mini': {input: 0.4, output: 1.6}}"
            )
        for name in value:
            if not isinstance(name, str) or not _NAME.fullmatch(name) or not name.strip():
                raise ValueError(
                    f"{_shown(name)} is no model name: use 'provider:model' or 'model' "
                    "(up to 200 characters, no control characters)"
                )
        return value

    @model_validator(mode="after")
    def _one_currency(self) -> Prices:
        currencies = sorted({entry.currency for entry in self.root.values()})
        if len(currencies) > 1:
            raise ValueError(
                f"prices in {' and '.join(currencies)}: give every price in one currency "
                "(a total of two currencies means nothing)"
            )
        return self

    @property
    def currency(self) -> str | None:
        """The entries' currency, or None without entries."""
        return next((entry.currency for entry in self.root.values()), None)


def team_prices(found: Any) -> Prices | None:
    """bat.yaml's ``eval.prices`` as the settings hold it (each file's checked as it was
    read, the layers merged model by model; Invoke's mappings), or None without any.
    Two layers in two currencies are refused here, in one line (exit 2)."""
    if not found:
        return None
    from pydantic import ValidationError

    from bat.errors import ConfigError

    try:
        return Prices.model_validate(_plain(found))
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"bat's settings: eval.prices: {problem}") from None


def _plain(value: Any) -> Any:
    """Invoke's configuration mappings as plain dicts, for pydantic."""
    if hasattr(value, "items"):
        return {key: _plain(item) for key, item in value.items()}
    return value


__all__ = ["MAX_PRICE", "MAX_PRICES", "PriceEntry", "Prices", "finite_number", "team_prices"]
