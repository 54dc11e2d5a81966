"""The ACP modes carry the walls: ``auto`` is approval ``auto`` inside ``workspace-write``
walls, ``read-only`` approval ``never`` inside ``read-only`` walls, ``ask`` the session's own;
an escalation is asked with no "always" answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from trellisd.acp.agent import TrellisAgent
from trellisd.acp.notifier import AcpNotifier
from trellisd.records import TurnRef
from trellisd.vocabulary import Decision


async def walls_of(agent: TrellisAgent, session_id: str) -> tuple[str, str]:
    session = await agent.app.sessions.get(session_id)
    policy = await agent.app.sessions.policies.of(session)
    return policy.effective_approval, policy.effective_sandbox


@pytest.mark.parametrize(
    ("mode", "approval", "sandbox"),
    [
        ("auto", "auto", "workspace-write"),
        ("read-only", "never", "read-only"),
        ("ask", "ask", "workspace-write"),
        ("plan", "plan", "workspace-write"),
        ("acceptEdits", "acceptEdits", "workspace-write"),
    ],
)
async def test_a_mode_sets_the_approval_and_the_walls(
    agent: TrellisAgent, root: str, mode: str, approval: str, sandbox: str
) -> None:
    await agent.dispatch("initialize", {"protocolVersion": 1}, False)
    sid = (await agent.dispatch("session/new", {"cwd": root, "mcpServers": []}, False))["sessionId"]
    await agent.dispatch("session/set_mode", {"sessionId": sid, "modeId": "read-only"}, False)
    await agent.dispatch("session/set_mode", {"sessionId": sid, "modeId": mode}, False)

    assert await walls_of(agent, sid) == (approval, sandbox)
    state = await agent.dispatch(
        "session/resume", {"sessionId": sid, "cwd": root, "mcpServers": []}, False
    )
    assert state["modes"]["currentModeId"] == mode


class Peer:
    """The ACP client's side of ``session/request_permission``: what it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def request(self, method: str, params: Any) -> asyncio.Future[Any]:
        self.asked.append(params)
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        answered.set_result({"outcome": {"outcome": "selected", "optionId": "allow"}})
        return answered


async def test_an_escalation_is_asked_with_no_always_answer(tmp_path: Path) -> None:
    notifier = AcpNotifier(lambda: None)
    peer = Peer()
    notifier.peer = peer
    ref = TurnRef("s-1", "t-1", "r-1")
    notifier.follow("s-1", str(tmp_path))
    escalation = {
        "tool": "run_command",
        "arguments": {"argv": ["curl", "https://pypi.org"], "escalate": True, "reason": "fetch"},
        "kind": "escalate",
        "command": "curl https://pypi.org",
        "reason": "fetch",
        "summary": "run_command asks to run curl https://pypi.org OUTSIDE the walls: fetch",
    }
    ordinary = {**escalation, "kind": "tool", "summary": "run_command wants to exec ls"}

    assert await notifier.ask_approval(ref, escalation) == Decision.ALLOW
    assert await notifier.ask_approval(ref, ordinary) == Decision.ALLOW

    once, usual = (asked["options"] for asked in peer.asked)
    assert [o["kind"] for o in once] == ["allow_once", "reject_once"]
    assert [o["kind"] for o in usual] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert "OUTSIDE the walls: fetch" in peer.asked[0]["toolCall"]["title"]


class Told:
    """The ACP client's side of ``session/update``: what it was sent."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def notify(self, method: str, params: Any) -> None:
        self.updates.append(params)

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError("not asked")


async def test_a_mode_set_elsewhere_is_a_current_mode_update_for_a_followed_session() -> None:
    notifier, told = AcpNotifier(lambda: None), Told()
    notifier.connect(told)
    notifier.follow("s-1", "/root")

    notifier.mode_changed("s-1", "plan")  # a native window's session/mode
    notifier.mode_changed("s-1", "all")  # native only: ACP shows it as auto
    notifier.mode_changed("s-1", "never")
    notifier.mode_changed("s-2", "plan")  # a session this client does not follow
    notifier.follow("s-child", "")  # a child session it only hears of
    notifier.mode_changed("s-child", "plan")
    await notifier.flush()

    assert [(u["sessionId"], u["update"]) for u in told.updates] == [
        ("s-1", {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        for mode in ("plan", "auto", "read-only")
    ]
    assert notifier.outbox is not None
    await notifier.outbox.close()


async def test_set_mode_tells_its_own_client_once(agent: TrellisAgent, root: str) -> None:
    told = Told()
    agent.notifier.connect(told)
    await agent.dispatch("initialize", {"protocolVersion": 1}, False)
    sid = (await agent.dispatch("session/new", {"cwd": root, "mcpServers": []}, False))["sessionId"]
    told.updates.clear()

    await agent.dispatch("session/set_mode", {"sessionId": sid, "modeId": "plan"}, False)

    modes = [u for u in told.updates if u["update"]["sessionUpdate"] == "current_mode_update"]
    assert modes == [
        {
            "sessionId": sid,
            "update": {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
        }
    ]
    assert agent.notifier.outbox is not None
    await agent.notifier.outbox.close()
