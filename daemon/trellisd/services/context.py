"""What a turn's requests hold, against the model's context window: the window of each model,
the keeper of a branch's context (``agent.compaction``), and the ``session/usage`` figures
told after each step (the context's size, the tokens and the cost of the turn and of the
session so far)."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..agent.compaction import ContextKeeper, Summary
from ..agent.context import Sent
from ..config import ProviderSettings
from ..context_windows import FALLBACK_CONTEXT_WINDOW, known_context_window
from ..pricing import cost
from ..providers.base import Message, Provider
from ..records import Step, Tokens, Turn, TurnRef
from ..store.facade import AsyncStore
from .seams import Notifier, Recorder, Sink

log = logging.getLogger(__name__)


@runtime_checkable
class StatesContextWindow(Protocol):
    async def context_window(self) -> int | None: ...


class ContextWindows:
    """Each model's context window: the settings' own, else what the provider's models
    endpoint states (asked once per endpoint and model), else the built-in table."""

    def __init__(self) -> None:
        self._stated: dict[tuple[str, str], int | None] = {}

    async def of(self, settings: ProviderSettings, provider: Provider) -> int:
        if settings.context_window is not None:
            return settings.context_window
        key = (settings.effective_base_url or settings.name or "", provider.model)
        if key not in self._stated and isinstance(provider, StatesContextWindow):
            self._stated[key] = await provider.context_window()
        stated = self._stated.get(key)
        return stated or known_context_window(provider.model) or FALLBACK_CONTEXT_WINDOW


async def keeper_for(
    store: AsyncStore,
    context_windows: ContextWindows,
    settings: ProviderSettings,
    provider: Provider,
    recorder: Recorder,
    system: Message,
    path: list[Turn],
    run_ids: list[str],
    pinned: Collection[str] = (),
    images: Sent | None = None,
) -> ContextKeeper:
    """The keeper of the context of a turn after ``path``, with the compaction in force
    among the runs of the path (and ``run_ids``, the turn's own), the committed steps of the
    turns it sends as they happened, the ``pinned`` turns, and the path's ``images`` sent
    again."""
    found = await store.runs.compaction([t.run_id for t in path] + run_ids)
    summary = None if found is None else Summary(*found)
    start = 0 if summary is None else summary.turns
    sent = [t for t in path[:start] if t.turn_id in pinned] + path[start:]
    transcripts = await store.runs.transcripts([t.run_id for t in sent])
    context_window = await context_windows.of(settings, provider)
    return ContextKeeper(
        provider,
        recorder,
        system,
        path,
        summary,
        context_window,
        settings.compact_at,
        transcripts,
        pinned,
        images,
    )


@dataclass
class UsageTotal:
    """Tokens and their cost, summed over figures that may be unknown (counted as 0; a cost
    is None only when no part of it is known)."""

    tokens: Tokens
    cost: float | None

    @staticmethod
    def of(model: str | None, tokens: Tokens) -> UsageTotal:
        return UsageTotal(_known(tokens), cost(model, tokens))

    def __add__(self, other: UsageTotal) -> UsageTotal:
        both = None if self.cost is None and other.cost is None else 0.0
        if both is not None:
            both = (self.cost or 0.0) + (other.cost or 0.0)
        return UsageTotal(self.tokens + other.tokens, both)

    def wire(self) -> dict[str, Any]:
        t = self.tokens
        out = {"input": t.input, "output": t.output, "cached": t.cached, "total": t.total}
        if t.reasoning is not None:  # of ``output``, when a provider said
            out["reasoning"] = t.reasoning
        return out


NOTHING = UsageTotal(Tokens(), None)


def _known(tokens: Tokens) -> Tokens:
    return Tokens(tokens.input or 0, tokens.output or 0, tokens.cached or 0, tokens.reasoning)


async def spent(store: AsyncStore, session_id: str, turn_id: str) -> tuple[UsageTotal, UsageTotal]:
    """What the session's other turns spent, and what turn ``turn_id`` spent so far."""
    others, this = NOTHING, NOTHING
    for turn in await store.sessions.turns(session_id):
        spend = UsageTotal.of(turn.model, turn.tokens)
        if turn.turn_id == turn_id:
            this = spend
        else:
            others = others + spend
    return others, this


class UsageSink(Sink):
    """Tells the editor about one turn, and after each step what the context holds and what
    the turn and the session spent so far (``session/usage``)."""

    def __init__(
        self,
        notifier: Notifier,
        ref: TurnRef,
        keeper: ContextKeeper,
        model: str | None,
        spend: tuple[UsageTotal, UsageTotal],
    ) -> None:
        super().__init__(notifier, ref)
        self.keeper, self.model = keeper, model
        self.others, self.turn = spend

    def step(self, step: Step) -> None:
        super().step(step)
        self.turn = self.turn + UsageTotal.of(self.model, step.tokens)
        self.notifier.usage(self.ref, usage(self.keeper, self.turn, self.others + self.turn))


def usage(keeper: ContextKeeper, turn: UsageTotal, session: UsageTotal) -> dict[str, Any]:
    """The ``session/usage`` figures, without the turn's reference."""
    return {
        "contextTokens": keeper.context_tokens,
        "contextWindow": keeper.context_window,
        "tokens": {"turn": turn.wire(), "session": session.wire()},
        "cost": {"turn": turn.cost, "session": session.cost},
    }
