"""Optimistic writes: ``expectHead`` on session/turn and session/branch refuses a stale head
(-32022, naming the real one) and does nothing; ``onConflict: "fork"`` runs the turn in a
fork instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fixtures.driver import Daemon, DaemonFactory

SCRIPTED = {"TRELLISD_PROVIDER": "scripted"}  # echoes each prompt: fast and offline


async def turn(daemon: Daemon, session_id: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return await daemon.call("session/turn", {"sessionId": session_id, "prompt": prompt, **extra})


async def test_a_stale_head_is_refused_and_nothing_is_done(
    spawn: DaemonFactory, workspace: Path
) -> None:
    daemon = await spawn(env=SCRIPTED)
    sid = (await daemon.call("session/open", {"root": str(workspace)}))["sessionId"]
    first = await turn(daemon, sid, "one", expectHead=None)
    second = await turn(daemon, sid, "two", expectHead=first["turnId"])

    stale = await daemon.error(
        "session/turn", {"sessionId": sid, "prompt": "three", "expectHead": first["turnId"]}
    )
    branch = await daemon.error(
        "session/branch", {"sessionId": sid, "turnId": None, "expectHead": None}
    )

    assert stale.code == branch.code == -32022
    assert stale.data["head"] == branch.data["head"] == second["turnId"]
    assert stale.data["expectHead"] == first["turnId"]
    turns = await daemon.call("session/turns", {"sessionId": sid})
    assert [t["prompt"] for t in turns["turns"]] == ["one", "two"]
    moved = await daemon.call(
        "session/branch",
        {"sessionId": sid, "turnId": first["turnId"], "expectHead": second["turnId"]},
    )
    assert moved["head"] == first["turnId"]


async def test_on_conflict_the_turn_runs_in_a_fork_taken_at_the_expected_head(
    spawn: DaemonFactory, workspace: Path
) -> None:
    daemon = await spawn(env=SCRIPTED)
    sid = (await daemon.call("session/open", {"root": str(workspace)}))["sessionId"]
    first = await turn(daemon, sid, "one")
    await turn(daemon, sid, "two")

    forked = await turn(daemon, sid, "other", expectHead=first["turnId"], onConflict="fork")

    assert forked["outcome"] == "finished" and forked["sessionId"] != sid
    assert forked["forkedFrom"] == {"sessionId": sid, "turnId": first["turnId"]}
    fork = await daemon.call("session/reopen", {"sessionId": forked["sessionId"]})
    assert fork["forkedFrom"] == forked["forkedFrom"]
    assert [t["prompt"] for t in fork["history"]] == ["one", "other"]
    assert fork["history"][-1]["turnId"] == forked["turnId"]
    # the window that asked for the turn followed it into the fork: it saw its steps
    assert [s["runId"] for s in daemon.steps][-1] == forked["runId"]
    origin = await daemon.call("session/history", {"sessionId": sid})
    assert [t["prompt"] for t in origin["turns"]] == ["one", "two"]
    for session_id in (sid, forked["sessionId"]):
        assert (await daemon.call("session/verify", {"sessionId": session_id}))["ok"] is True
