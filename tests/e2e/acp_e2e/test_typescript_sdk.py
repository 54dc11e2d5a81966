"""The TypeScript ACP SDK's ``ClientSideConnection`` drives ``trellisd acp`` (the script
``tests/acp_client/drive.mjs``): initialize, new, prompt with streamed chunks, a tool call
needing permission, cancel, list, and after a restart load with replay, resume, a prompt
and fork."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
from pathlib import Path

import pytest

from tests import acp_schema
from tests.e2e.acp_e2e.conftest import agent_env
from tests.fixtures.model_server import ModelServer

CLIENT = Path(__file__).parents[2] / "acp_client"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_the_typescript_sdk_drives_a_whole_session(
    model: ModelServer, workspace: Path, tmp_path: Path, acp_mode: dict[str, str]
) -> None:
    hello = model.reply("hi from the model", hold=threading.Event(), hold_at=1)
    model.reply(
        "writing",
        tool_calls=[{"name": "write_file", "arguments": {"path": "t.txt", "content": "ts\n"}}],
    )
    model.reply("written")
    held = model.reply("slow words come here", hold=threading.Event(), hold_at=1)
    model.reply("back again")
    sent = tmp_path / "sent.jsonl"
    env = agent_env(tmp_path / "home", model, **acp_mode)
    env["PYTHONPATH"] = str(Path(__file__).parents[3] / "daemon")
    process = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENT / "drive.mjs"),
        sys.executable,
        str(tmp_path / "store" / "trellisd.db"),
        str(workspace),
        str(sent),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=CLIENT,
    )
    assert process.stderr is not None
    while (line := await process.stderr.readline()) != b"streaming\n":
        assert line, "the client never saw the first piece of the reply"
    hello.release()  # the first piece reached the client while the reply was held
    await asyncio.to_thread(held.dropped.wait)  # the cancel hung up on the held reply
    held.release()
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["protocolVersion"] == 1 and seen["capabilities"]["loadSession"]
    assert seen["hello"] == {"stopReason": "end_turn", "text": "hi from the model"}
    assert seen["firstChunk"] == "hi "
    assert seen["write"] == {
        "stopReason": "end_turn",
        "asked": 1,
        "statuses": ["pending", "in_progress", "completed"],
    }
    assert (workspace / "t.txt").read_text() == "ts\n"
    assert seen["cancel"] == "cancelled"
    assert seen["listed"] == [seen["sessionId"]]
    assert seen["replayed"] == ["hello", "write", "slow"]
    assert seen["afterRestart"] == "end_turn"
    assert seen["fork"] != seen["sessionId"]
    for line in sent.read_text().splitlines():
        acp_schema.check(json.loads(line))
