"""One turn of the agent: call the model, run the tools it asks for, commit each step.

The loop streams each text piece to the ``TurnSink`` as it arrives and commits a step to
the ``RunRecorder`` when the step completes, so a crash loses at most the step in flight.
A cancelled turn commits what it streamed so far, records the outcome, then re-raises.
A turn asked to pause (``TurnPlan.pause``) stops at its next step boundary, before a model
call: the step in flight completes and commits, and the turn ends ``paused``; the tool steps of
one model call are one step boundary.

A turn takes at most ``TurnPlan.max_steps`` steps (the turn's ``maxSteps``, else the daemon's
``TRELLISD_MAX_STEPS``, else 100), so a model that never stops calling tools cannot run a turn
forever. A tool call without a tool name is answered with an error the model is told once; a
second one ends the turn ``error``.

The tool calls of one model call run one after another, in order, each its own step, except
the calls of tools marked ``concurrent`` (the ``task`` tool: a child session that waits on its
own model): those all start when the model call ends and run at the same time as the others
(the tool bounds how many really run at once); each is still committed as its step, in order.

One model call may stream at most ``TurnPlan.max_step_text`` characters of text
(``STEP_LIMIT``, 16 MiB): past it the call is ended, the text so far is committed as an ``error``
step and the turn ends ``error`` saying so (the provider caps its tool calls the same way). The
stream is closed as soon as the loop stops reading it, however it stops (the end, an error, a
cancel), so nothing more of it is read.

What the model reasons in a call streams to the sink as it comes (``TurnSink.thought``, capped
like the text) and is kept with the call's first step: a ``thought`` event (its text, the
provider's records of it and the call's reasoning tokens) committed just before the step, and
the assistant's message of the running request carries it back to the model on the turn's
later calls (the provider sends it only to the wire that made it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..daemon_settings import DEFAULT_MAX_STEPS
from ..providers.base import (
    STEP_LIMIT,
    Effort,
    Message,
    ModelRequest,
    Provider,
    ProviderError,
    ProviderEvent,
    Reasoning,
    ReasoningDone,
    Retrying,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
    size_words,
)
from ..records import Step, Thought, Tokens, ToolCall
from ..tools.base import Action, Tool, ToolContext, ToolFailure
from ..vocabulary import CallStatus, EventKind, Outcome, StepKind
from .activity import Quiet, ToolActivity, abandon, running
from .budget import BudgetExhausted
from .compaction import NOTHING_TO_COMPACT, TOO_LONG_AGAIN, ContextKeeper
from .pieces import Pieces
from .steering import STEER_NOTE, Steer, SteerInbox

log = logging.getLogger(__name__)

FINISHED, ERROR, CANCELLED, EXHAUSTED, PAUSED = (
    Outcome.FINISHED,
    Outcome.ERROR,
    Outcome.CANCELLED,
    Outcome.EXHAUSTED,
    Outcome.PAUSED,
)
SUCCESS, FAILURE = Outcome.SUCCESS, Outcome.FAILURE
NO_TOKENS = Tokens(0, 0, 0)
UNKNOWN_TOKENS = Tokens(None, None, None)
NAMELESS = "error: this tool call names no tool; call one of the tools you were given by its name"
NAMELESS_AGAIN = (
    "the model asked again for a tool without naming it, after being told; the turn was stopped"
)


class RunRecorder(Protocol):
    """Where a run's steps and events are committed."""

    def add_step(self, step: Step) -> Awaitable[None]: ...

    def add_event(
        self, kind: EventKind, step: int | None, detail: dict[str, Any]
    ) -> Awaitable[None]: ...


class ToolGate(Protocol):
    """Decides whether a tool call may run: ``None`` lets it run, a text refuses it (the
    model is told the text)."""

    async def admit(self, call: ToolCall, action: Action, step: int) -> str | None: ...


class ChangeWatch(Protocol):
    """Watches what a tool call changes in the workspace, around the call's work."""

    def around(self, action: Action, step: int) -> AbstractAsyncContextManager[None]: ...


