"""The context keeper and the loop together, against a fake provider: when a request is
compacted, what the next request holds, and how a refusal as too long is handled."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from tests.unit.agent.test_loop import FakeProvider, Journal, Upper, call, reply
from trellisd.agent.compaction import (
    SUMMARY_NOTE,
    ContextKeeper,
    Summary,
    estimate_tokens,
)
from trellisd.agent.loop import TurnPlan, run_turn
from trellisd.providers.base import Message, ModelRequest, ProviderError, ProviderEvent, Usage
from trellisd.records import Step, Tokens, ToolCall, Turn
from trellisd.tools.base import Tool, ToolContext


def turn(n: int, words: int = 40) -> Turn:
    prompt = f"prompt{n} " + " ".join("w" * 7 for _ in range(words))
    return Turn(f"t{n}", "s", None, f"r{n}", prompt, f"reply{n}", "finished", None, Tokens(), "")


def keeper(
    provider: FakeProvider | TooLong,
    journal: Journal,
    path: list[Turn],
    window: int,
    summary: Summary | None = None,
    transcripts: dict[str, list[Step]] | None = None,
    pinned: tuple[str, ...] = (),
) -> ContextKeeper:
    return ContextKeeper(
        provider,
        journal,
        Message("system", "be brief"),
        path,
        summary,
        window,
        0.8,
        transcripts,
        pinned,
    )


def plan(
    provider: FakeProvider, tmp_path: Path, k: ContextKeeper, prompt: str, *tools: Tool
) -> TurnPlan:
    messages = [*k.head(), Message("user", prompt)]
    return TurnPlan(messages, provider, list(tools), ToolContext(tmp_path), keeper=k)


def texts(request: ModelRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def test_the_estimate_adds_what_was_sent_since_to_what_the_provider_reported() -> None:
    k = keeper(FakeProvider(), Journal(), [], 1000)
    first = [Message("system", "x" * 400), Message("user", "y" * 400)]
    assert k.estimate(first, []) == estimate_tokens(first) == 200 + 8
    later = [*first, Message("assistant", "z" * 4000), Message("user", "q" * 40)]
    k._reported = (2, 150, 7)  # what the provider said of the call that sent ``first``
    assert k.estimate(later, []) == 150 + 7 + 10 + 4


async def test_a_turn_over_the_limit_compacts_all_but_the_two_newest_turns_first(
    tmp_path: Path,
) -> None:
    path = [turn(1), turn(2), turn(3)]
    provider = FakeProvider(reply("SUMMARY"), reply("done"))
    journal = Journal()
    k = keeper(provider, journal, path, window=200)
    assert estimate_tokens([*k.head(), Message("user", "now this")]) > k.limit

    end = await run_turn(plan(provider, tmp_path, k, "now this"), journal, journal, "now this")

    assert end.outcome == "finished"
    asked, sent = provider.requests
    assert "prompt1" in texts(asked) and "prompt2" not in texts(asked) and not asked.tools
    assert sent.messages[1] == Message("user", SUMMARY_NOTE + "SUMMARY")
    assert "prompt1" not in texts(sent)
    assert [m.content.split(" ")[0] for m in sent.messages[2:]] == [
        "prompt2",
        "reply2",
        "prompt3",
        "reply3",
        "now",
    ]
    assert [(s.step, s.decision) for s in journal.steps] == [(1, "compaction"), (2, "reply")]
    assert journal.steps[0].result == "SUMMARY" and journal.steps[0].text == ""
    assert journal.steps[1].prompt == "now this"
    kind, step, detail = journal.events[0]
    assert (kind, step, detail["turns"], detail["throughTurnId"]) == ("compaction", 1, 1, "t1")


async def test_a_path_under_the_limit_is_sent_whole(tmp_path: Path) -> None:
    path = [turn(1), turn(2)]
    provider = FakeProvider(reply("done", usage=Usage(50, 1)))
    journal = Journal()
    k = keeper(provider, journal, path, window=100_000)
    await run_turn(plan(provider, tmp_path, k, "now"), journal, journal, "now")
    assert len(provider.requests) == 1 and "prompt1" in texts(provider.requests[0])
    assert k.context_tokens == 51


async def test_a_compaction_in_force_is_sent_in_place_of_the_turns_it_stands_for() -> None:
    k = keeper(FakeProvider(), Journal(), [turn(1), turn(2)], 1000, Summary("EARLIER", 1))
    head = k.head()
    assert head[1].content == SUMMARY_NOTE + "EARLIER"
    assert [m.content.split(" ")[0] for m in head[2:]] == ["prompt2", "reply2"]


class TooLong(FakeProvider):
    """Refuses the requests numbered in ``refuse`` as too long; plays ``calls`` otherwise."""

    def __init__(self, refuse: set[int], *calls: list[ProviderEvent]) -> None:
        super().__init__(*calls)
        self.refuse = refuse
        self.seen = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        self.seen += 1
        if self.seen in self.refuse:
            raise ProviderError("prompt is too long: 9000 tokens > 8000 maximum", too_long=True)
        async for event in super().stream(request):
            yield event


async def test_a_refusal_as_too_long_compacts_once_then_the_turn_ends_error(
    tmp_path: Path,
) -> None:
    provider = TooLong({1, 3}, reply("SUMMARY"))
    journal = Journal()
    k = keeper(provider, journal, [turn(1), turn(2)], window=100_000)

    end = await run_turn(plan(provider, tmp_path, k, "now"), journal, journal, "now")

    assert end.outcome == "error"
    assert end.error is not None and "even after compacting" in end.error
    assert "prompt is too long" in end.error
    assert [s.decision for s in journal.steps] == ["compaction"]
    assert journal.events[0][2]["tooLong"] is True


async def test_a_refusal_with_nothing_left_to_compact_says_so(tmp_path: Path) -> None:
    provider = TooLong({1})
    journal = Journal()
    k = keeper(provider, journal, [turn(1)], window=100_000)
    end = await run_turn(plan(provider, tmp_path, k, "now"), journal, journal, "now")
    assert end.outcome == "error"
    assert end.error is not None and "no earlier turns left to compact" in end.error


async def test_tool_steps_are_estimated_from_the_reported_figures(tmp_path: Path) -> None:
    provider = FakeProvider(
        [call("c1", "upper", text="hi"), Usage(120, 9)], reply("done", usage=Usage(140, 2))
    )
    journal = Journal()
    k = keeper(provider, journal, [], window=100_000)
    await run_turn(plan(provider, tmp_path, k, "shout", Upper()), journal, journal, "shout")
    assert k.context_tokens == 142


async def test_a_pinned_turn_is_sent_verbatim_after_the_compaction_with_a_cache_breakpoint(
    tmp_path: Path,
) -> None:
    """Turn 2 read a file and is pinned: the compaction summarizes turns 1 and 3 (not 2),
    and the request after it sends turn 2 whole, as it happened, right after the summary,
    its last message marked for the prompt cache."""
    path = [turn(1), turn(2), turn(3), turn(4), turn(5)]
    read = ToolCall("call_pin", "read_file", {"path": "notes.md"})
    transcripts = {
        "r2": [
            Step(1, "tool", path[1].prompt, "Reading. ", read, "the launch code is 4242", Tokens()),
            Step(2, "reply", None, "reply2", None, None, Tokens()),
        ]
    }
    provider = FakeProvider(reply("SUMMARY"), reply("done"))
    journal = Journal()
    k = keeper(provider, journal, path, 300, transcripts=transcripts, pinned=("t2",))
    assert estimate_tokens([*k.head(), Message("user", "now this")]) > k.limit

    end = await run_turn(plan(provider, tmp_path, k, "now this"), journal, journal, "now this")

    assert end.outcome == "finished"
    asked, sent = provider.requests
    assert "prompt1" in texts(asked) and "prompt3" in texts(asked)
    assert "prompt2" not in texts(asked) and "4242" not in texts(asked)
    assert sent.messages[1] == Message("user", SUMMARY_NOTE + "SUMMARY")
    pinned = sent.messages[2:6]
    assert pinned == [
        Message("user", path[1].prompt),
        Message("assistant", "Reading. ", (read,)),
        Message("tool", "the launch code is 4242", tool_call_id="call_pin"),
        Message("assistant", "reply2", cache=True),
    ]
    assert "prompt1" not in texts(sent) and "prompt3" not in texts(sent)
    assert [m.content.split(" ")[0] for m in sent.messages[6:]] == [
        "prompt4",
        "reply4",
        "prompt5",
        "reply5",
        "now",
    ]
    assert [m for m in sent.messages if m.cache] == [pinned[-1]]
