"""Hooks over real pipes, with real programs: small Python scripts the tests write, run inside
the session's walls with the event's JSON on stdin, answering with their exit code and JSON.
A preToolUse hook blocks a write and the model reads why, a permissionRequest hook approves
in the person's place, a userPromptSubmit hook adds context or blocks the prompt, a stop hook
asks for one more step, a hook that hangs is killed, a project's hook is asked about once."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.fixtures.driver import (
    Daemon,
    DaemonFactory,
    answer_approvals,
    call,
    events,
    open_session,
    tool_results,
    turn,
    write,
)
from tests.fixtures.model_server import ModelServer
from tests.fixtures.reachable import reachable

BLOCK_WRITES = """
import json, sys
called = json.load(sys.stdin)["toolCall"]
sys.stderr.write(f"{called['name']} may not touch {called['arguments']['path']}: frozen")
sys.exit(2)
"""
APPROVE = 'import json, sys\njson.load(sys.stdin)\nprint(json.dumps({"decision": "allow"}))\n'
CONTEXT = """
import json, sys
prompt = json.load(sys.stdin)["prompt"]
print(json.dumps({"context": f"ticket ABC-123 is about: {prompt}"}))
"""
BLOCK_PROMPT = 'import sys\nsys.stderr.write("no deploys on Fridays")\nsys.exit(2)\n'
ONE_MORE_STEP = """
import json, sys
given = json.load(sys.stdin)
if given["stopsAsked"] == 0:
    print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
"""
HANG = "import time\nwhile True:\n    time.sleep(60)\n"
GO_ON = 'import json, sys\njson.load(sys.stdin)\nprint("{}")\n'


def script(folder: Path, name: str, code: str) -> str:
    """``code`` as a file the walls let a hook run."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(code)
    return str(reachable(path))


def hook(event: str, path: str, **extra: Any) -> str:
    lines = ["[[hooks]]", f"event = {json.dumps(event)}"]
    lines.append(f"command = {json.dumps([sys.executable, path])}")
    lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


async def with_hooks(spawn: DaemonFactory, tmp_path: Path, *tables: str) -> Daemon:
    """A daemon whose user's config file holds ``tables``."""
    config = tmp_path / "home" / ".config" / "trellisd" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("\n".join(tables))
    return await spawn()


async def session_with(
    spawn: DaemonFactory, tmp_path: Path, workspace: Path, event: str, code: str, **extra: Any
) -> tuple[Daemon, dict[str, Any], str]:
    """A daemon whose config file runs ``code`` at ``event``, a session of it, and the
    script's path."""
    path = script(tmp_path / "hooks", f"{event}.py", code)
    daemon = await with_hooks(spawn, tmp_path, hook(event, path, **extra))
    return daemon, await open_session(daemon, workspace), path


def messages_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = request["messages"]
    return found