class TurnCheck(Protocol):
    """A bounded turn's check, run whenever the model stops calling tools."""

    async def run(self, step: int) -> str | None:
        """``None`` when the check passes; else what failed, for the model."""
        ...


class LoopHooks(Protocol):
    """The hooks the loop runs: after each tool call, and when the model stops calling tools
    (which may ask for another step)."""

    async def after_tool(
        self, call: ToolCall, status: CallStatus, result: str, step: int
    ) -> None: ...

    async def stop(self, step: int, asked: int) -> str | None:
        """What to tell the model when a hook asks for another step; None: stop."""
        ...


class TurnSink(Protocol):
    """Who watches the turn: text pieces as they stream, steps once committed."""

    def token(self, step: int, text: str) -> None: ...

    def thought(self, step: int, text: str) -> None:
        """A piece of what the model reasons in step ``step``'s call, as it streams."""
        ...

    def step(self, step: Step) -> None: ...

    def steered(self, step: int, steer: Steer, delivered: bool) -> None: ...


@dataclass
class TurnPlan:
    messages: list[Message]
    provider: Provider
    tools: list[Tool]
    context: ToolContext
    temperature: float | None = None
    max_tokens: int | None = None
    max_steps: int | None = None
    inbox: SteerInbox = field(default_factory=SteerInbox)
    first_step: int = 1
    gate: ToolGate | None = None
    check: TurnCheck | None = None
    watch: ChangeWatch | None = None
    pause: Callable[[], bool] | None = None  # asked at each step boundary: stop here?
    activity: ToolActivity = field(default_factory=Quiet)  # told of tool calls as they happen
    keeper: ContextKeeper | None = None  # keeps the requests inside the model's window
    max_step_text: int = STEP_LIMIT  # the most text one model call may stream, in characters
    effort: Effort | None = None  # how hard a reasoning model thinks; None: its own default
    hooks: LoopHooks | None = None  # after each tool call, and when the model stops


@dataclass
class TurnEnd:
    outcome: Outcome
    error: str | None = None
    steps: list[Step] = field(default_factory=list)


class _Streamed:
    """What one model call has produced so far."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.pieces = Pieces()
        self.thinking = Pieces()  # the reasoning as it streamed
        self.reasoning: Reasoning | None = None  # the reasoning whole, once the call said it
        self.calls: list[ToolCall] = []
        self.usage = Usage(None, None, None)

    @property
    def text(self) -> str:
        return self.pieces.text()

    @property
    def tokens(self) -> Tokens:
        usage = self.usage
        return Tokens(usage.input, usage.output, usage.cached, usage.reasoning)

    @property
    def thought(self) -> Reasoning | None:
        """What the call reasoned: as the provider gave it whole (with the text as it
        streamed when the whole has none), else as it streamed."""
        whole, streamed = self.reasoning, self.thinking
        if whole is not None:
            return replace(whole, text=streamed.text()) if streamed and not whole.text else whole
        return Reasoning(self.provider, streamed.text()) if streamed else None

    def message(self, calls: tuple[ToolCall, ...] = ()) -> Message:
        """The assistant's message of this call, for the turn's later calls."""
        return Message("assistant", self.text, calls, reasoning=self.thought)

    async def kept(self, number: int, recorder: RunRecorder) -> Thought | None:
        """Record the call's reasoning (a ``thought`` event of step ``number``, when it
        reasoned or reported reasoning tokens), before its step commits; the step's thought."""
        reasoning = self.thought
        thought = None
        if reasoning is not None and (reasoning.text or reasoning.items):
            thought = Thought(reasoning.text, reasoning.provider, reasoning.items)
        if thought is None and self.usage.reasoning is None:
            return None
        detail = (thought or Thought("", self.provider)).detail(self.usage.reasoning)
        await recorder.add_event(EventKind.THOUGHT, number, detail)
        return thought


