"""Budgets: a turn stops before the model call that would pass what it, or its session, may
spend, and nothing is sent.

Before each model call the ``Ledger`` estimates what the call will cost, from what it knows:

- input tokens: the provider's reported input tokens of this turn's previous call, plus a
  quarter of the characters of the messages added since (the reply it became, tool results,
  steers); for the turn's first call, or when the provider reported no figure, a quarter of
  the characters of the whole request (messages and tool descriptions). No tokenizer.
- output tokens: the request's ``maxTokens`` (the model's output cap), or
  ``OUTPUT_ALLOWANCE`` when there is none.

The call is made only if what was spent plus that estimate stays within every budget: the
turn's (``session/turn``'s ``budget``) counts this turn's calls, the session's
(``session/open``'s or ``session/budget``'s) every turn of the session. Tokens are input plus
output; USD is priced by the price table (cached input at its rate once reported). A USD
budget with a model whose price is unknown cannot be kept, so that turn stops before its first
call and says so. A call whose provider reports no figures is charged its estimate.

A child session's turn (the ``task`` tool) has a ledger of its own whose ``parent`` is the
ledger of the turn that started it: each of its calls must also stay within the parent's
budgets, and what it spends is charged to the parent too, so the parent's turn is exhausted
when it and its children together pass its limit.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import cast

from ..pricing import Price, cost, price
from ..providers.base import Message, ModelRequest, Provider, ProviderError, ProviderEvent, Usage
from ..records import Budget, Spend, Tokens

OUTPUT_ALLOWANCE = 1024
CHARS_PER_TOKEN = 4


class BudgetExhausted(ProviderError):
    """The next model call would pass a budget: the turn ends ``exhausted``, nothing sent."""


@dataclass(frozen=True)
class Estimate:
    input: int
    output: int

    @property
    def tokens(self) -> int:
        return self.input + self.output

    def usd(self, known: Price) -> float:
        return (self.input * known.input + self.output * known.output) / 1_000_000


def characters(message: Message) -> int:
    """What a message puts into a request, in characters."""
    size = len(message.content)
    for call in message.tool_calls:
        size += len(call.name) + len(json.dumps(call.arguments))
    if message.reasoning is not None:  # sent back with the assistant's message
        size += len(message.reasoning.text)
        size += sum(len(json.dumps(item)) for item in message.reasoning.items)
    return size


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


class Ledger:
    """What one turn has spent and may still spend; ``admit`` before each model call."""

    def __init__(
        self,
        model: str,
        turn: Budget | None,
        session: Budget | None,
        session_spent: Spend,
        parent: Ledger | None = None,
    ) -> None:
        self.model, self.turn, self.session = model, turn, session
        self.session_spent = session_spent
        self.parent = parent  # the ledger of the turn whose ``task`` call started this one
        self.tokens, self.usd = 0, 0.0  # this turn's
        self._last_input: int | None = None  # the previous call's reported input tokens
        self._last_messages = 0  # how many messages the previous call sent
        self._pending: Estimate | None = None

    def estimate(self, request: ModelRequest) -> Estimate:
        output = request.max_tokens or OUTPUT_ALLOWANCE
        if self._last_input is not None and self._last_messages <= len(request.messages):
            added = sum(characters(m) for m in request.messages[self._last_messages :])
            return Estimate(self._last_input + _tokens(added), output)
        chars = sum(characters(m) for m in request.messages)
        chars += sum(
            len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in request.tools
        )
        return Estimate(_tokens(chars), output)

    def admit(self, request: ModelRequest) -> None:
        """``BudgetExhausted`` saying which budget the call would pass; else the call may go."""
        guess = self.estimate(request)
        self.within(guess, self.model)
        self._pending = guess
        self._last_messages = len(request.messages)

    def within(self, guess: Estimate, model: str, whose: str = "") -> None:
        """``BudgetExhausted`` when ``guess`` (a call to ``model``) would pass a budget of
        this ledger's turn, its session, or its parent's."""
        known = price(model)
        for name, budget, spent_tokens, spent_usd in (
            ("turn", self.turn, self.tokens, self.usd),
            (
                "session",
                self.session,
                self.session_spent.tokens + self.tokens,
                self.session_spent.usd + self.usd,
            ),
        ):
            if budget is None:
                continue
            label = whose + name
            if budget.tokens is not None and spent_tokens + guess.tokens > budget.tokens:
                raise BudgetExhausted(
                    f"the next model call (about {guess.tokens} tokens: {guess.input} in,"
                    f" up to {guess.output} out) would pass the {label}'s budget of"
                    f" {budget.tokens} tokens ({spent_tokens} spent); nothing was sent"
                )
            if budget.usd is None:
                continue
            if known is None:
                raise BudgetExhausted(
                    f"the {label}'s budget is in USD but the price of {model} is unknown;"
                    " add it to the price file (TRELLISD_PRICES); nothing was sent"
                )
            if spent_usd + guess.usd(known) > budget.usd:
                raise BudgetExhausted(
                    f"the next model call (about ${guess.usd(known):.4f}) would pass the"
                    f" {label}'s budget of ${budget.usd:g} (${spent_usd:.4f} spent);"
                    " nothing was sent"
                )
        if self.parent is not None:
            self.parent.within(guess, model, "parent " + whose)

    def charge(self, usage: Usage) -> None:
        """The call's reported figures (or its estimate where the provider gave none)."""
        guess = self._pending or Estimate(0, 0)
        self._pending = None
        self._last_input = usage.input
        tokens_in = guess.input if usage.input is None else usage.input
        tokens_out = guess.output if usage.output is None else usage.output
        usd = cost(self.model, Tokens(tokens_in, tokens_out, usage.cached or 0)) or 0.0
        self.spent(tokens_in + tokens_out, usd)

    def spent(self, tokens: int, usd: float) -> None:
        """Count ``tokens`` and ``usd`` against this turn, and against its parent's."""
        self.tokens += tokens
        self.usd += usd
        if self.parent is not None:
            self.parent.spent(tokens, usd)

    def unreported(self) -> None:
        """A call ended with no figures at all: charge its estimate."""
        if self._pending is not None:
            self.charge(Usage(None, None, None))


class Budgeted:
    """A provider whose calls are admitted by a ``Ledger`` first and charged to it after."""

    def __init__(self, provider: Provider, ledger: Ledger) -> None:
        self.provider, self.ledger = provider, ledger
        self.name, self.model = provider.name, provider.model

    async def context_window(self) -> int | None:
        """The window the provider's models endpoint states, where it has one."""
        stated = getattr(self.provider, "context_window", None)
        return None if stated is None else cast(int | None, await stated())

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        self.ledger.admit(request)
        try:
            async for event in self.provider.stream(request):
                if isinstance(event, Usage):
                    self.ledger.charge(event)
                yield event
        finally:
            self.ledger.unreported()
