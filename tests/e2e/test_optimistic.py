"""Optimistic writes between processes: two daemons racing turns on one session lose none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Daemon, DaemonFactory

SCRIPTED = {"TRELLISD_PROVIDER": "scripted"}  # echoes each prompt: fast and offline


async def turn(daemon: Daemon, session_id: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return await daemon.call("session/turn", {"sessionId": session_id, "prompt": prompt, **extra})


@pytest.mark.slow
async def test_two_daemons_racing_turns_on_one_session_lose_none(
    spawn: DaemonFactory, workspace: Path
) -> None:
    """100 rounds, each daemon sending a turn at once with the head it last saw: each turn
    lands exactly once, in the session or in a fork of it, and every log verifies."""
    daemons = {"a": await spawn(env=SCRIPTED)}
    sid = (await daemons["a"].call("session/open", {"root": str(workspace)}))["sessionId"]
    daemons["b"] = await spawn(db=daemons["a"].db, env=SCRIPTED)
    seen: dict[str, str | None] = {"a": None, "b": None}
    results: dict[str, dict[str, Any]] = {}

    async def one(name: str, round_: int) -> None:
        prompt = f"{name}-{round_}"
        result = await turn(daemons[name], sid, prompt, expectHead=seen[name], onConflict="fork")
        results[prompt] = result
        seen[name] = (await daemons[name].call("session/reopen", {"sessionId": sid}))["head"]

    for round_ in range(100):
        await asyncio.gather(one("a", round_), one("b", round_))

    reader = daemons["a"]
    assert len(results) == 200
    assert all(r["outcome"] == "finished" for r in results.values())
    assert len({r["turnId"] for r in results.values()}) == 200
    own = await reader.call("session/turns", {"sessionId": sid})
    in_session = {t["turnId"]: t["prompt"] for t in own["turns"]}
    forks = {r["sessionId"] for r in results.values() if "sessionId" in r}
    for prompt, result in results.items():
        if "sessionId" not in result:
            assert in_session[result["turnId"]] == prompt
            continue
        assert result["forkedFrom"]["sessionId"] == sid
        fork = await reader.call("session/turns", {"sessionId": result["sessionId"]})
        mine = [t for t in fork["turns"] if t["turnId"] == result["turnId"]]
        assert [t["prompt"] for t in mine] == [prompt]
    assert len(in_session) == sum("sessionId" not in r for r in results.values())
    for session_id in (sid, *forks):
        verdict = await reader.call("session/verify", {"sessionId": session_id})
        assert verdict["ok"] is True, verdict
