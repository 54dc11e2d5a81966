"""``trellisd demo``: a newcomer's tour, driving a real daemon subprocess over the protocol.

It opens a session in a temporary workspace, runs two turns whose tokens print as they
stream, branches back to the first turn and takes a different second turn, then starts a
new daemon process that reopens the session by id and shows its history. It uses the
configured provider when one is set and otherwise the built-in scripted model. The exit
status is non-zero if any of those claims did not hold.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .client import DaemonClient, RpcError
from .config import provider_from_env


class Tour:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.pieces: dict[str, list[str]] = {}

    def claim(self, holds: bool, what: str) -> None:
        print(f"  {'ok  ' if holds else 'FAIL'} {what}")
        if not holds:
            self.failures.append(what)

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/token":
            self.pieces.setdefault(params["turnId"], []).append(params["text"])
            print(params["text"], end="", flush=True)

    async def turn(self, client: DaemonClient, session_id: str, prompt: str) -> dict[str, Any]:
        print(f"\n> {prompt}\n< ", end="", flush=True)
        result: dict[str, Any] = await client.request(
            "session/turn", {"sessionId": session_id, "prompt": prompt}
        )
        print()
        pieces = self.pieces.get(result["turnId"], [])
        tokens = result["tokens"]
        print(
            f"  [{result['outcome']}; {len(pieces)} pieces streamed; tokens in"
            f" {tokens['input']}, out {tokens['output']}]"
        )
        if result.get("error"):
            print(f"  error: {result['error']}")
        self.claim(result["outcome"] == "finished", "the turn finished")
        self.claim(
            len(pieces) > 1 and "".join(pieces) == result["reply"],
            "its reply arrived as a stream of pieces that join to the reply",
        )
        return result


async def tour(db: str | None) -> int:
    t = Tour()
    scratch = Path(tempfile.mkdtemp(prefix="trellisd-demo-"))
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / "hello.py").write_text('print("hello, trellis")\n')
    store = db or str(scratch / "trellisd.db")
    env: dict[str, str] = {}
    settings = provider_from_env(os.environ)
    if settings.name is None:
        env["TRELLISD_PROVIDER"] = "scripted"
        print(
            "provider: the built-in scripted model (set TRELLISD_PROVIDER or an API key to"
            " use a real one)"
        )
    else:
        print(f"provider: {settings.name}, model {settings.effective_model}")
    print(f"store:    {store}\nfolder:   {workspace}")

    client = await DaemonClient.spawn("--db", store, env=env)
    client.on_notification = t.on_notification
    init = await client.initialize()
    print(
        f"daemon:   {init['serverInfo']['name']} {init['serverInfo']['version']}, pid"
        f" {client.process.pid}"
    )
    session = await client.request("session/open", {"root": str(workspace), "title": "demo"})
    session_id = session["sessionId"]
    print(f"session:  {session_id}")

    first = await t.turn(client, session_id, "What is in this folder?")
    second = await t.turn(client, session_id, "Make it greet the world instead.")
    print(f"\nbranching back to the first turn ({first['turnId']})")
    branched = await client.request(
        "session/branch", {"sessionId": session_id, "turnId": first["turnId"]}
    )
    t.claim(branched["head"] == first["turnId"], "the head moved to the first turn")
    other = await t.turn(client, session_id, "Add a docstring instead.")
    tree = await client.request("session/turns", {"sessionId": session_id})
    print("\nthe session's tree:")
    for turn in tree["turns"]:
        parent = turn["parentTurnId"] or "(start)"
        print(f"  {turn['turnId']} <- {parent}: {turn['prompt']}")
    t.claim(
        {x["turnId"] for x in tree["turns"]}
        == {first["turnId"], second["turnId"], other["turnId"]},
        "the abandoned turn is still in the tree",
    )
    code = await client.close()
    t.claim(code == 0, "the daemon exited cleanly after shutdown")

    print("\na new daemon process reopens the session by id")
    again = await DaemonClient.spawn("--db", store, env=env)
    await again.initialize()
    reopened = await again.request("session/reopen", {"sessionId": session_id})
    for turn in reopened["history"]:
        print(f"  > {turn['prompt']}\n  < {turn['reply']}")
    t.claim(
        [x["turnId"] for x in reopened["history"]] == [first["turnId"], other["turnId"]],
        "its history is the first turn, then the branch's turn",
    )
    await again.close()

    if t.failures:
        print(f"\n{len(t.failures)} claim(s) did not hold", file=sys.stderr)
        return 1
    print("\nall claims held")
    return 0


def run_demo(db: str | None) -> int:
    try:
        return asyncio.run(tour(db))
    except (RpcError, ConnectionError) as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
