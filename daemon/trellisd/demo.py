"""``trellisd demo``: a newcomer's tour, driving a real daemon subprocess over the protocol.

In a temporary folder holding ``hello.py``, the tour opens a session and, turn by turn:

1. asks what is in the folder: the model calls ``read_file`` and answers;
2. asks to change the greeting: the model calls ``edit_file``, the daemon asks for approval,
   the tour steers the turn while the question waits, then approves; the file on disk changes
   and the steer is answered in the same turn;
3. asks to run it: the model calls ``run_command``; instead of answering the approval the
   tour cancels the turn, and the daemon withdraws its question;
4. branches back to the first turn and takes a different second turn there.

It then prints the session's tree and what it cost, closes the daemon, and starts a new
daemon process that reopens the session by id and reads back its history and steps.

The model is the built-in scripted one playing ``DEMO_SCRIPT``, so the tour runs offline and
always the same way; a price file gives the scripted model a price so the cost line has a
figure. Every claim the tour makes is checked against what the daemon answered; the exit
status is 1 if any did not hold. The temporary folder is removed at the end.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from .client import DaemonClient, DaemonError

GREETING = 'print("hello, trellis")\n'
STEER = "Keep it to one line."

# One model call a line, played in order by the scripted model (TRELLISD_SCRIPT).
DEMO_SCRIPT: list[dict[str, Any]] = [
    {"text": "Let me read it. ", "tool": "read_file", "arguments": {"path": "hello.py"}},
    {"text": 'There is one file, hello.py: a single line that prints "hello, trellis".'},
    {
        "text": "I will change the greeting. ",
        "tool": "edit_file",
        "arguments": {"path": "hello.py", "old": "hello, trellis", "new": "hello, world"},
    },
    {"text": 'Done: hello.py prints "hello, world", and it is still one line, as you asked.'},
    {"text": "Running it. ", "tool": "run_command", "arguments": {"argv": ["python3", "hello.py"]}},
    {"text": "On this branch I only know your first question: hello.py is a one-line greeting."},
]

# USD per million tokens for the scripted model, so that the tour can show a cost.
DEMO_PRICES = {"scripted": {"input": 3.0, "output": 15.0}}

Asker = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class Tour:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.asker: Asker | None = None
        self.withdrawn: list[str] = []
        self.steered: list[dict[str, Any]] = []
        self.streamed: dict[str, dict[int, list[str]]] = {}  # by turn, then step
        self.mid_line = False

    def say(self, line: str) -> None:
        """Print ``line`` on a line of its own, after any reply text streaming."""
        print(f"\n{line}" if self.mid_line else line, flush=True)
        self.mid_line = False

    def claim(self, holds: bool, what: str) -> None:
        self.say(f"  {'ok  ' if holds else 'FAIL'} {what}")
        if not holds:
            self.failures.append(what)

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/token":
            by_step = self.streamed.setdefault(params["turnId"], {})
            by_step.setdefault(params["step"], []).append(params["text"])
            print(params["text"] if self.mid_line else f"< {params['text']}", end="", flush=True)
            self.mid_line = True
        elif method == "session/step" and params["toolCall"] is not None:
            call = params["toolCall"]
            arguments = json.dumps(call["arguments"], ensure_ascii=False)
            self.say(f"  [step {params['step']}: {call['name']} {arguments}]")
            for line in (params["result"] or "").splitlines()[:6]:
                self.say(f"  | {line}")
        elif method == "session/steered":
            self.steered.append(params)
            where = f"joined step {params['step']}" if params["delivered"] else "handed back"
            self.say(f"  [the steer {where}]")
        elif method == "$/cancelRequest":
            self.withdrawn.append(str(params["id"]))
            self.say("  [the daemon withdrew its approval question]")

    async def on_request(self, method: str, params: dict[str, Any]) -> Any:
        if method != "session/requestApproval" or self.asker is None:
            raise DaemonError({"code": -32601, "message": f"the tour does not answer {method}"})
        self.say(f"  [approval asked: {params['summary']}]")
        return await self.asker(params)

    async def turn(self, client: DaemonClient, session_id: str, prompt: str) -> dict[str, Any]:
        self.say(f"\n> {prompt}")
        result: dict[str, Any] = await client.request(
            "session/turn", {"sessionId": session_id, "prompt": prompt}
        )
        tokens = result["tokens"]
        cost = "unknown" if result["cost"] is None else f"${result['cost']:.6f}"
        self.say(
            f"  [{result['outcome']}; {result['steps']} step(s); tokens in {tokens['input']},"
            f" out {tokens['output']}; cost {cost}]"
        )
        if result.get("error"):
            self.say(f"  error: {result['error']}")
        return result

    def streamed_whole(self, result: dict[str, Any]) -> bool:
        """The turn's text streamed in pieces, and its last step's pieces join to its reply."""
        by_step = self.streamed.get(result["turnId"], {})
        pieces = sum(by_step.values(), [])
        last = "".join(by_step[max(by_step)]) if by_step else ""
        return len(pieces) > 1 and last == result["reply"]


async def tour(
    db: str | None, scratch: Path, clients: list[DaemonClient], environ: Mapping[str, str]
) -> int:
    t = Tour()
    workspace = scratch / "workspace"
    workspace.mkdir()
    hello = workspace / "hello.py"
    hello.write_text(GREETING)
    script = scratch / "script.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in DEMO_SCRIPT))
    prices = scratch / "prices.json"
    prices.write_text(json.dumps(DEMO_PRICES))
    store = db or str(scratch / "trellisd.db")
    env = {
        "TRELLISD_PROVIDER": "scripted",
        "TRELLISD_SCRIPT": str(script),
        "TRELLISD_MODEL": "scripted",
        "TRELLISD_PRICES": str(prices),
        # The tour's daemon reads no config file of the user's (its layers, its approval).
        "XDG_CONFIG_HOME": str(scratch / "config"),
    }
    print("model:    the built-in scripted model, playing the tour's script (offline)")
    print(f"store:    {store}\nfolder:   {workspace} (removed at the end)")

    async def start() -> DaemonClient:
        client = await DaemonClient.spawn("--db", store, "--standalone", env={**environ, **env})
        clients.append(client)
        client.on_notification = t.on_notification
        client.on_request = t.on_request
        return client

    async def ready(client: DaemonClient) -> DaemonClient:
        init = await client.initialize()
        print(
            f"daemon:   {init['serverInfo']['name']} {init['serverInfo']['version']},"
            f" pid {client.process.pid}"
        )
        return client

    # The second daemon starts now, so that it has loaded by the time it is needed; it
    # touches the store only once it is initialized, after the first one has exited.
    client, later = await start(), await start()
    await ready(client)
    session = await client.request("session/open", {"root": str(workspace), "title": "demo"})
    session_id = session["sessionId"]
    print(f"session:  {session_id}")

    # 1. A tool call: the model reads the file before it answers.
    first = await t.turn(client, session_id, "What is in this folder?")
    t.claim(first["outcome"] == "finished", "the turn finished")
    t.claim(t.streamed_whole(first), "the text streamed in pieces; the reply is what it said last")
    steps = (await client.request("run/steps", {"runId": first["runId"]}))["steps"]
    t.claim(
        [s["decision"] for s in steps] == ["tool", "reply"]
        and steps[0]["toolCall"]["name"] == "read_file"
        and steps[0]["result"] == GREETING,
        "the model called read_file and saw the file",
    )

    # 2. An approval, a steer sent while the question waits, and a file written.
    async def steer_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        t.say(f"  [steer: {STEER}]")
        queued = await client.request("session/steer", {"sessionId": session_id, "text": STEER})
        t.claim(queued["queued"], "the steer was queued while the turn waited for approval")
        t.say("  [answered: allow]")
        return {"decision": "allow"}

    t.asker = steer_then_allow
    second = await t.turn(client, session_id, "Make it greet the world instead.")
    t.claim(second["outcome"] == "finished", "the turn finished")
    on_disk = hello.read_text()
    print(f"\nhello.py now reads:\n  {on_disk.rstrip()}")
    t.claim(on_disk == 'print("hello, world")\n', "the approved edit is on disk")
    t.claim(
        [(s["text"], s["delivered"]) for s in t.steered] == [(STEER, True)],
        "the steer joined the turn's next step",
    )

    # 3. A cancel: the model asks to run a command; the tour cancels instead of answering.
    asked = asyncio.Event()

    async def never_answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()  # until the daemon withdraws the question
        raise AssertionError("unreachable")

    t.asker = never_answer
    running = asyncio.ensure_future(t.turn(client, session_id, "Run it."))
    waiting = asyncio.ensure_future(asked.wait())
    await asyncio.wait([running, waiting], return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if asked.is_set():
        t.say("  [not answering: cancelling the turn instead]")
        cancel = await client.request("session/cancel", {"sessionId": session_id})
        t.claim(cancel["cancelled"], "session/cancel stopped the running turn")
    third = await running
    t.claim(third["outcome"] == "cancelled", "the turn ended cancelled")
    t.claim(len(t.withdrawn) == 1, "the daemon withdrew the approval question")
    steps = (await client.request("run/steps", {"runId": third["runId"]}))["steps"]
    t.claim(
        bool(steps) and steps[-1]["decision"] == "cancelled" and steps[-1]["toolCall"] is not None,
        "the command never ran: its step is recorded as cancelled",
    )

    # 4. A branch: back to the first turn, and a different second turn from there.
    print(f"\nbranching back to the first turn ({first['turnId']})")
    branched = await client.request(
        "session/branch", {"sessionId": session_id, "turnId": first["turnId"]}
    )
    t.claim(branched["head"] == first["turnId"], "the head moved to the first turn")
    other = await t.turn(client, session_id, "Describe it in one line.")
    tree = (await client.request("session/turns", {"sessionId": session_id}))["turns"]
    print("\nthe session's tree:")
    depth: dict[str | None, int] = {None: 0}
    for turn in tree:
        depth[turn["turnId"]] = depth[turn["parentTurnId"]] + 1
        indent = "  " * depth[turn["turnId"]]
        print(f"{indent}{turn['turnId'][:10]}… {turn['prompt']} [{turn['outcome']}]")
    t.claim(
        [x["turnId"] for x in tree]
        == [first["turnId"], second["turnId"], third["turnId"], other["turnId"]]
        and other["turnId"] != second["turnId"],
        "the abandoned branch is still in the tree",
    )
    costs = [x["cost"] for x in tree]
    tokens_in = sum(x["tokens"]["input"] or 0 for x in tree)
    tokens_out = sum(x["tokens"]["output"] or 0 for x in tree)
    total = sum(c for c in costs if c is not None)
    print(
        f"\ncost:     {len(tree)} turns, {tokens_in} tokens in, {tokens_out} out: ${total:.6f}"
        f" (the tour prices the scripted model at ${DEMO_PRICES['scripted']['input']:g} in,"
        f" ${DEMO_PRICES['scripted']['output']:g} out per million tokens)"
    )
    t.claim(None not in costs and total > 0, "every turn has a cost")
    code = await client.close()
    t.claim(code == 0, "the daemon exited cleanly after shutdown")

    # 5. A new process reopens the session by id: everything above was in the store.
    print("\na new daemon process reopens the session by id")
    again = await ready(later)
    reopened = await again.request("session/reopen", {"sessionId": session_id})
    for turn in reopened["history"]:
        print(f"  > {turn['prompt']}\n  < {turn['reply']}")
    t.claim(
        [x["turnId"] for x in reopened["history"]] == [first["turnId"], other["turnId"]],
        "its history is the first turn, then the branch's turn",
    )
    steps = (await again.request("run/steps", {"runId": second["runId"]}))["steps"]
    t.claim(
        [s["prompt"] for s in steps] == ["Make it greet the world instead.", STEER],
        "the edit turn's steps, steer included, were read back from the store",
    )
    await again.close()

    if t.failures:
        print(f"\n{len(t.failures)} claim(s) did not hold", file=sys.stderr)
        return 1
    print("\nall claims held")
    return 0


async def _run(db: str | None, environ: Mapping[str, str]) -> int:
    clients: list[DaemonClient] = []
    with tempfile.TemporaryDirectory(prefix="trellisd-demo-") as scratch:
        try:
            return await tour(db, Path(scratch), clients, environ)
        finally:
            for client in clients:
                if client.process.returncode is None:
                    client.process.kill()
                    await client.close()


def run_demo(db: str | None, environ: Mapping[str, str]) -> int:
    """The tour; its daemons start in ``environ`` (the command's) with the tour's provider."""
    try:
        return asyncio.run(_run(db, environ))
    except (DaemonError, ConnectionError) as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the tour's daemons are stopped and its folder removed
        print("\ndemo interrupted", file=sys.stderr)
        return 130
