"""The ``task`` tool: a child session the model starts, run as an ordinary session under the
parent's policy, its reply the call's result, over real pipes against the loopback model
server."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from tests.fixtures.driver import (
    OPEN,
    Daemon,
    DaemonFactory,
    answer_approvals,
    open_session,
    turn,
    write,
)
from tests.fixtures.git_repo import make_repo
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import until

TASKS = {"task": {"enabled": True}}
SMALL_OUTPUT = {"maxTokens": 100}  # the output allowance of every call


def task(prompt: str, **bounds: Any) -> dict[str, Any]:
    return {"name": "task", "arguments": {"prompt": prompt, **bounds}}


def offered(request: dict[str, Any]) -> list[str]:
    """The names of the tools a model request offered."""
    return [t["function"]["name"] for t in request.get("tools", [])]


async def children(daemon: Daemon, parent: dict[str, Any]) -> list[dict[str, Any]]:
    sessions = (await daemon.call("session/list", {}))["sessions"]
    return [s for s in sessions if s.get("parentSessionId") == parent["sessionId"]]


async def tool_results(daemon: Daemon, run_id: str) -> list[str]:
    steps = (await daemon.call("run/steps", {"runId": run_id}))["steps"]
    return [s["result"] for s in steps if s.get("toolCall")]


async def outcomes(daemon: Daemon, session: dict[str, Any]) -> list[str]:
    turns = (await daemon.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    return [t["outcome"] for t in turns]


async def test_the_task_tool_is_not_offered_unless_the_policy_turns_it_on(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply("Hello.")
    plain = await open_session(daemon, workspace)
    await turn(daemon, plain, "hi")
    model.reply("Hello again.")
    enabled = await open_session(daemon, workspace, policy=TASKS)
    await turn(daemon, enabled, "hi")

    assert "read_file" in offered(model.requests[0])
    assert "task" not in offered(model.requests[0])
    assert "task" in offered(model.requests[1])
    assert "task" not in await daemon.call("session/policy", {"sessionId": plain["sessionId"]})
    policy = await daemon.call("session/policy", {"sessionId": enabled["sessionId"]})
    assert policy["task"] == {"enabled": True, "maxConcurrent": 2}
    listed = await daemon.call("session/tools", {"sessionId": plain["sessionId"]})
    assert "task" not in [t["name"] for t in listed["tools"]]
    listed = await daemon.call("session/tools", {"sessionId": enabled["sessionId"]})
    (task,) = [t for t in listed["tools"] if t["name"] == "task"]
    assert (task["source"], task["kind"], task["policy"]) == ("builtin", "exec", "depends")


async def test_a_child_runs_its_prompt_and_its_reply_is_the_calls_result(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply("Asking a helper.", tool_calls=[task("count the files", tools=["list_dir"])])
    model.reply("There are two files.")
    model.reply("The helper counted two files.")
    parent = await open_session(daemon, workspace, policy=TASKS)

    result = await turn(daemon, parent, "how many files are there?")

    assert result["outcome"] == "finished"
    assert result["reply"] == "The helper counted two files."
    assert await tool_results(daemon, result["runId"]) == ["There are two files."]
    assert model.user_messages(1)[-1] == "count the files"
    assert offered(model.requests[1]) == ["list_dir"]  # only what the call gave it
    [child] = await children(daemon, parent)
    assert child["root"] == parent["root"] and child["turns"] == 1
    listed = await daemon.call("session/list", {"parentSessionId": parent["sessionId"]})
    assert [s["sessionId"] for s in listed["sessions"]] == [child["sessionId"]]
    mine = await daemon.call("session/list", {"parentSessionId": child["sessionId"]})
    assert mine["sessions"] == []
    assert await outcomes(daemon, child) == ["finished"]
    # The window following the parent was told of the child's turn as it ran, and first
    # which call of the parent started it.
    told = [t for t in daemon.tokens if t["sessionId"] == child["sessionId"]]
    assert "".join(t["text"] for t in told) == "There are two files."
    sent = [m for m in daemon.protocol.received if "method" in m]
    linked = [
        n for n, m in enumerate(sent) if m["params"].get("childSessionId") == child["sessionId"]
    ]
    (link,) = linked
    started = sent[link]["params"]
    assert (started["sessionId"], started["tool"], started["status"]) == (
        parent["sessionId"],
        "task",
        "running",
    )
    first_of_child = next(
        n for n, m in enumerate(sent) if m["params"].get("sessionId") == child["sessionId"]
    )
    assert link < first_of_child
    # The parent's result went back to the model as the tool's answer.
    assert model.requests[2]["messages"][-1]["content"] == "There are two files."


async def test_a_childs_write_is_asked_of_the_window_following_its_parent(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    asked = answer_approvals(daemon, ["allow"])
    model.reply(tool_calls=[task("write the notes")])
    model.reply(tool_calls=[write("notes.txt", "from the child\n")])
    model.reply("Written.")
    model.reply("The helper wrote the notes.")
    parent = await open_session(daemon, workspace, policy=TASKS)  # writes ask

    result = await turn(daemon, parent, "have the notes written")

    [child] = await children(daemon, parent)
    assert result["outcome"] == "finished"
    assert [a["sessionId"] for a in asked] == [child["sessionId"]]
    assert (workspace / "notes.txt").read_text() == "from the child\n"


async def test_a_child_may_work_on_a_branch_of_its_own_in_a_worktree(
    daemon: Daemon, model: ModelServer, tmp_path: Path
) -> None:
    checkout = make_repo(tmp_path / "checkout", {"README.md": "hello\n"})
    model.reply(tool_calls=[task("write the notes", worktree="notes")])
    model.reply(tool_calls=[write("notes.txt", "from the child\n")])
    model.reply("Written on my branch.")
    model.reply("The helper wrote the notes on trellisd/notes.")
    parent = await open_session(
        daemon, checkout, policy={**TASKS, "approval": "all", "layers": OPEN["layers"]}
    )

    result = await turn(daemon, parent, "have the notes written apart")

    assert result["outcome"] == "finished"
    [child] = await children(daemon, parent)
    worktree = child["worktree"]
    assert (worktree["branch"], worktree["base"]) == ("trellisd/notes", "main")
    assert (Path(worktree["path"]) / "notes.txt").read_text() == "from the child\n"
    assert not (checkout / "notes.txt").exists()  # the parent's folder is left as it was
    merged = await daemon.call("session/worktree/merge", {"sessionId": child["sessionId"]})
    assert "notes.txt" in merged["paths"]
    assert (checkout / "notes.txt").read_text() == "from the child\n"


async def test_a_worktree_the_child_cannot_have_is_a_tool_error_the_model_sees(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(tool_calls=[task("write the notes", worktree=True)])
    model.reply("No branch for the helper here.")
    parent = await open_session(daemon, workspace, policy=TASKS)  # not a git work tree

    result = await turn(daemon, parent, "have the notes written apart")

    [answer] = await tool_results(daemon, result["runId"])
    assert answer.startswith("error: no worktree for the child: ")
    assert await children(daemon, parent) == []


async def test_a_child_that_fails_is_a_tool_error_the_model_sees(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(tool_calls=[task("loop forever", maxSteps=1)])
    model.reply(tool_calls=[{"name": "list_dir", "arguments": {}}])  # the child's one step
    model.reply("The helper ran out of steps.")
    parent = await open_session(daemon, workspace, policy=TASKS)

    result = await turn(daemon, parent, "try it")

    [answer] = await tool_results(daemon, result["runId"])
    assert answer.startswith("error: the child session ")
    assert "ended exhausted" in answer
    [child] = await children(daemon, parent)
    assert await outcomes(daemon, child) == ["exhausted"]


async def test_a_childs_spending_counts_against_the_parents_turn_budget(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(options=SMALL_OUTPUT)
    model.reply(
        tool_calls=[task("read it all")], usage={"prompt_tokens": 100, "completion_tokens": 10}
    )
    model.reply("Read.", usage={"prompt_tokens": 1800, "completion_tokens": 10})
    model.reply("never asked for")
    parent = await open_session(daemon, workspace, policy=TASKS)

    # 110 spent by the parent, 1810 by its child; the parent's next call would pass 2000.
    result = await turn(daemon, parent, "read everything", budget={"tokens": 2000})

    assert result["outcome"] == "exhausted"
    assert "turn's budget of 2000 tokens (1920 spent)" in result["error"]
    assert len(model.requests) == 2
    assert await tool_results(daemon, result["runId"]) == ["Read."]


async def test_cancelling_the_parent_cancels_its_running_child(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(tool_calls=[task("take your time")])
    held = model.reply("Still thinking about it", hold=threading.Event(), hold_at=2)
    parent = await open_session(daemon, workspace, policy=TASKS)
    running = asyncio.ensure_future(turn(daemon, parent, "delegate"))
    await until(held.served, "the child's model call arrives")

    cancelled = await daemon.call("session/cancel", {"sessionId": parent["sessionId"]})
    result = await running

    assert cancelled["cancelled"] is True
    assert result["outcome"] == "cancelled"
    await until(held.dropped, "the child's model call is given up")
    [child] = await children(daemon, parent)
    assert await outcomes(daemon, child) == ["cancelled"]


async def test_cancelling_a_child_alone_leaves_its_parent_going(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(tool_calls=[task("take your time")])
    held = model.reply("Still thinking about it", hold=threading.Event(), hold_at=2)
    model.reply("The helper was stopped; I will do it myself.")
    parent = await open_session(daemon, workspace, policy=TASKS)
    running = asyncio.ensure_future(turn(daemon, parent, "delegate"))
    await until(held.served, "the child's model call arrives")
    [child] = await children(daemon, parent)

    cancelled = await daemon.call("session/cancel", {"sessionId": child["sessionId"]})
    result = await running

    assert cancelled["cancelled"] is True
    assert result["outcome"] == "finished"
    assert result["reply"] == "The helper was stopped; I will do it myself."
    [answer] = await tool_results(daemon, result["runId"])
    assert answer == (
        f"error: the child session {child['sessionId']} ended cancelled without an answer"
    )
    assert await outcomes(daemon, child) == ["cancelled"]


async def test_children_run_two_at_once_and_a_third_waits_its_turn(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(tool_calls=[task("first"), task("second"), task("third")])
    one = model.reply("one", hold=threading.Event())
    two = model.reply("two", hold=threading.Event())
    three = model.reply("three")
    model.reply("All three answered.")
    parent = await open_session(daemon, workspace, policy={"task": {"enabled": True}})
    running = asyncio.ensure_future(turn(daemon, parent, "split the work"))

    await until(one.served, "a first child's call arrives")
    await until(two.served, "a second child's call arrives while the first is held")
    assert len(await children(daemon, parent)) == 2
    assert not three.served.is_set()
    one.release()
    await until(three.served, "the third child starts once one has ended")
    two.release()
    result = await running

    assert result["outcome"] == "finished"
    assert sorted(await tool_results(daemon, result["runId"])) == ["one", "three", "two"]
    assert len(await children(daemon, parent)) == 3
    asked = sorted(model.user_messages(i)[-1] for i in (1, 2, 3))
    assert asked == ["first", "second", "third"]


async def test_a_repository_file_cannot_turn_the_task_tool_on_or_raise_its_limit(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text("[task]\nenabled = true\nmaxConcurrent = 8\n")
    model.reply("Hello.")
    session = await open_session(daemon, workspace)
    await turn(daemon, session, "hi")
    opened = await open_session(
        daemon, workspace, policy={"task": {"enabled": True, "maxConcurrent": 3}}
    )

    assert "task" not in offered(model.requests[0])
    read = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    assert read["task"]["enabled"] is False
    read = await daemon.call("session/policy", {"sessionId": opened["sessionId"]})
    assert read["task"] == {"enabled": True, "maxConcurrent": 3}

    (workspace / ".trellisd.toml").write_text("[task]\nmaxConcurrent = 1\n")
    lowered = await open_session(daemon, workspace, policy=TASKS)
    (workspace / ".trellisd.toml").write_text("[task]\nenabled = false\n")
    off = await open_session(daemon, workspace, policy=TASKS)
    read = await daemon.call("session/policy", {"sessionId": lowered["sessionId"]})
    assert read["task"] == {"enabled": True, "maxConcurrent": 1}
    read = await daemon.call("session/policy", {"sessionId": off["sessionId"]})
    assert read["task"]["enabled"] is False


async def test_a_bad_task_policy_is_refused_naming_the_field(
    daemon: Daemon, workspace: Path
) -> None:
    error = await daemon.error(
        "session/open",
        {"root": str(workspace), "policy": {"task": {"enabled": True, "maxConcurrent": 0}}},
    )
    assert error.code == -32602 and "maxConcurrent" in error.message
    error = await daemon.error("session/list", {"query": "x", "parentSessionId": "s-1"})
    assert error.code == -32602 and error.data["field"] == "parentSessionId"
