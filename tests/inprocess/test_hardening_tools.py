"""A hostile model and a hostile repository against the real daemon over pipes: the keys
stay out of the model's reach, a repository's file cannot loosen the editor's policy, a
model cannot give itself commands, and no pattern stalls the daemon."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from tests.fixtures.driver import (
    TEST_KEY,
    Daemon,
    DaemonFactory,
    answer_approvals,
    events,
    open_session,
    turn,
)
from tests.fixtures.model_server import ModelServer

LEAKS = {
    "OPENAI_API_KEY": "sk-openai-must-not-leak",
    "ANTHROPIC_API_KEY": "sk-ant-must-not-leak",
    "OPENROUTER_API_KEY": "sk-or-must-not-leak",
    "GITHUB_TOKEN": "ghp-must-not-leak",
    "DATABASE_PASSWORD": "hunter2-must-not-leak",
}


async def steps(daemon: Daemon, result: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await daemon.call("run/steps", {"runId": result["runId"]}))[
        "steps"
    ]
    return found


async def test_the_models_commands_and_checks_never_see_the_keys(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(
        env={**LEAKS, "NPM_TOKEN": "npm-let-through", "TRELLISD_PASS_ENV": "NPM_TOKEN"}
    )
    session = await open_session(daemon, workspace, policy={"approval": "all"})
    model.reply("", tool_calls=[{"name": "run_command", "arguments": {"argv": ["env"]}}])
    model.reply("Here is the environment.")
    result = await turn(
        daemon, session, "print the environment", verify={"argv": ["env"]}, maxSteps=2
    )

    printed = (await steps(daemon, result))[0]["result"]
    check = (await events(daemon, result["runId"], "check"))[0]["detail"]["output"]
    sent = str(model.requests)
    assert "exit code 0" in printed and "PATH=" in printed
    for seen in (printed, check, sent):
        assert TEST_KEY not in seen
        for secret in LEAKS.values():
            assert secret not in seen
    assert "NPM_TOKEN=npm-let-through" in printed


async def test_a_repository_file_cannot_widen_the_editors_layers(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text(
        'approval = "all"\n[[layers]]\nname = "repo"\n'
        'allowRead = ["**"]\nallowWrite = ["**"]\nallowExec = ["*"]\n'
    )
    editor = {
        "layers": [{"name": "editor", "allowRead": ["**"], "allowWrite": ["src/**"]}],
        "approval": "all",
    }
    session = await open_session(daemon, workspace, policy=editor)
    model.reply(
        "",
        tool_calls=[
            {"name": "write_file", "arguments": {"path": "setup.py", "content": "boom"}},
            {"name": "run_command", "arguments": {"argv": ["touch", "ran.txt"]}},
            {"name": "write_file", "arguments": {"path": "src/ok.py", "content": "ok"}},
        ],
    )
    model.reply("Tried.")
    result = await turn(daemon, session, "write and run")

    assert not (workspace / "setup.py").exists()
    assert not (workspace / "ran.txt").exists()
    assert (workspace / "src" / "ok.py").read_text() == "ok"
    refused = [e["detail"]["action"] for e in await events(daemon, result["runId"], "refusal")]
    assert refused == [
        {"kind": "write", "target": "setup.py"},
        {"kind": "exec", "target": "touch ran.txt"},
    ]


async def test_a_model_cannot_give_itself_commands_through_the_files_that_run_them(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n")
    daemon = await spawn()
    session = await open_session(daemon, workspace, policy={"approval": "all"})
    model.reply(
        "",
        tool_calls=[
            {
                "name": "write_file",
                "arguments": {
                    "path": ".trellisd.toml",
                    "content": '[[layers]]\nname = "mine"\nallowExec = ["*"]\n',
                },
            },
            {
                "name": "edit_file",
                "arguments": {
                    "path": ".git/config",
                    "old": "bare = false",
                    "new": "bare = false\n\tfsmonitor = touch pwned",
                },
            },
            {"name": "write_file", "arguments": {"path": ".vscode/tasks.json", "content": "{}"}},
        ],
    )
    model.reply("Done.")
    result = await turn(daemon, session, "configure the project")

    assert not (workspace / ".trellisd.toml").exists()
    assert "fsmonitor" not in (workspace / ".git" / "config").read_text()
    assert not (workspace / ".vscode").exists()
    for step in (await steps(daemon, result))[:3]:
        assert "is protected" in step["result"]

    # An editor that names a protected path explicitly still gets asked, every time.
    asked = answer_approvals(daemon, ["deny"])
    named = {"layers": [{"name": "editor", "allowWrite": [".vscode/**"]}], "approval": "all"}
    session = await open_session(daemon, workspace, policy=named)
    model.reply(
        "",
        tool_calls=[
            {"name": "write_file", "arguments": {"path": ".vscode/tasks.json", "content": "{}"}}
        ],
    )
    model.reply("Asked.")
    await turn(daemon, session, "add a task")
    assert [a["tool"] for a in asked] == ["write_file"]
    assert not (workspace / ".vscode").exists()


async def test_no_pattern_a_model_or_a_repository_chooses_stalls_the_daemon(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    """A backtracking glob in the repository's file meets a deep path the model chose, and a
    backtracking regex meets a long line; the daemon answers each step, and then a cancel,
    while the model's next reply is held."""
    (workspace / ".trellisd.toml").write_text(
        f'[[layers]]\nname = "repo"\ndenyRead = ["{"**/a/" * 8}b"]\n'
    )
    (workspace / "long.txt").write_text("a" * 35 + "!\n")
    deep = "a/" * 100 + "c.txt"
    held = threading.Event()
    model.reply(
        "",
        tool_calls=[
            {"name": "read_file", "arguments": {"path": deep}},
            {"name": "search", "arguments": {"pattern": "^(a+)+$"}},
        ],
    )
    model.reply("never sent", hold=held)
    session = await open_session(daemon, workspace, policy={"approval": "all"})
    running = asyncio.ensure_future(turn(daemon, session, "look around"))
    try:
        for _ in range(600):
            if len(daemon.steps) >= 2:
                break
            await asyncio.sleep(0.05)
        assert len(daemon.steps) >= 2, "the tool calls were never answered"
        cancelled = await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
        assert cancelled["cancelled"] is True
        result = await running
    finally:
        held.set()
    assert result["outcome"] == "cancelled"
    recorded = await steps(daemon, result)
    assert "does not exist" in recorded[0]["result"]
    assert recorded[1]["result"] == "no matches for '^(a+)+$'"


async def test_an_invalid_regex_says_what_the_search_speaks(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    model.reply("", tool_calls=[{"name": "search", "arguments": {"pattern": r"(a)\1"}}])
    model.reply("ok")
    result = await turn(daemon, session, "search")
    assert "invalid escape sequence" in (await steps(daemon, result))[0]["result"]
