"""The agent loop against a fake provider: what streams, what is committed, and how a turn ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waits import SAFETY_NET
from trellisd.agent.loop import TurnPlan, run_turn
from trellisd.providers.base import (
    Message,
    ModelRequest,
    ProviderError,
    ProviderEvent,
    Retrying,
    Stop,
    TextDelta,
    ToolCallRequested,
    Usage,
)
from trellisd.records import Step, Tokens, ToolCall
from trellisd.tools.base import Action, ToolContext, ToolFailure

UNKNOWN = Tokens(None, None, None)


class Hang:
    """In a script: the call stops here and waits until it is cancelled."""


class Fail:
    """In a script: the call fails here with a ``ProviderError``."""

    def __init__(self, message: str) -> None:
        self.message = message


Script = Sequence[ProviderEvent | Hang | Fail]


class FakeProvider:
    """Plays one script per model call and keeps every request it was sent."""

    name = "fake"
    model = "fake-model"

    def __init__(self, *calls: Script, repeat_last: bool = False) -> None:
        self.calls = list(calls)
        self.repeat_last = repeat_last
        self.requests: list[ModelRequest] = []
        self.hanging = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        # The loop may keep appending to its message list; keep what was sent at the time.
        self.requests.append(
            ModelRequest(
                list(request.messages), list(request.tools), request.temperature, request.max_tokens
            )
        )
        index = len(self.requests) - 1
        if index >= len(self.calls):
            assert self.repeat_last, f"the loop made an unexpected model call #{index + 1}"
            index = len(self.calls) - 1
        for item in self.calls[index]:
            if isinstance(item, Hang):
                self.hanging.set()
                await asyncio.Event().wait()
            elif isinstance(item, Fail):
                raise ProviderError(item.message)
            else:
                yield item


class Journal:
    """The recorder and the sink at once, writing what happens, in order, to one list."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.steps: list[Step] = []
        self.events: list[tuple[str, int | None, dict[str, Any]]] = []

    # RunRecorder
    async def add_step(self, step: Step) -> None:
        await asyncio.sleep(0)
        self.log.append(("commit", step.step))
        self.steps.append(step)

    async def add_event(self, kind: str, step: int | None, detail: dict[str, Any]) -> None:
        self.log.append(("event", kind, step))
        self.events.append((kind, step, detail))

    # TurnSink
    def token(self, step: int, text: str) -> None:
        self.log.append(("token", step, text))

    def step(self, step: Step) -> None:
        self.log.append(("step", step.step))

    def steered(self, step: int, steer: Any, delivered: bool) -> None:
        self.log.append(("steered", step))


class Upper:
    """A tool that answers with its ``text`` argument in capitals."""

    name = "upper"
    description = "Say the text in capitals."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        return Action("read", ".")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.ran.append(arguments)
        if not isinstance(arguments.get("text"), str):
            raise ToolFailure("text must be a string")
        return str(arguments["text"]).upper()


def reply(*pieces: str, usage: Usage | None = None) -> list[ProviderEvent]:
    return [*(TextDelta(p) for p in pieces), usage or Usage(10, len(pieces)), Stop("stop")]


def call(call_id: str, name: str, **arguments: Any) -> ToolCallRequested:
    return ToolCallRequested(ToolCall(call_id, name, arguments))


def plan(provider: FakeProvider, tmp_path: Path, *tools: Any, **options: Any) -> TurnPlan:
    messages = [Message("system", "be brief"), Message("user", "hi")]
    return TurnPlan(messages, provider, list(tools), ToolContext(tmp_path), **options)


async def test_text_streams_to_the_sink_in_order_before_its_step_is_committed(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(reply("Hel", "lo, ", "world", usage=Usage(12, 3, 4)))
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path), journal, journal, "hi")

    assert journal.log == [
        ("token", 1, "Hel"),
        ("token", 1, "lo, "),
        ("token", 1, "world"),
        ("commit", 1),
        ("step", 1),
    ]
    expected = Step(1, "reply", "hi", "Hello, world", None, None, Tokens(12, 3, 4))
    assert journal.steps == [expected]
    assert end.outcome == "finished" and end.error is None
    assert end.steps == [expected]