async def run_turn(plan: TurnPlan, recorder: RunRecorder, sink: TurnSink, prompt: str) -> TurnEnd:
    messages = list(plan.messages)
    specs = [ToolSpec(t.name, t.description, t.parameters) for t in plan.tools]
    tools = {t.name: t for t in plan.tools}
    end = TurnEnd(FINISHED)
    number = plan.first_step - 1
    max_steps = plan.max_steps if plan.max_steps is not None else DEFAULT_MAX_STEPS
    told_nameless = False
    again, kept = False, None  # a request sent again after a compaction, and its prompt
    overflowed = False  # the request was refused as too long and compacted once
    stops_asked = 0  # the times a stop hook asked for another step

    async def commit(step: Step) -> None:
        await recorder.add_step(step)
        end.steps.append(step)
        sink.step(step)

    async def keep(step: Step, streamed: _Streamed | None) -> None:
        """Commit a step of a model call; its first (``streamed``: the call) with the call's
        reasoning, recorded just before."""
        if streamed is not None:
            step = replace(step, thought=await streamed.kept(step.step, recorder))
        await commit(step)

    while True:
        if end.steps and plan.pause is not None and plan.pause():
            end.outcome = PAUSED  # at a step boundary: the next model call is not made
            return end
        number += 1
        if number > max_steps:
            end.outcome = FAILURE if plan.check is not None else EXHAUSTED
            return end
        streamed = _Streamed(plan.provider.name)
        step_prompt = (
            prompt if number == 1 else await _deliver(plan, messages, number, recorder, sink)
        )
        if again:  # the prompt of the request refused as too long goes with its retry
            step_prompt, again = kept or step_prompt, False
        try:
            if plan.keeper is not None and await plan.keeper.fit(messages, specs, number, commit):
                number += 1  # the compaction took this step; the call takes the next
            request = ModelRequest(
                messages, specs, plan.temperature, plan.max_tokens, effort=plan.effort
            )
            stream = plan.provider.stream(request)
            try:
                await _read(stream, streamed, plan.max_step_text, number, recorder, sink)
            finally:
                await _close(stream)
            if plan.keeper is not None:
                await plan.keeper.reported(len(messages), streamed.usage, number)
            overflowed = False
        except ProviderError as exc:
            if exc.too_long and plan.keeper is not None and not streamed.pieces:
                refused = await _overflow(plan.keeper, messages, number, commit, exc, overflowed)
                if refused is None:
                    overflowed, again, kept = True, True, step_prompt
                    continue  # sent once more, compacted, as the next step
                exc = ProviderError(refused)
            if streamed.pieces or streamed.thinking:
                await keep(
                    Step(
                        number,
                        StepKind.ERROR,
                        step_prompt,
                        streamed.text,
                        None,
                        None,
                        UNKNOWN_TOKENS,
                    ),
                    streamed,
                )
            end.outcome = EXHAUSTED if isinstance(exc, BudgetExhausted) else ERROR
            end.error = str(exc)
            return end
        except asyncio.CancelledError:
            if streamed.pieces or streamed.thinking:
                await keep(
                    Step(
                        number,
                        StepKind.CANCELLED,
                        step_prompt,
                        streamed.text,
                        None,
                        None,
                        UNKNOWN_TOKENS,
                    ),
                    streamed,
                )
            raise

        if not streamed.calls:
            await keep(
                Step(
                    number, StepKind.REPLY, step_prompt, streamed.text, None, None, streamed.tokens
                ),
                streamed,
            )
            messages.append(streamed.message())
            if plan.hooks is not None and not plan.inbox.pending and number < max_steps:
                again_note = await plan.hooks.stop(number, stops_asked)
                if again_note is not None:
                    stops_asked += 1
                    messages.append(Message("user", again_note))
                    continue
            if plan.check is not None and not plan.inbox.pending:
                failed = await plan.check.run(number)
                if failed is None:
                    end.outcome = SUCCESS
                    return end
                messages.append(Message("user", failed))
                continue
            if not plan.inbox.pending:
                return end
            continue

        nameless = any(not c.name for c in streamed.calls)
        if nameless and told_nameless:
            await keep(
                Step(
                    number, StepKind.ERROR, step_prompt, streamed.text, None, None, streamed.tokens
                ),
                streamed,
            )
            end.outcome, end.error = ERROR, NAMELESS_AGAIN
            return end
        told_nameless = told_nameless or nameless
        messages.append(streamed.message(tuple(streamed.calls)))
        for index, call in enumerate(streamed.calls):
            plan.activity.call(number + index, call, CallStatus.PROPOSED)
        ahead = _start_concurrent(tools, streamed.calls, plan, number, max_steps)
        try:
            end_here = await _run_calls(
                plan, tools, streamed, ahead, number, max_steps, step_prompt, keep, messages
            )
        finally:
            await _stop(ahead)
        if end_here is not None:
            end.outcome = end_here
            return end
        number += len(streamed.calls) - 1


