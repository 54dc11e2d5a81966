"""A turn of the path as the next turn sends it: rebuilt from its committed steps, it is
what the turn's own last request held, then its reply, so the provider's prompt cache serves
it and the model sees what it read and ran."""

from __future__ import annotations

from pathlib import Path

from tests.unit.agent.test_loop import FakeProvider, Journal, Upper, call, plan, reply
from tests.unit.agent.test_loop_thoughts import Thoughts, thinking_call
from trellisd.agent.context import UNFINISHED_CALL, turn_messages
from trellisd.agent.loop import run_turn
from trellisd.agent.steering import STEER_NOTE, Steer
from trellisd.providers.base import Message, Reasoning, Stop, TextDelta, Usage
from trellisd.records import Step, Tokens, ToolCall, Turn


def finished(steps: list[Step], outcome: str = "finished") -> tuple[Turn, dict[str, list[Step]]]:
    turn = Turn("t1", "s", None, "r1", "hi", "", outcome, None, Tokens(), "")
    return turn, {"r1": steps}


async def test_a_turn_with_two_calls_at_once_and_a_steer_is_sent_as_it_happened(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [TextDelta("Both. "), call("a", "upper", text="x"), call("b", "upper", text="y")]
        + [Usage(10, 2), Stop("tool_calls")],
        reply("Done."),
    )
    journal = Journal()
    turn_plan = plan(provider, tmp_path, Upper())
    turn_plan.inbox.put(Steer("and be quick", None))
    await run_turn(turn_plan, journal, journal, "hi")

    turn, transcripts = finished(journal.steps)
    sent = provider.requests[-1].messages
    assert turn_messages([turn], transcripts) == [*sent[1:], Message("assistant", "Done.")]
    assert sent[2] == Message(
        "assistant",
        "Both. ",
        (ToolCall("a", "upper", {"text": "x"}), ToolCall("b", "upper", {"text": "y"})),
    )
    assert Message("user", STEER_NOTE + "and be quick") in sent


def test_a_turn_cancelled_in_a_call_gives_the_call_a_result_and_says_how_it_ended() -> None:
    running = ToolCall("c", "run_command", {"argv": ["sleep", "60"]})
    turn, transcripts = finished(
        [Step(1, "cancelled", "hi", "Running. ", running, None, Tokens(5, 1, 0))], "cancelled"
    )
    assert turn_messages([turn], transcripts) == [
        Message("user", "hi"),
        Message("assistant", "Running. ", (running,)),
        Message("tool", UNFINISHED_CALL, tool_call_id="c"),
        Message("assistant", "(no reply: the turn cancelled)"),
    ]


async def test_what_the_model_reasoned_goes_with_each_call_of_the_turn_as_it_was_sent(
    tmp_path: Path,
) -> None:
    signed = {"type": "thinking", "thinking": "Both.", "signature": "c2ln"}
    provider = FakeProvider(
        [*thinking_call("Both.", items=(signed,)), call("a", "upper", text="x")]
        + [call("b", "upper", text="y"), Usage(10, 2), Stop("tool_calls")],
        [*thinking_call("Say it."), TextDelta("Done."), Usage(20, 3), Stop("stop")],
    )
    journal = Thoughts()
    await run_turn(plan(provider, tmp_path, Upper()), journal, journal, "hi")

    turn, transcripts = finished(journal.steps)
    sent = provider.requests[-1].messages
    replayed = turn_messages([turn], transcripts)
    assert replayed[:-1] == sent[1:]
    assert sent[2].reasoning == Reasoning("fake", "Both.", (signed,))
    assert replayed[-1] == Message("assistant", "Done.", reasoning=Reasoning("fake", "Say it."))