async def test_a_tool_call_runs_the_tool_and_its_result_goes_back_in_the_next_request(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [
            TextDelta("Let me shout. "),
            call("c1", "upper", text="quiet"),
            Usage(20, 5),
            Stop("tool_calls"),
        ],
        reply("It says QUIET."),
    )
    upper, journal = Upper(), Journal()

    end = await run_turn(plan(provider, tmp_path, upper), journal, journal, "hi")

    assert upper.ran == [{"text": "quiet"}]
    assert [spec.name for spec in provider.requests[0].tools] == ["upper"]
    second = provider.requests[1].messages
    assert second[:2] == provider.requests[0].messages
    assert second[2:] == [
        Message("assistant", "Let me shout. ", (ToolCall("c1", "upper", {"text": "quiet"}),)),
        Message("tool", "QUIET", tool_call_id="c1"),
    ]
    assert journal.steps == [
        Step(
            1,
            "tool",
            "hi",
            "Let me shout. ",
            ToolCall("c1", "upper", {"text": "quiet"}),
            "QUIET",
            Tokens(20, 5, None),
        ),
        Step(2, "reply", None, "It says QUIET.", None, None, Tokens(10, 1, None)),
    ]
    assert end.outcome == "finished"


async def test_two_tool_calls_in_one_response_are_two_steps_with_the_tokens_on_the_first(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [
            TextDelta("Both."),
            call("a", "upper", text="one"),
            call("b", "upper", text="two"),
            Usage(30, 7, 2),
            Stop("tool_calls"),
        ],
        reply("ONE and TWO."),
    )
    upper, journal = Upper(), Journal()

    end = await run_turn(plan(provider, tmp_path, upper), journal, journal, "hi")

    assert upper.ran == [{"text": "one"}, {"text": "two"}]
    assert journal.steps[:2] == [
        Step(
            1,
            "tool",
            "hi",
            "Both.",
            ToolCall("a", "upper", {"text": "one"}),
            "ONE",
            Tokens(30, 7, 2),
        ),
        Step(2, "tool", None, "", ToolCall("b", "upper", {"text": "two"}), "TWO", Tokens(0, 0, 0)),
    ]
    assert journal.steps[2].step == 3 and journal.steps[2].decision == "reply"
    assert provider.requests[1].messages[-2:] == [
        Message("tool", "ONE", tool_call_id="a"),
        Message("tool", "TWO", tool_call_id="b"),
    ]
    total = sum((s.tokens for s in journal.steps), Tokens())
    assert (total.input, total.output) == (40, 8)
    assert end.outcome == "finished" and len(end.steps) == 3


async def test_an_unknown_tool_gives_the_model_an_error_result(tmp_path: Path) -> None:
    provider = FakeProvider(
        [call("c1", "delete_everything", path="/"), Usage(5, 1), Stop("tool_calls")],
        reply("Sorry, I cannot do that."),
    )
    upper, journal = Upper(), Journal()

    end = await run_turn(plan(provider, tmp_path, upper), journal, journal, "hi")

    result = journal.steps[0].result
    assert result is not None
    assert result.startswith("error:") and "delete_everything" in result
    assert provider.requests[1].messages[-1] == Message("tool", result, tool_call_id="c1")
    assert upper.ran == []
    assert end.outcome == "finished"


async def test_a_tool_failure_goes_back_to_the_model_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [call("c1", "upper", text=3), Usage(5, 1), Stop("tool_calls")],
        reply("I will pass a string."),
    )
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path, Upper()), journal, journal, "hi")

    assert journal.steps[0].result == "error: text must be a string"
    assert provider.requests[1].messages[-1].content == "error: text must be a string"
    assert end.outcome == "finished"


