"""A session's life over real pipes: fork, rename, instructions, close, delete, and the
session's feed of commits, with their error cases."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from tests.fixtures.driver import OPEN, Daemon, DaemonFactory, open_session, turn, write
from tests.fixtures.model_server import ModelServer

CONFLICT, NOT_FOUND, INVALID, LEASE_HELD = -32020, -32010, -32602, -32030


async def prompts(daemon: Daemon, session_id: str) -> list[str]:
    history = await daemon.call("session/history", {"sessionId": session_id})
    return [t["prompt"] for t in history["turns"]]


async def test_a_fork_goes_on_from_a_turn_and_leaves_its_origin_alone(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    origin = await open_session(daemon, workspace, title="the first line")
    one = await turn(daemon, origin, "one")
    two = await turn(daemon, origin, "two")
    await turn(daemon, origin, "three")

    fork = await daemon.call(
        "session/fork", {"sessionId": origin["sessionId"], "turnId": two["turnId"]}
    )

    assert fork["sessionId"] != origin["sessionId"]
    assert fork["forkedFrom"] == {"sessionId": origin["sessionId"], "turnId": two["turnId"]}
    assert fork["title"] == "the first line" and fork["root"] == origin["root"]
    assert await prompts(daemon, fork["sessionId"]) == ["one", "two"]
    model.reply("forked reply")
    await turn(daemon, fork, "two and a half")
    assert model.user_messages() == ["one", "two", "two and a half"]
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "assistant"]
    assert sent == ["echo: one", "echo: two"]
    assert await prompts(daemon, origin["sessionId"]) == ["one", "two", "three"]

    empty = await daemon.call("session/fork", {"sessionId": origin["sessionId"], "turnId": None})
    assert empty["head"] is None and empty["forkedFrom"]["turnId"] is None
    await turn(daemon, empty, "afresh")
    assert model.user_messages() == ["afresh"]

    # The lineage is shown by session/list and by a reopen in another process.
    listed = (await daemon.call("session/list", {}))["sessions"]
    lineage = {s["sessionId"]: s["forkedFrom"] for s in listed}
    assert lineage[fork["sessionId"]] == fork["forkedFrom"]
    assert lineage[origin["sessionId"]] is None
    reopened = await daemon.call("session/reopen", {"sessionId": fork["sessionId"]})
    assert reopened["forkedFrom"] == fork["forkedFrom"]
    assert one["turnId"] not in {t["turnId"] for t in reopened["history"]}


async def test_a_fork_after_a_step_goes_on_from_that_step(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    origin = await open_session(daemon, workspace, policy=OPEN)
    model.reply("Let me write the first file.", tool_calls=[write("a.txt", "first\n")])
    model.reply("Now the second one.", tool_calls=[write("b.txt", "second\n")])
    model.reply("Both files are written.")
    whole = await turn(daemon, origin, "write two files")
    assert whole["steps"] == 3

    fork = await daemon.call(
        "session/fork", {"sessionId": origin["sessionId"], "turnId": whole["turnId"], "step": 1}
    )

    history = (await daemon.call("session/history", {"sessionId": fork["sessionId"]}))["turns"]
    copy = history[-1]
    assert copy["turnId"] == fork["head"] and copy["prompt"] == "write two files"
    assert copy["outcome"] == "forked"
    assert copy["reply"] == "Let me write the first file."
    steps = (await daemon.call("run/steps", {"runId": copy["runId"]}))["steps"]
    assert [s["text"] for s in steps] == ["Let me write the first file."]
    changed = await daemon.call("turn/changes", {"turnId": copy["turnId"]})
    assert [f["path"] for f in changed["files"]] == ["a.txt"]
    assert (await daemon.call("session/verify", {"sessionId": fork["sessionId"]}))["ok"]

    model.reply("Going on from the first file.")
    await turn(daemon, fork, "go on")
    sent = json.dumps(model.requests[-1]["messages"])
    assert "Let me write the first file." in sent
    assert "Now the second one." not in sent and "Both files are written." not in sent
    assert model.user_messages()[-1] == "go on"
    # The origin keeps its whole turn.
    kept = (await daemon.call("session/history", {"sessionId": origin["sessionId"]}))["turns"]
    assert kept[-1]["outcome"] == "finished" and "Both files are written." in kept[-1]["reply"]

    nothing = await daemon.call(
        "session/fork", {"sessionId": origin["sessionId"], "turnId": whole["turnId"], "step": 0}
    )
    bare = (await daemon.call("session/history", {"sessionId": nothing["sessionId"]}))["turns"]
    assert bare[-1]["outcome"] == "forked" and bare[-1]["reply"] == ""
    for params, why in (
        ({"turnId": whole["turnId"], "step": 4}, "past the last step"),
        ({"turnId": whole["turnId"], "step": -1}, "negative"),
        ({"turnId": None, "step": 1}, "no turn to cut"),
    ):
        refused = await daemon.error("session/fork", {"sessionId": origin["sessionId"], **params})
        assert refused.code == INVALID and refused.data["field"] == "step", why


async def test_a_fork_stays_whole_when_its_origin_is_deleted(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    origin = await open_session(daemon, workspace)
    await turn(daemon, origin, "one")
    two = await turn(daemon, origin, "two")
    fork = await daemon.call(
        "session/fork", {"sessionId": origin["sessionId"], "turnId": two["turnId"]}
    )

    await daemon.call("session/delete", {"sessionId": origin["sessionId"]})
    await daemon.client.shutdown_session()

    other = await spawn()
    reopened = await other.call("session/reopen", {"sessionId": fork["sessionId"]})
    assert [t["prompt"] for t in reopened["history"]] == ["one", "two"]
    assert [t["reply"] for t in reopened["history"]] == ["echo: one", "echo: two"]
    assert reopened["forkedFrom"]["sessionId"] == origin["sessionId"]
    await turn(other, reopened, "three")
    assert model.user_messages() == ["one", "two", "three"]


async def test_fork_errors(daemon: Daemon, model: ModelServer, workspace: Path) -> None:
    a = await open_session(daemon, workspace)
    b = await open_session(daemon, workspace)
    in_b = await turn(daemon, b, "b's turn")

    unknown = await daemon.error("session/fork", {"sessionId": "s-nope", "turnId": None})
    assert unknown.code == NOT_FOUND and unknown.data["sessionId"] == "s-nope"
    other = await daemon.error(
        "session/fork", {"sessionId": a["sessionId"], "turnId": in_b["turnId"]}
    )
    assert other.code == INVALID and other.data["turnId"] == in_b["turnId"]
    missing = await daemon.error("session/fork", {"sessionId": a["sessionId"]})
    assert missing.code == INVALID and missing.data["field"] == "turnId"

    held = model.reply("slow", hold=threading.Event())
    running = asyncio.ensure_future(turn(daemon, a, "a long one"))
    await asyncio.to_thread(held.served.wait, 60)
    head = (await daemon.call("session/reopen", {"sessionId": a["sessionId"]}))["head"]
    busy = await daemon.error("session/fork", {"sessionId": a["sessionId"], "turnId": head})
    assert busy.code == CONFLICT and busy.data["turnId"] == head
    # A fork from a finished turn works while the origin runs another.
    earlier = await daemon.call("session/fork", {"sessionId": a["sessionId"], "turnId": None})
    assert earlier["forkedFrom"]["sessionId"] == a["sessionId"]
    held.release()
    assert (await running)["outcome"] == "finished"


async def test_rename_gives_the_session_a_new_title(daemon: Daemon, workspace: Path) -> None:
    session = await open_session(daemon, workspace, title="old")

    renamed = await daemon.call(
        "session/rename", {"sessionId": session["sessionId"], "title": "new name"}
    )

    assert renamed["title"] == "new name"
    listed = (await daemon.call("session/list", {}))["sessions"]
    assert [s["title"] for s in listed] == ["new name"]
    blank = await daemon.error("session/rename", {"sessionId": session["sessionId"], "title": " "})
    assert blank.code == INVALID and blank.data["field"] == "title"
    unknown = await daemon.error("session/rename", {"sessionId": "s-nope", "title": "x"})
    assert unknown.code == NOT_FOUND


async def test_instructions_and_agents_md_reach_the_model_on_every_turn(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(
        daemon, workspace, instructions="Answer in French.", colour="ignored"
    )
    assert session["instructions"] == "Answer in French."
    (workspace / "AGENTS.md").write_text("Run make test before you say you are done.\n")

    first = await turn(daemon, session, "one")
    system = model.requests[-1]["messages"][0]
    assert system["role"] == "system"
    assert "Answer in French." in system["content"]
    assert "Run make test before you say you are done." in system["content"]
    events = (await daemon.call("run/events", {"runId": first["runId"]}))["events"]
    model_event = next(e for e in events if e["kind"] == "model")
    assert [f["path"] for f in model_event["detail"]["instructionFiles"]] == ["AGENTS.md"]

    changed = await daemon.call(
        "session/instructions", {"sessionId": session["sessionId"], "instructions": "Be brief."}
    )
    assert changed["instructions"] == "Be brief."
    second = await turn(daemon, session, "two")
    assert "Be brief." in model.requests[-1]["messages"][0]["content"]
    assert "French" not in model.requests[-1]["messages"][0]["content"]
    events = (await daemon.call("run/events", {"runId": second["runId"]}))["events"]
    assert events[0]["kind"] == "instructions"
    assert events[0]["detail"] == {"instructions": "Be brief."}

    cleared = await daemon.call(
        "session/instructions", {"sessionId": session["sessionId"], "instructions": None}
    )
    assert cleared["instructions"] is None
    missing = await daemon.error("session/instructions", {"sessionId": session["sessionId"]})
    assert missing.code == INVALID and missing.data["field"] == "instructions"
    unknown = await daemon.error(
        "session/instructions", {"sessionId": "s-nope", "instructions": "x"}
    )
    assert unknown.code == NOT_FOUND


async def test_close_and_delete_are_refused_while_a_turn_runs(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    held = model.reply("slow", hold=threading.Event())
    running = asyncio.ensure_future(turn(daemon, session, "a long one"))
    await asyncio.to_thread(held.served.wait, 60)

    for method in ("session/close", "session/delete"):
        refused = await daemon.error(method, {"sessionId": session["sessionId"]})
        assert refused.code == CONFLICT and refused.data["sessionId"] == session["sessionId"]

    held.release()
    assert (await running)["outcome"] == "finished"
    assert await prompts(daemon, session["sessionId"]) == ["a long one"]


async def test_run_events_come_a_page_at_a_time(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    await daemon.call("session/instructions", {"sessionId": sid, "instructions": "Be brief."})
    run = (await turn(daemon, session, "one"))["runId"]
    everything = await daemon.call("run/events", {"runId": run})
    assert [e["kind"] for e in everything["events"]] == ["instructions", "model"]
    assert "next" not in everything

    first = await daemon.call("run/events", {"runId": run, "limit": 1})
    rest = await daemon.call("run/events", {"runId": run, "after": first["next"], "limit": 5})
    assert first == {"events": everything["events"][:1], "next": 1}
    assert rest == {"events": everything["events"][1:], "next": None}
    assert await daemon.call("run/events", {"runId": run, "after": 2}) == {
        "events": [],
        "next": None,
    }
    bad = await daemon.error("run/events", {"runId": run, "after": -1})
    assert bad.code == INVALID and bad.data["field"] == "after"
    unknown = await daemon.error("run/events", {"runId": "r-nope", "limit": 1})
    assert unknown.code == NOT_FOUND
