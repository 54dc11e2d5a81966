"""Kill the daemon at random points across many turns: every committed step stays, and the
store stays sound. ``TRELLISD_STRESS_KILLS`` sets how many kills (default 25)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from pathlib import Path

import apsw

from trellisd.client import DaemonClient

SCRIPT = [
    {"tool": "list_dir", "arguments": {"path": "."}, "text": "Looking around. ", "delayMs": 5},
    {"tool": "read_file", "arguments": {"path": "README.md"}, "text": "Reading. ", "delayMs": 5},
    {"text": "All done with this one, here is a longer answer to stream.", "delayMs": 8},
]


def committed(db: Path) -> set[tuple[str, int, str, str]]:
    con = apsw.Connection(str(db))
    try:
        return {
            (r, n, d, t) for r, n, d, t in con.execute("SELECT run_id, n, decision, text FROM step")
        }
    finally:
        con.close()


async def test_random_kills_lose_no_committed_step(tmp_path: Path) -> None:
    kills = int(os.environ.get("TRELLISD_STRESS_KILLS", "25"))
    rng = random.Random(int(os.environ.get("TRELLISD_STRESS_SEED", "7")))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "README.md").write_text("# stress\n")
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps(line) for line in SCRIPT))
    db = tmp_path / "stress.db"
    env = {"TRELLISD_PROVIDER": "scripted", "TRELLISD_SCRIPT": str(script)}
    seen: set[tuple[str, int, str, str]] = set()
    session_id = None
    for _ in range(kills):
        client = await DaemonClient.spawn("--db", str(db), env=env)
        await client.initialize()
        if session_id is None:
            session_id = (await client.request("session/open", {"root": str(workspace)}))[
                "sessionId"
            ]
        else:
            await client.request("session/reopen", {"sessionId": session_id})
        for _turn in range(rng.randint(0, 2)):
            await client.request("session/turn", {"sessionId": session_id, "prompt": "go"})
        pending = asyncio.ensure_future(
            client.request("session/turn", {"sessionId": session_id, "prompt": "go"})
        )
        await asyncio.sleep(rng.uniform(0, 0.25))
        os.kill(client.process.pid, signal.SIGKILL)
        await client.process.wait()
        pending.cancel()
        client._reader.cancel()
        now = committed(db)
        assert seen <= now, f"committed steps vanished: {seen - now}"
        seen = now

    client = await DaemonClient.spawn("--db", str(db), env=env)
    await client.initialize()
    turns = (await client.request("session/turns", {"sessionId": session_id}))["turns"]
    assert await client.close() == 0
    assert all(t["outcome"] != "running" for t in turns)
    assert any(t["outcome"] == "interrupted" for t in turns)
    assert seen <= committed(db)
    con = apsw.Connection(str(db))
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    print(
        f"{kills} kills, {len(turns)} turns, {len(seen)} steps kept, "
        f"{sum(t['outcome'] == 'interrupted' for t in turns)} interrupted"
    )