async def test_a_provider_error_mid_stream_commits_the_text_so_far_and_ends_in_error(
    tmp_path: Path,
) -> None:
    provider = FakeProvider([TextDelta("Half "), TextDelta("a "), Fail("the model went away")])
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path), journal, journal, "hi")

    expected = Step(1, "error", "hi", "Half a ", None, None, UNKNOWN)
    assert journal.steps == [expected]
    assert journal.log[-2:] == [("commit", 1), ("step", 1)]
    assert end.outcome == "error"
    assert end.error == "the model went away"
    assert end.steps == [expected]


async def test_a_provider_error_after_a_tool_step_keeps_the_tool_step(tmp_path: Path) -> None:
    provider = FakeProvider(
        [call("c1", "upper", text="x"), Usage(5, 1), Stop("tool_calls")],
        [Fail("429 too many requests")],
    )
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path, Upper()), journal, journal, "hi")

    assert [(s.step, s.decision) for s in journal.steps] == [(1, "tool")]
    assert (end.outcome, end.error) == ("error", "429 too many requests")


async def test_cancelling_mid_stream_commits_the_partial_text_and_reraises(
    tmp_path: Path,
) -> None:
    provider = FakeProvider([TextDelta("Working "), TextDelta("on it"), Hang()])
    journal = Journal()

    task = asyncio.create_task(run_turn(plan(provider, tmp_path), journal, journal, "hi"))
    await asyncio.wait_for(provider.hanging.wait(), SAFETY_NET)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert journal.steps == [Step(1, "cancelled", "hi", "Working on it", None, None, UNKNOWN)]
    assert journal.log == [
        ("token", 1, "Working "),
        ("token", 1, "on it"),
        ("commit", 1),
        ("step", 1),
    ]


async def test_cancelling_before_any_text_commits_nothing(tmp_path: Path) -> None:
    provider = FakeProvider([Hang()])
    journal = Journal()

    task = asyncio.create_task(run_turn(plan(provider, tmp_path), journal, journal, "hi"))
    await asyncio.wait_for(provider.hanging.wait(), SAFETY_NET)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert journal.steps == []


async def test_max_steps_ends_the_turn_exhausted(tmp_path: Path) -> None:
    provider = FakeProvider(
        [TextDelta("again"), call("c", "upper", text="more"), Usage(5, 1), Stop("tool_calls")],
        repeat_last=True,
    )
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path, Upper(), max_steps=3), journal, journal, "hi")

    assert end.outcome == "exhausted"
    assert [(s.step, s.decision) for s in journal.steps] == [(1, "tool"), (2, "tool"), (3, "tool")]
    assert len(provider.requests) == 3


async def test_a_retry_is_recorded_as_a_retry_event_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    provider = FakeProvider([Retrying(attempt=2, delay=0.5, reason="HTTP 503"), *reply("Back.")])
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path), journal, journal, "hi")

    assert journal.events == [("retry", 1, {"attempt": 2, "delay": 0.5, "reason": "HTTP 503"})]
    assert journal.log.index(("event", "retry", 1)) < journal.log.index(("token", 1, "Back."))
    assert end.outcome == "finished"
    assert journal.steps[0].text == "Back."