async def _run_calls(
    plan: TurnPlan,
    tools: dict[str, Tool],
    streamed: _Streamed,
    ahead: dict[int, asyncio.Task[tuple[CallStatus, str]]],
    number: int,
    max_steps: int,
    step_prompt: str | None,
    keep: Callable[[Step, _Streamed | None], Awaitable[None]],
    messages: list[Message],
) -> Outcome | None:
    """Run (or wait for, when ``ahead`` started it) each call of one model call, committing
    each as its step (the first with the call's reasoning); the outcome that ends the turn when
    the steps run out, else None."""
    for index, call in enumerate(streamed.calls):
        if index:
            number += 1
            if number > max_steps:
                abandon(plan.activity, streamed.calls[index:], number)
                return FAILURE if plan.check is not None else EXHAUSTED
        first = index == 0
        prompt_here = step_prompt if first else None
        text_here = streamed.text if first else ""
        tokens_here = streamed.tokens if first else NO_TOKENS
        try:
            started = ahead.get(index)
            if started is not None:
                status, result = await started
            else:
                status, result = await _run_tool(tools.get(call.name), call, plan, number)
        except asyncio.CancelledError:
            abandon(plan.activity, streamed.calls[index:], number)
            # The tool's work is abandoned, but what the model said stays.
            await keep(
                Step(number, StepKind.CANCELLED, prompt_here, text_here, call, None, tokens_here),
                streamed if first else None,
            )
            raise
        plan.activity.call(number, call, status)
        await keep(
            Step(number, StepKind.TOOL, prompt_here, text_here, call, result, tokens_here),
            streamed if first else None,
        )
        if plan.hooks is not None and status in (CallStatus.DONE, CallStatus.FAILED):
            await plan.hooks.after_tool(call, status, result, number)
        messages.append(Message("tool", result, tool_call_id=call.id))
    return None


def _start_concurrent(
    tools: dict[str, Tool],
    calls: list[ToolCall],
    plan: TurnPlan,
    number: int,
    max_steps: int,
) -> dict[int, asyncio.Task[tuple[CallStatus, str]]]:
    """The calls of ``concurrent`` tools among ``calls`` (those within the step limit),
    started now, by their index."""
    started: dict[int, asyncio.Task[tuple[CallStatus, str]]] = {}
    for index, call in enumerate(calls):
        tool = tools.get(call.name)
        if tool is None or not getattr(tool, "concurrent", False) or number + index > max_steps:
            continue
        started[index] = asyncio.ensure_future(_run_tool(tool, call, plan, number + index))
    return started


async def _stop(started: dict[int, asyncio.Task[tuple[CallStatus, str]]]) -> None:
    """Cancel the started calls that have not ended (the turn was cancelled, or ran out of
    steps) and wait until they have."""
    pending = [task for task in started.values() if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)


