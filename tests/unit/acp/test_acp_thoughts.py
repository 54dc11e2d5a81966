"""What the model reasons reaches an ACP client as ``agent_thought_chunk`` updates, live and
when the session is loaded; the ``effort`` config option sets how hard it thinks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from tests import acp_schema
from tests.unit.acp.test_acp_dispatch import answer, refusal
from trellisd import services
from trellisd.acp.agent import TrellisAgent
from trellisd.acp.notifier import AcpNotifier
from trellisd.config import ProviderSettings
from trellisd.providers import base


class Reasoner:
    """A model that reasons before it answers, keeping the effort each call asked for."""

    name = "fake"
    model = "fake-model"

    def __init__(self) -> None:
        self.efforts: list[str | None] = []

    async def stream(self, request: base.ModelRequest) -> AsyncIterator[base.ProviderEvent]:
        self.efforts.append(request.effort)
        yield base.ThoughtDelta("The test expects 2. ")
        yield base.ThoughtDelta("Fix app().")
        yield base.ReasoningDone(base.Reasoning("fake", "The test expects 2. Fix app()."))
        yield base.TextDelta("Fixed.")
        yield base.Usage(10, 8, None, 6)
        yield base.Stop("stop")


class Client:
    """The ACP client's side: the updates it was sent, checked against the ACP schema."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def notify(self, method: str, params: Any) -> None:
        if acp_schema.available():
            acp_schema.check({"jsonrpc": "2.0", "method": method, "params": params})
        self.updates.append(params["update"])

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError(f"not asked: {method}")

    def said(self) -> list[tuple[str, str]]:
        """The message and thought chunks, in order, as (kind, text)."""
        return [
            (u["sessionUpdate"], u["content"]["text"])
            for u in self.updates
            if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
        ]


App = tuple[services.Services, Reasoner, AcpNotifier]


@pytest_asyncio.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    model = Reasoner()
    holder: list[services.Services] = []
    notifier = AcpNotifier(lambda: holder[0].changes)
    started = await services.start(
        tmp_path / "store.db", ProviderSettings(name="openai"), notifier, lambda s: model
    )
    holder.append(started)
    yield started, model, notifier
    await started.close()


def connected(app: services.Services, notifier: AcpNotifier) -> tuple[TrellisAgent, Client]:
    client = Client()
    notifier.connect(client)
    return TrellisAgent(app, notifier), client


async def test_thoughts_stream_before_the_reply_and_come_back_on_load(app: App, root: str) -> None:
    services_, _, notifier = app
    agent, client = connected(services_, notifier)
    await answer(agent, 0, "initialize", {"protocolVersion": 1})
    sid = (await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []}))["sessionId"]

    result = await answer(
        agent, 2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "fix"}]}
    )

    assert result == {"stopReason": "end_turn"}
    thought = [("agent_thought_chunk", "The test expects 2. Fix app().")]
    live = client.said()
    assert "".join(t for k, t in live if k == "agent_thought_chunk") == thought[0][1]
    assert live[-1] == ("agent_message_chunk", "Fixed.")

    later, reader = connected(services_, AcpNotifier(lambda: services_.changes))
    await answer(later, 0, "initialize", {"protocolVersion": 1})
    await answer(later, 1, "session/load", {"sessionId": sid, "cwd": root, "mcpServers": []})
    assert reader.said() == [*thought, ("agent_message_chunk", "Fixed.")]


async def test_the_effort_option_sets_the_effort_of_the_next_turns(app: App, root: str) -> None:
    services_, model, notifier = app
    agent, _ = connected(services_, notifier)
    await answer(agent, 0, "initialize", {"protocolVersion": 1})
    new = await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []})
    sid = new["sessionId"]
    effort = next(o for o in new["configOptions"] if o["id"] == "effort")
    assert effort["currentValue"] == "default" and effort["category"] == "thought_level"
    assert [v["value"] for v in effort["options"]] == ["default", "low", "medium", "high"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}

    await answer(agent, 2, "session/prompt", prompt)
    chosen = await answer(
        agent,
        3,
        "session/set_config_option",
        {"sessionId": sid, "configId": "effort", "value": "high"},
    )
    await answer(agent, 4, "session/prompt", prompt)

    assert model.efforts == [None, "high"]
    shown = next(o for o in chosen["configOptions"] if o["id"] == "effort")
    assert shown["currentValue"] == "high"
    error = await refusal(
        agent,
        "session/set_config_option",
        {"sessionId": sid, "configId": "effort", "value": "max"},
    )
    assert error.code == -32602 and error.data == {"field": "value", "configId": "effort"}
    assert error.message == "unknown effort 'max'; efforts: default, low, medium, high"
