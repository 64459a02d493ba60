"""The scripted model server of bat's tests: the product's stand-in model, made to misbehave.

bat serves a ``script:`` model with :class:`bat.evaluation.run.scripted_model.ScriptedModel`,
which always answers. Tests of a client (an LLM judge's retries, timeouts and parsing; a
run's handling of a model that refuses) need a model that fails on cue, and a server one
test module can re-script and observe. This module adds that, and only tests use it:

* rule keys (beside the product's ``match``, ``regex``, ``scope``, ``reply``,
  ``tool_calls``, ``after_tool``, ``delay_ms``)::

    - match: task-7             # the first 2 matching requests get a 429...
      scope: prompt
      status: 429               # an error in the protocol's own JSON format
      retry_after: 2            # the Retry-After header, in seconds
      times: 2                  # then this rule is used up: later rules answer
    - body: 'bad key {authorization}'   # this raw text (status 200 unless `status`);
                                        # {authorization}: the request's header

  A rule needs ``reply``, ``tool_calls``, ``status`` or ``body``.
* ``POST /control``: ``{"rules": [...]}`` replaces the rules (validated as a rule file
  is; a bad one is a 400 and changes nothing) and restarts every ``times`` count;
  ``{"reset_stats": true}`` zeroes ``/stats``. Neither route is counted.
* ``GET /stats``: ``{"requests", "by_path", "models"}``, every chat and models request
  served, misbehaving answers included.

``python -m eval_fixtures.model_server --port 0 [--rules FILE]`` prints
``listening on http://127.0.0.1:PORT`` once it accepts connections.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bat.evaluation.inputs.model_script import Conversation, Rule, Rules
from bat.evaluation.run import scripted_model
from bat.evaluation.run.scripted_model import ScriptedModel, Wire

__all__ = ["FaultRule", "FaultRules", "MisbehavingModel", "main"]


class FaultRule(Rule):
    """A rule that may fail on purpose, or only answer its first ``times`` matches."""

    ANSWERS: ClassVar[tuple[str, ...]] = (*Rule.ANSWERS, "status", "body")

    status: int | None = Field(default=None, ge=100, le=599)
    retry_after: int | str | None = None
    body: str | None = None
    times: int | None = Field(default=None, ge=1)

    def fails(self) -> bool:
        return self.body is not None or self.status not in (None, 200)


class FaultRules(Rules):
    root: list[FaultRule]


class MisbehavingModel(ScriptedModel):
    """The stand-in model with failures on cue, ``/stats`` and ``/control``."""

    RULES: ClassVar[type[Rules]] = FaultRules

    def __init__(self, rules: Rules) -> None:
        super().__init__(rules)
        self.used: Counter[int] = Counter()  # answers of each rule with `times`, by position

    def routes(self) -> list[Route]:
        return [
            *super().routes(),
            Route("/stats", self.stats, methods=["GET"]),  # not counted: it only observes
            Route("/control", self.control, methods=["POST"]),  # not counted: it steers
        ]

    def choose(self, conversation: Conversation) -> Rule | None:
        """The first matching rule not used up."""
        for index, rule in self.rules.matching(conversation):
            if not isinstance(rule, FaultRule) or rule.times is None:
                return rule
            if self.used[index] < rule.times:
                self.used[index] += 1
                return rule
        return None

    def instead_of_answer(self, request: Request, rule: Rule | None, wire: Wire) -> Response | None:
        """The scripted failure of ``rule``: its raw ``body``, or its ``status`` in the
        protocol's error format."""
        if not isinstance(rule, FaultRule) or not rule.fails():
            return None
        status = rule.status or 200
        if rule.body is not None:
            # A server that reflects the request's credentials in its error page: what a
            # client must never copy into its own messages.
            text = rule.body.replace("{authorization}", request.headers.get("authorization", ""))
            response: Response = Response(text, status_code=status, media_type="text/plain")
        else:
            response = wire.error(f"scripted error {status}", status)
        if rule.retry_after is not None:
            response.headers["Retry-After"] = str(rule.retry_after)
        return response

    async def stats(self, request: Request) -> Response:
        served = {"requests": sum(self.served.values()), "by_path": self.served}
        return JSONResponse({**served, "models": sorted(self.models)})

    async def control(self, request: Request) -> Response:
        """Replace the rules and/or zero the stats of the running server."""
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
            unknown = sorted(set(body) - {"rules", "reset_stats"})
            if unknown:
                raise ValueError(f"unknown key(s) {unknown}; known: rules, reset_stats")
            rules = self.RULES.from_data(body["rules"]) if "rules" in body else None
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if rules is not None:
            self.rules = rules
            self.used.clear()
        if body.get("reset_stats"):
            self.served.clear()
            self.models.clear()
        return JSONResponse({"rules": len(self.rules.root)})


def main(argv: list[str] | None = None) -> None:
    scripted_model.main(argv, kind=MisbehavingModel)


if __name__ == "__main__":
    main()
