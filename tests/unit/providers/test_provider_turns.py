"""The agent loop drives either wire the same way: a tool call, its result sent back in the
wire's own shape, a retry recorded as a run event, the usage on each step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.provider_servers import (
    Response,
    ScriptServer,
    anthropic_reply,
    openai_reply,
    opened,
)
from trellisd.agent.loop import FINISHED, TurnPlan, run_turn
from trellisd.config import ProviderSettings
from trellisd.providers import make_provider
from trellisd.providers.base import Message
from trellisd.records import Step, Tokens
from trellisd.tools.base import ToolContext


class Recorder:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.events: list[tuple[str, int | None, dict[str, Any]]] = []

    async def add_step(self, step: Step) -> None:
        self.steps.append(step)

    async def add_event(self, kind: str, step: int | None, detail: dict[str, Any]) -> None:
        self.events.append((kind, step, detail))


class Sink:
    def __init__(self) -> None:
        self.text: list[str] = []

    def token(self, step: int, text: str) -> None:
        self.text.append(text)

    def step(self, step: Step) -> None:
        pass

    def steered(self, step: int, steer: object, delivered: bool) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


CALL = {"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}}


def replies(name: str) -> list[Response]:
    usage: dict[str, Any]
    if name == "anthropic":
        usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}
        first = anthropic_reply(["Reading."], [CALL], usage=usage, output_tokens=7)
        second = anthropic_reply(["Done."], usage={"input_tokens": 120}, output_tokens=2)
    else:
        usage = {
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 90},
        }
        first = openai_reply(["Reading."], [CALL], usage=usage)
        second = openai_reply(["Done."], usage={"prompt_tokens": 120, "completion_tokens": 2})
    busy = Response(status=429, headers={"Retry-After": "0"}, body=b"{}")
    return [busy, Response(chunks=first), Response(chunks=second)]


def tool_result_sent(name: str, body: dict[str, Any]) -> Any:
    if name == "anthropic":
        return body["messages"][-1]["content"][0]
    return body["messages"][-1]


@pytest.mark.parametrize("name", ["openai", "anthropic"])
async def test_a_turn_with_a_tool_call_runs_the_same_on_either_wire(
    name: str, server: ScriptServer, tmp_path: Path
) -> None:
    server.queue(*replies(name))
    base = server.url + ("/v1" if name == "openai" else "")
    provider = opened(
        make_provider(ProviderSettings(name=name, base_url=base, api_key="sk-x-12345678"))
    )
    plan = TurnPlan([Message("user", "read a.txt")], provider, [], ToolContext(tmp_path))
    recorder, sink = Recorder(), Sink()

    end = await run_turn(plan, recorder, sink, "read a.txt")

    assert end.outcome == FINISHED
    assert "".join(sink.text) == "Reading.Done."
    assert [(s.decision, s.text) for s in recorder.steps] == [
        ("tool", "Reading."),
        ("reply", "Done."),
    ]
    assert recorder.steps[0].tool_call is not None
    assert recorder.steps[0].tool_call.arguments == {"path": "a.txt"}
    assert recorder.steps[0].tokens == Tokens(100, 7, 90)
    assert recorder.steps[1].tokens == Tokens(120, 2, None)
    assert [(kind, detail["attempt"]) for kind, _, detail in recorder.events] == [("retry", 2)]
    sent = tool_result_sent(name, server.requests[-1].body)
    assert "no tool named 'read_file'" in sent["content"]
    assert sent.get("tool_call_id", sent.get("tool_use_id")) == "call_1"