async def _read(
    stream: AsyncIterator[ProviderEvent],
    streamed: _Streamed,
    limit: int,
    number: int,
    recorder: RunRecorder,
    sink: TurnSink,
) -> None:
    """Take one model call's events into ``streamed``; a ``ProviderError`` once its text, or
    its reasoning, goes past ``limit`` characters."""
    pieces, thinking = streamed.pieces, streamed.thinking
    async for event in stream:
        if isinstance(event, TextDelta):
            _add(pieces, event.text, limit, "reply")
            sink.token(number, event.text)
        elif isinstance(event, ThoughtDelta):
            _add(thinking, event.text, limit, "reasoning")
            sink.thought(number, event.text)
        elif isinstance(event, ReasoningDone):
            streamed.reasoning = event.reasoning
        elif isinstance(event, ToolCallRequested):
            streamed.calls.append(event.call)
        elif isinstance(event, Usage):
            streamed.usage = event
        elif isinstance(event, Retrying):
            await recorder.add_event(
                EventKind.RETRY,
                number,
                {"attempt": event.attempt, "delay": event.delay, "reason": event.reason},
            )
        elif isinstance(event, Stop):
            pass


def _add(pieces: Pieces, text: str, limit: int, what: str) -> None:
    """``text`` joins ``pieces``; a ``ProviderError`` when that takes them past ``limit``."""
    if pieces.size + len(text) > limit:
        raise ProviderError(
            f"the model's {what} in one step went past {size_words(limit)} of text;"
            " the call was ended to bound the memory it may take"
        )
    pieces.add(text)


async def _close(stream: AsyncIterator[ProviderEvent]) -> None:
    """Close the model call's stream (and with it the connection) when it has a way to."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


async def _deliver(
    plan: TurnPlan, messages: list[Message], number: int, recorder: RunRecorder, sink: TurnSink
) -> str | None:
    """Put the queued steers into this step's request; returns the step's prompt."""
    steers = plan.inbox.take()
    for steer in steers:
        messages.append(Message("user", STEER_NOTE + steer.text))
        await recorder.add_event(EventKind.STEERED, number, dict(steer.detail()))
        sink.steered(number, steer, True)
    return "\n\n".join(s.text for s in steers) if steers else None


async def _overflow(
    keeper: ContextKeeper,
    messages: list[Message],
    number: int,
    commit: Callable[[Step], Awaitable[None]],
    exc: ProviderError,
    overflowed: bool,
) -> str | None:
    """Compact a request the provider refused as too long; None when it was, else why the
    turn ends."""
    if overflowed:
        return TOO_LONG_AGAIN.format(error=exc)
    try:
        done = await keeper.compact(messages, number, commit, {"tooLong": True})
    except ProviderError as failed:
        return f"{exc}; compacting the session's history failed: {failed}"
    return None if done else NOTHING_TO_COMPACT.format(error=exc)


async def _run_tool(
    tool: Tool | None, call: ToolCall, plan: TurnPlan, step: int
) -> tuple[CallStatus, str]:
    """The call's result for the model, and how the call ended."""
    failed = CallStatus.FAILED
    if not call.name:
        return failed, NAMELESS
    if tool is None:
        return failed, f"error: there is no tool named {call.name!r}"
    if "_unparsed" in call.arguments:
        return failed, f"error: the arguments of {call.name} were not a JSON object"
    try:
        action = tool.action(call.arguments, plan.context)
        if plan.gate is not None and action is not None:
            refusal = await plan.gate.admit(call, action, step)
            if refusal is not None:
                return CallStatus.REFUSED, refusal
        with running(plan.activity, step, call, plan.context) as context:
            if plan.watch is None or action is None:
                return CallStatus.DONE, await tool.run(call.arguments, context)
            async with plan.watch.around(action, step):
                return CallStatus.DONE, await tool.run(call.arguments, context)
    except ToolFailure as exc:
        return failed, f"error: {exc}"
    except OSError as exc:
        return failed, f"error: {call.name} failed: {exc.strerror or exc}"
