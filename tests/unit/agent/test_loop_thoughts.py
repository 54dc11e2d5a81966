"""The agent loop and what the model reasons: streamed to the sink, kept with the step, sent
back with the assistant's message on the turn's later calls; and the turn's effort."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.unit.agent.test_loop import FakeProvider, Journal, Upper, call, plan
from trellisd.agent.context import replay
from trellisd.agent.loop import TurnEnd, run_turn
from trellisd.providers.base import (
    Message,
    ModelRequest,
    ProviderEvent,
    Reasoning,
    ReasoningDone,
    Stop,
    TextDelta,
    ThoughtDelta,
    Usage,
)
from trellisd.records import Step, Thought, Tokens, ToolCall

SIGNED = {"type": "thinking", "thinking": "Shout it.", "signature": "c2lnbmVk"}


class Thinking(FakeProvider):
    """The fake provider, keeping each request whole (its effort too)."""

    def __init__(self, *calls: Any) -> None:
        super().__init__(*calls)
        self.sent: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        self.sent.append(ModelRequest(**{**request.__dict__, "messages": list(request.messages)}))
        async for event in super().stream(request):
            yield event


class Thoughts(Journal):
    """The journal, with the reasoning the sink is told."""

    def thought(self, step: int, text: str) -> None:
        self.log.append(("thought", step, text))


def thinking_call(*pieces: str, items: tuple[dict[str, Any], ...] = ()) -> list[ProviderEvent]:
    return [
        *(ThoughtDelta(p) for p in pieces),
        ReasoningDone(Reasoning("fake", "".join(pieces), items)),
    ]


async def test_reasoning_streams_to_the_sink_and_is_recorded_just_before_its_step(
    tmp_path: Path,
) -> None:
    provider = Thinking(
        [*thinking_call("Say ", "hello."), TextDelta("Hello."), Usage(12, 9, 0, 7), Stop("stop")]
    )
    journal = Thoughts()

    await run(provider, journal, tmp_path)

    assert journal.log == [
        ("thought", 1, "Say "),
        ("thought", 1, "hello."),
        ("token", 1, "Hello."),
        ("event", "thought", 1),
        ("commit", 1),
        ("step", 1),
    ]
    assert journal.events == [
        ("thought", 1, {"text": "Say hello.", "provider": "fake", "items": [], "tokens": 7})
    ]
    assert journal.steps == [
        Step(
            1,
            "reply",
            "hi",
            "Hello.",
            None,
            None,
            Tokens(12, 9, 0, 7),
            Thought("Say hello.", "fake"),
        )
    ]


async def test_the_reasoning_goes_back_with_the_assistant_message_on_the_next_call(
    tmp_path: Path,
) -> None:
    provider = Thinking(
        [
            *thinking_call("Shout it.", items=(SIGNED,)),
            call("c1", "upper", text="quiet"),
            Usage(20, 5),
            Stop("tool_calls"),
        ],
        [TextDelta("QUIET."), Usage(30, 2), Stop("stop")],
    )
    journal = Thoughts()

    await run(provider, journal, tmp_path, Upper())

    asked = provider.sent[1].messages[2]
    assert asked == Message(
        "assistant",
        "",
        (ToolCall("c1", "upper", {"text": "quiet"}),),
        reasoning=Reasoning("fake", "Shout it.", (SIGNED,)),
    )
    first, second = journal.steps
    assert first.thought == Thought("Shout it.", "fake", (SIGNED,))
    assert second.thought is None and second.tokens.reasoning is None
    assert [kind for kind, *_ in journal.events] == ["thought"]
    # A later turn's replay of this one carries the same reasoning in the same place.
    assert replay(journal.steps)[0] == asked


async def test_reasoning_streamed_without_a_whole_record_is_kept_as_it_streamed(
    tmp_path: Path,
) -> None:
    provider = Thinking(
        [ThoughtDelta("Hm, "), ThoughtDelta("yes."), TextDelta("Yes."), Stop("stop")]
    )
    journal = Thoughts()

    await run(provider, journal, tmp_path)

    assert journal.steps[0].thought == Thought("Hm, yes.", "fake")
    assert journal.events[0][2]["tokens"] is None


async def test_reasoning_tokens_alone_are_recorded_without_a_thought(tmp_path: Path) -> None:
    provider = Thinking([TextDelta("4"), Usage(10, 50, None, 48), Stop("stop")])
    journal = Thoughts()

    await run(provider, journal, tmp_path)

    assert journal.events == [
        ("thought", 1, {"text": "", "provider": "fake", "items": [], "tokens": 48})
    ]
    assert journal.steps[0].thought is None
    assert journal.steps[0].tokens == Tokens(10, 50, None, 48)


async def test_a_call_that_does_not_reason_records_no_thought(tmp_path: Path) -> None:
    provider = Thinking([TextDelta("Hi."), Usage(10, 1), Stop("stop")])
    journal = Thoughts()

    await run(provider, journal, tmp_path)

    assert journal.events == []
    assert provider.sent[0].effort is None


async def test_the_turn_s_effort_reaches_every_call(tmp_path: Path) -> None:
    provider = Thinking(
        [call("c1", "upper", text="a"), Stop("tool_calls")], [TextDelta("A"), Stop("stop")]
    )

    await run(provider, Thoughts(), tmp_path, Upper(), effort="high")

    assert [r.effort for r in provider.sent] == ["high", "high"]


async def test_reasoning_past_the_step_limit_ends_the_call_keeping_what_came(
    tmp_path: Path,
) -> None:
    provider = Thinking([ThoughtDelta("a" * 3000), ThoughtDelta("b" * 3000), Stop("stop")])
    journal = Thoughts()

    end = await run(provider, journal, tmp_path, max_step_text=4096)

    assert end.outcome == "error"
    assert end.error is not None and "reasoning in one step went past 4 KiB" in end.error
    assert [s.decision for s in journal.steps] == ["error"]
    assert journal.steps[0].thought == Thought("a" * 3000, "fake")


async def run(
    provider: FakeProvider, journal: Thoughts, tmp_path: Path, *tools: Any, **options: Any
) -> TurnEnd:
    return await run_turn(plan(provider, tmp_path, *tools, **options), journal, journal, "hi")


async def test_a_whole_record_without_text_keeps_the_text_as_it_streamed(tmp_path: Path) -> None:
    redacted = {"type": "redacted_thinking", "data": "b3BhcXVl"}
    provider = Thinking(
        [
            ThoughtDelta("Hidden mostly."),
            ReasoningDone(Reasoning("fake", "", (redacted,))),
            TextDelta("Ok."),
            Stop("stop"),
        ]
    )
    journal = Thoughts()

    await run(provider, journal, tmp_path)

    assert journal.steps[0].thought == Thought("Hidden mostly.", "fake", (redacted,))