class Endless(Upper):
    """A tool whose work never ends, like a long command, until it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.started.set()
        await asyncio.Event().wait()
        return "never"


async def test_cancelling_while_a_tool_runs_keeps_the_text_already_streamed(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [
            TextDelta("Running the tests. "),
            call("c1", "upper", text="x"),
            Usage(5, 1),
            Stop("tool_calls"),
        ]
    )
    tool, journal = Endless(), Journal()

    task = asyncio.create_task(run_turn(plan(provider, tmp_path, tool), journal, journal, "hi"))
    await asyncio.wait_for(tool.started.wait(), SAFETY_NET)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    # The editor showed "Running the tests. "; the turn's reply is its steps' text joined.
    assert "".join(s.text for s in journal.steps) == "Running the tests. "


async def test_max_steps_is_never_exceeded_by_a_response_with_several_tool_calls(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [
            call("a", "upper", text="one"),
            call("b", "upper", text="two"),
            Usage(5, 1),
            Stop("tool_calls"),
        ],
        repeat_last=True,
    )
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path, Upper(), max_steps=1), journal, journal, "hi")

    # protocol/schema.json, session/turn maxSteps: "at most this many steps, then the outcome
    # is exhausted".
    assert end.outcome == "exhausted"
    assert len(journal.steps) <= 1


async def test_a_tool_call_without_a_name_is_told_once_then_ends_the_turn_in_error(
    tmp_path: Path,
) -> None:
    nameless = call("c1", "", text="x")
    provider = FakeProvider(
        [nameless, Usage(5, 1), Stop("tool_calls")],
        [TextDelta("oops "), call("c2", "", text="y"), Usage(6, 1), Stop("tool_calls")],
    )
    journal = Journal()
    upper = Upper()

    end = await run_turn(plan(provider, tmp_path, upper), journal, journal, "hi")

    assert end.outcome == "error"
    assert end.error is not None and "without naming it" in end.error
    told = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert len(told) == 1 and "names no tool" in told[0].content
    assert len(provider.requests) == 2
    assert [(s.decision, s.text) for s in journal.steps] == [("tool", ""), ("error", "oops ")]
    assert upper.ran == []


async def test_a_turn_without_max_steps_stops_at_the_default_of_100(tmp_path: Path) -> None:
    provider = FakeProvider(
        [call("c", "upper", text="again"), Stop("tool_calls")], repeat_last=True
    )
    journal = Journal()

    end = await run_turn(plan(provider, tmp_path, Upper()), journal, journal, "hi")

    assert end.outcome == "exhausted"
    assert len(provider.requests) == 100
    assert journal.steps[-1].step == 100


async def test_a_pause_stops_the_turn_at_the_next_step_boundary(tmp_path: Path) -> None:
    """Asked from the first model call on: that step commits, the next call is not made."""
    provider = FakeProvider(
        [call("c1", "upper", text="a"), call("c2", "upper", text="b"), Stop("tool_calls")],
        reply("done"),
    )
    upper, journal = Upper(), Journal()

    end = await run_turn(
        plan(provider, tmp_path, upper, pause=lambda: True), journal, journal, "hi"
    )

    assert end.outcome == "paused"
    assert len(provider.requests) == 1
    assert [s.step for s in journal.steps] == [1, 2]  # the tool steps of one call: one boundary
    assert upper.ran == [{"text": "a"}, {"text": "b"}]


async def test_a_reply_ends_the_turn_even_when_a_pause_is_asked(tmp_path: Path) -> None:
    provider = FakeProvider(reply("done"))
    journal = Journal()
    end = await run_turn(plan(provider, tmp_path, pause=lambda: True), journal, journal, "hi")
    assert end.outcome == "finished"


class Flood:
    """A model call that streams ``piece`` without end, and says when it was closed."""

    name = "flood"
    model = "endless-model"

    def __init__(self, piece: str) -> None:
        self.piece = piece
        self.sent = 0
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        try:
            while True:
                self.sent += 1
                yield TextDelta(self.piece)
        finally:
            self.closed = True


async def test_a_reply_past_the_step_limit_ends_the_turn_error_and_closes_the_stream(
    tmp_path: Path,
) -> None:
    provider = Flood("abcd")
    journal = Journal()

    end = await run_turn(
        plan(provider, tmp_path, max_step_text=4096),
        journal,
        journal,
        "say it all",  # type: ignore[arg-type]
    )

    assert end.outcome == "error"
    assert end.error == (
        "the model's reply in one step went past 4 KiB of text; the call was ended to bound the"
        " memory it may take"
    )
    assert journal.steps == [Step(1, "error", "say it all", "abcd" * 1024, None, None, UNKNOWN)]
    assert provider.closed and provider.sent == 1025
    tokens = [entry for entry in journal.log if entry[0] == "token"]
    assert len(tokens) == 1024