async def test_a_pre_tool_use_hook_blocks_a_write_and_the_model_reads_why(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon, session, path = await session_with(
        spawn, tmp_path, workspace, "preToolUse", BLOCK_WRITES, matcher="write_*"
    )
    asked = answer_approvals(daemon, [])
    model.reply("", tool_calls=[write("notes.txt", "hello")])
    model.reply("done")
    result = await turn(daemon, session, "write the notes")

    assert not (workspace / "notes.txt").exists()
    said = (await tool_results(daemon, result["runId"]))[0]
    assert "write_file may not touch notes.txt: frozen" in said
    tool_message = messages_of(model.requests[1])[-1]
    assert tool_message["role"] == "tool"
    assert "write_file may not touch notes.txt: frozen" in tool_message["content"]
    assert asked == []  # blocked before the policy asks anyone
    [refusal] = await events(daemon, result["runId"], "refusal")
    assert refusal["detail"]["layer"] == "hook"
    assert refusal["detail"]["reason"] == "write_file may not touch notes.txt: frozen"
    [ran] = await events(daemon, result["runId"], "hook")
    assert ran["detail"]["event"] == "preToolUse"
    assert ran["detail"]["exitCode"] == 2
    assert ran["detail"]["decision"] == "block"
    assert ran["detail"]["command"] == [sys.executable, path]


async def test_a_matcher_leaves_other_tools_alone(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    path = script(tmp_path / "hooks", "guard.py", BLOCK_WRITES)
    daemon = await with_hooks(spawn, tmp_path, hook("preToolUse", path, matcher="edit_*"))
    answer_approvals(daemon, ["allow"])
    session = await open_session(daemon, workspace)
    model.reply("", tool_calls=[write("notes.txt", "hello")])
    model.reply("done")
    result = await turn(daemon, session, "write the notes")

    assert (workspace / "notes.txt").read_text() == "hello"
    assert await events(daemon, result["runId"], "hook") == []


async def test_a_permission_request_hook_approves_without_asking_the_person(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon, session, path = await session_with(
        spawn, tmp_path, workspace, "permissionRequest", APPROVE
    )
    asked = answer_approvals(daemon, [])
    model.reply("", tool_calls=[write("notes.txt", "approved")])
    model.reply("done")
    result = await turn(daemon, session, "write the notes")

    assert (workspace / "notes.txt").read_text() == "approved"
    assert asked == []
    [ran] = await events(daemon, result["runId"], "hook")
    assert ran["detail"]["decision"] == "allow" and ran["detail"]["exitCode"] == 0


async def test_a_user_prompt_submit_hook_adds_context_to_the_models_request(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon, session, path = await session_with(
        spawn, tmp_path, workspace, "userPromptSubmit", CONTEXT
    )
    model.reply("done")
    result = await turn(daemon, session, "fix the login page")

    sent = messages_of(model.requests[0])[-1]
    assert sent["role"] == "user"
    assert "fix the login page" in json.dumps(sent)
    assert "ticket ABC-123 is about: fix the login page" in json.dumps(sent)
    [ran] = await events(daemon, result["runId"], "hook")
    assert ran["detail"]["event"] == "userPromptSubmit"


async def test_a_user_prompt_submit_hook_blocks_the_prompt_saying_why(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon, session, path = await session_with(
        spawn, tmp_path, workspace, "userPromptSubmit", BLOCK_PROMPT
    )
    error = await daemon.error(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "deploy it"}
    )

    assert error.message == "a userPromptSubmit hook blocked the prompt: no deploys on Fridays"
    assert error.data["reason"] == "no deploys on Fridays"
    assert model.requests == []
    history = await daemon.call("session/history", {"sessionId": session["sessionId"]})
    assert history["turns"] == []  # the prompt is in no turn the model is sent later


async def test_a_stop_hook_asks_for_one_more_step(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon, session, path = await session_with(spawn, tmp_path, workspace, "stop", ONE_MORE_STEP)
    model.reply("first try")
    model.reply("tests pass")
    result = await turn(daemon, session, "fix it")

    assert result["reply"] == "tests pass"
    assert len(model.requests) == 2
    told = messages_of(model.requests[1])[-1]
    assert told["role"] == "user" and "run the tests before you stop" in told["content"]
    ran = await events(daemon, result["runId"], "hook")
    assert [e["detail"]["decision"] for e in ran] == ["block", "continue"]


async def test_a_hook_that_hangs_is_killed_at_its_timeout_and_the_turn_goes_on(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon, session, path = await session_with(
        spawn, tmp_path, workspace, "userPromptSubmit", HANG, timeout=0.5
    )
    model.reply("done")
    result = await turn(daemon, session, "hello")

    assert result["outcome"] == "finished" and result["reply"] == "done"
    [ran] = await events(daemon, result["runId"], "hook")
    assert ran["detail"]["timedOut"] is True
    assert ran["detail"]["exitCode"] is None
    assert ran["detail"]["decision"] == "continue"


async def test_a_project_hook_is_asked_about_once_then_remembered(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / "go_on.py").write_text(GO_ON)
    (workspace / ".trellisd.toml").write_text(hook("preToolUse", "go_on.py"))
    line = f"{sys.executable} go_on.py"
    asked = answer_approvals(daemon, ["deny", "allow"])
    first = await open_session(daemon, workspace)
    listed = await daemon.call("session/hooks", {"sessionId": first["sessionId"]})
    assert listed["hooks"] == [
        {
            "event": "preToolUse",
            "command": [sys.executable, "go_on.py"],
            "commandLine": line,
            "timeout": 30.0,
            "source": "project",
            "approved": False,
            "state": "awaiting approval",
        }
    ]

    model.reply("", tool_calls=[call("read_file", path="go_on.py")])
    model.reply("done")
    result = await turn(daemon, first, "read it")
    assert asked[0]["tool"] == "run_hook"
    assert asked[0]["hook"] == {"event": "preToolUse", "source": "project", "command": line}
    assert await events(daemon, result["runId"], "hook") == []  # declined: skipped
    listed = await daemon.call("session/hooks", {"sessionId": first["sessionId"]})
    assert listed["hooks"][0]["state"] == "declined"

    second = await open_session(daemon, workspace)
    model.reply("", tool_calls=[call("read_file", path="go_on.py")])
    model.reply("done")
    result = await turn(daemon, second, "read it")
    assert len(asked) == 2
    assert len(await events(daemon, result["runId"], "hook")) == 1

    third = await open_session(daemon, workspace)
    listed = await daemon.call("session/hooks", {"sessionId": third["sessionId"]})
    assert listed["hooks"][0]["approved"] is True
    model.reply("", tool_calls=[call("read_file", path="go_on.py")])
    model.reply("done")
    result = await turn(daemon, third, "read it")
    assert len(asked) == 2  # remembered for this root and this command line
    assert len(await events(daemon, result["runId"], "hook")) == 1

    (workspace / "go_on.py").write_text(GO_ON + "# changed\n")
    fourth = await open_session(daemon, workspace)
    listed = await daemon.call("session/hooks", {"sessionId": fourth["sessionId"]})
    assert listed["hooks"][0]["approved"] is False  # its script changed: asked again


async def test_a_project_hooks_approval_is_revoked_from_the_wire(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / "go_on.py").write_text(GO_ON)
    (workspace / ".trellisd.toml").write_text(hook("preToolUse", "go_on.py"))
    asked = answer_approvals(daemon, ["allow", "allow"])
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    model.reply("", tool_calls=[call("read_file", path="go_on.py")])
    model.reply("done")
    await turn(daemon, session, "read it")
    [listed] = (await daemon.call("session/hooks", {"sessionId": sid}))["hooks"]
    assert listed["state"] == "approved" and len(asked) == 1

    grant = {"kind": "hook", "target": listed["commandLine"], "scope": "project"}
    policy = await daemon.call("session/revoke", {"sessionId": sid, "grant": grant})
    kept = await daemon.call("session/policy", {"sessionId": sid})
    assert policy["grants"] == kept["grants"]  # a hook's approval is no grant: they stay
    [listed] = (await daemon.call("session/hooks", {"sessionId": sid}))["hooks"]
    assert listed["state"] == "awaiting approval" and listed["approved"] is False
    other = await open_session(daemon, workspace)
    [listed] = (await daemon.call("session/hooks", {"sessionId": other["sessionId"]}))["hooks"]
    assert listed["approved"] is False  # gone from the store: every session asks again

    model.reply("", tool_calls=[call("read_file", path="go_on.py")])
    model.reply("done")
    result = await turn(daemon, session, "read it again")
    assert len(asked) == 2 and asked[1]["tool"] == "run_hook"
    assert len(await events(daemon, result["runId"], "hook")) == 1

    await daemon.call("session/revoke", {"sessionId": sid, "grant": grant})
    gone = await daemon.error("session/revoke", {"sessionId": sid, "grant": grant})
    assert gone.code == -32010 and "no approval of the hook" in gone.message


async def test_session_hooks_lists_the_config_files_hooks(
    spawn: DaemonFactory, workspace: Path, tmp_path: Path
) -> None:
    path = script(tmp_path / "hooks", "approve.py", APPROVE)
    daemon = await with_hooks(
        spawn, tmp_path, hook("postToolUse", path, matcher="run_*", timeout=5)
    )
    session = await open_session(daemon, workspace)
    listed = await daemon.call("session/hooks", {"sessionId": session["sessionId"]})

    assert listed == {
        "sessionId": session["sessionId"],
        "hooks": [
            {
                "event": "postToolUse",
                "command": [sys.executable, path],
                "commandLine": f"{sys.executable} {path}",
                "matcher": "run_*",
                "timeout": 5,
                "source": "config",
                "approved": True,
                "state": "approved",
            }
        ],
    }


LOG = """
import json, sys
given = json.load(sys.stdin)
with open("hooks.log", "a") as log:
    log.write(json.dumps(given) + "\\n")
"""


async def test_the_other_events_run_their_hooks_in_order_with_what_they_are_about(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    path = script(tmp_path / "hooks", "log.py", LOG)
    named = ("sessionStart", "postToolUse", "turnEnd", "preCompact", "postCompact", "sessionEnd")
    daemon = await with_hooks(spawn, tmp_path, *(hook(event, path) for event in named))
    session = await open_session(daemon, workspace)
    (workspace / "a.txt").write_text("a")
    model.reply("", tool_calls=[call("read_file", path="a.txt")])
    model.reply("read it")
    first = await turn(daemon, session, "read a")
    model.reply("again")
    await turn(daemon, session, "once more")
    model.reply("the summary")
    compacted = await daemon.call("session/compact", {"sessionId": session["sessionId"]})
    assert compacted["compacted"] is True
    await daemon.call("session/close", {"sessionId": session["sessionId"]})

    lines = [json.loads(line) for line in (workspace / "hooks.log").read_text().splitlines()]
    assert [line["event"] for line in lines] == [
        "sessionStart",
        "postToolUse",
        "turnEnd",
        "turnEnd",
        "preCompact",
        "postCompact",
        "sessionEnd",
    ]
    assert {line["sessionId"] for line in lines} == {session["sessionId"]}
    start, used, ended = lines[0], lines[1], lines[2]
    assert start["source"] == "open" and start["root"] == str(workspace)
    assert used["toolCall"]["name"] == "read_file" and used["status"] == "done"
    assert used["result"] == "a" and used["turnId"] == first["turnId"] and used["step"] == 1
    assert ended["outcome"] == "finished" and ended["runId"] == first["runId"]
    assert lines[5]["compaction"]["turns"] == 1
    assert lines[6]["reason"] == "close"
    recorded = await events(daemon, first["runId"], "hook")
    assert [e["detail"]["event"] for e in recorded] == ["postToolUse", "turnEnd"]
