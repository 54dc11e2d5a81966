"""Custom commands over real pipes: listed by ``session/commands``, run by ``session/turn``'s
``command`` as a bounded turn, a project's narrowed to what the user's settings allow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.fixtures.driver import Daemon, DaemonFactory, events, followed, open_session
from tests.fixtures.model_server import ModelServer

# Fails the first time it runs in a root, passes from then on.
SECOND_TIME = (
    "import pathlib, sys; p = pathlib.Path('.tries'); n = int(p.read_text()) if p.exists()"
    " else 0; p.write_text(str(n + 1)); print('not yet' if n == 0 else 'ok'); sys.exit(0 if n"
    " else 1)"
)


def user_commands(tmp_path: Path) -> Path:
    """The user's commands folder, beside the config file of the test's home."""
    folder = tmp_path / "home" / ".config" / "trellisd" / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def project_commands(workspace: Path) -> Path:
    folder = workspace / ".trellisd" / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def command_file(folder: Path, name: str, body: str, **front: object) -> None:
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    (folder / f"{name}.md").write_text("---\n" + "\n".join(lines) + "\n---\n" + body)


async def test_a_command_with_a_check_runs_until_it_passes_and_the_run_says_which(
    daemon: Daemon, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    verify = [sys.executable, "-c", SECOND_TIME]
    command_file(
        user_commands(tmp_path),
        "fix-tests",
        "Make $ARGUMENTS pass; start with $1.",
        description="Fix the tests",
        verify=verify,
        maxSteps=3,
    )
    session = await open_session(daemon, workspace)
    model.reply("Nothing to change yet.")
    model.reply("Fixed it.")
    result = await daemon.call(
        "session/turn",
        {"sessionId": session["sessionId"], "command": "fix-tests", "arguments": "unit e2e"},
    )

    assert result["outcome"] == "success" and result["reply"] == "Fixed it."
    assert len(model.requests) == 2
    assert "Make unit e2e pass; start with unit." in str(model.requests[0]["messages"][-1])
    assert "not yet" in str(model.requests[1]["messages"][-1])
    checks = await events(daemon, result["runId"], "check")
    assert [c["detail"]["passed"] for c in checks] == [False, True]
    [ran] = await events(daemon, result["runId"], "command")
    assert ran["detail"] == {
        "name": "fix-tests",
        "source": "user",
        "arguments": "unit e2e",
        "settings": {"verify": verify, "maxSteps": 3},
    }
    turns = await daemon.call("session/turns", {"sessionId": session["sessionId"]})
    assert turns["turns"][-1]["prompt"] == "Make unit e2e pass; start with unit."


async def test_a_commands_turn_names_the_command_after_a_reopen_and_a_prompts_does_not(
    daemon: Daemon, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    command_file(user_commands(tmp_path), "greet", "Say hello to $ARGUMENTS, warmly and at length.")
    command_file(project_commands(workspace), "tidy", "Tidy the imports.")
    session = await open_session(daemon, workspace)
    session_id = session["sessionId"]
    model.reply("Hello, Ada!")
    model.reply("Tidied.")
    model.reply("Sure.")
    greeted = await daemon.call(
        "session/turn", {"sessionId": session_id, "command": "greet", "arguments": "Ada"}
    )
    await daemon.call("session/turn", {"sessionId": session_id, "command": "tidy"})
    await daemon.call("session/turn", {"sessionId": session_id, "prompt": "/greet Bob"})

    reopened = await daemon.call("session/reopen", {"sessionId": session_id})
    history = reopened["history"]
    assert [t.get("command") for t in history] == [
        {"name": "greet", "arguments": "Ada", "source": "user"},
        {"name": "tidy", "arguments": "", "source": "project"},
        None,  # an ordinary prompt, even one that starts with a slash
    ]
    assert history[0]["prompt"] == "Say hello to Ada, warmly and at length."
    turns = (await daemon.call("session/turns", {"sessionId": session_id}))["turns"]
    assert turns[0]["command"] == history[0]["command"]
    history = (await daemon.call("session/history", {"sessionId": session_id}))["turns"]
    assert [t.get("command", {}).get("name") for t in history] == ["greet", "tidy", None]
    assert history[0]["turnId"] == greeted["turnId"]


async def test_session_commands_lists_both_folders_and_the_users_wins(
    daemon: Daemon, workspace: Path, tmp_path: Path
) -> None:
    command_file(user_commands(tmp_path), "review", "Mine.", description="Review it my way")
    command_file(project_commands(workspace), "review", "Theirs.", description="Theirs")
    command_file(
        project_commands(workspace), "release", "Release $ARGUMENTS.", **{"argument-hint": "v"}
    )
    (project_commands(workspace) / "Not A Name.md").write_text("skipped")
    session = await open_session(daemon, workspace)

    listed = await daemon.call("session/commands", {"sessionId": session["sessionId"]})

    assert listed == {
        "sessionId": session["sessionId"],
        "commands": [
            {"name": "release", "source": "project", "argumentHint": "v", "settings": {}},
            {
                "name": "review",
                "source": "user",
                "description": "Review it my way",
                "settings": {},
                "shadowsProject": True,
            },
        ],
    }


async def test_a_project_command_that_tries_to_widen_is_narrowed(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"test-model": {"input": 0.1, "output": 0.1}}))
    daemon = await spawn(env={"TRELLISD_MAX_STEPS": "20", "TRELLISD_PRICES": str(prices)})
    command_file(
        project_commands(workspace),
        "yolo",
        "Do it all.",
        approval="all",
        budget=5,
        maxSteps=1000,
        model="someone-elses-model",
    )
    session = await open_session(daemon, workspace, policy={"approval": "ask"}, budget={"usd": 1})
    session_id = session["sessionId"]

    [listed] = (await daemon.call("session/commands", {"sessionId": session_id}))["commands"]
    assert listed["settings"] == {"budget": 1.0, "maxSteps": 20}
    narrowed = {n["setting"]: (n["asked"], n["applied"]) for n in listed["narrowed"]}
    assert narrowed == {
        "approval": ("all", None),
        "budget": (5, 1.0),
        "maxSteps": (1000, 20),
        "model": ("someone-elses-model", None),
    }

    model.reply("Done.")
    result = await daemon.call("session/turn", {"sessionId": session_id, "command": "yolo"})
    assert result["outcome"] == "finished" and result["model"] == "test-model"
    [ran] = await events(daemon, result["runId"], "command")
    assert ran["detail"]["settings"] == {"budget": 1.0, "maxSteps": 20}
    assert {n["setting"] for n in ran["detail"]["narrowed"]} == set(narrowed)
    policy = await daemon.call("session/policy", {"sessionId": session_id})
    assert policy["approval"] == "ask"


async def test_a_commands_approval_holds_for_its_turn_and_the_mode_comes_back(
    daemon: Daemon, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    command_file(user_commands(tmp_path), "plan", "Plan $ARGUMENTS.", approval="plan")
    session = await open_session(daemon, workspace, policy={"approval": "ask"})
    session_id = session["sessionId"]
    model.reply("A plan.")
    result = await daemon.call(
        "session/turn", {"sessionId": session_id, "command": "plan", "arguments": "the move"}
    )
    assert result["outcome"] == "finished"
    assert "plan mode" in str(model.requests[0]["messages"][-1])
    policy = await daemon.call("session/policy", {"sessionId": session_id})
    assert policy["approval"] == "ask"
    told = [(p["sessionId"], p["approval"]) for p in followed(daemon, "session/modeChanged")]
    assert told == [(session_id, "plan"), (session_id, "ask")]  # for its turn, then back


async def test_an_unknown_command_and_a_prompt_with_a_command_are_refused(
    daemon: Daemon, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    command_file(user_commands(tmp_path), "known", "Known.")
    session = await open_session(daemon, workspace)
    session_id = session["sessionId"]

    unknown = await daemon.error("session/turn", {"sessionId": session_id, "command": "nope"})
    both = await daemon.error(
        "session/turn", {"sessionId": session_id, "command": "known", "prompt": "and this"}
    )
    neither = await daemon.error("session/turn", {"sessionId": session_id})

    assert unknown.code == -32602 and "/nope" in unknown.message
    assert both.code == -32602 and "not both" in both.message
    assert neither.code == -32602
    assert model.requests == []


async def test_a_project_commands_check_runs_only_as_the_policy_allows_it(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    python = sys.executable
    folder = project_commands(workspace)
    (workspace / "check.py").write_text(SECOND_TIME)
    command_file(folder, "allowed", "Fix $1.", verify=[python, "$1"], maxSteps=3)
    command_file(folder, "unknown", "Clean up.", verify=["rm", "-rf", "build"])
    allowed = [f"{python} '$1'", f"{python} check.py"]  # as shlex.join writes them
    policy = {
        "approval": "auto",
        "layers": [{"name": "editor", "allowRead": ["**"], "allowExec": allowed}],
    }
    session = await open_session(daemon, workspace, policy=policy)
    session_id = session["sessionId"]

    listed = (await daemon.call("session/commands", {"sessionId": session_id}))["commands"]
    shown = {c["name"]: c for c in listed}
    assert shown["allowed"]["settings"]["verify"] == [python, "$1"]
    assert "verify" not in shown["unknown"]["settings"]
    assert [n["setting"] for n in shown["unknown"]["narrowed"]] == ["verify"]

    # The check the arguments make is judged as it would run.
    refused = await daemon.error(
        "session/turn", {"sessionId": session_id, "command": "allowed", "arguments": "other.py"}
    )
    assert refused.code == -32602 and "other.py" in refused.message
    assert model.requests == []

    model.reply("Not yet.")
    model.reply("Done.")
    result = await daemon.call(
        "session/turn", {"sessionId": session_id, "command": "allowed", "arguments": "check.py"}
    )
    assert result["outcome"] == "success"
    checks = await events(daemon, result["runId"], "check")
    assert [c["detail"]["passed"] for c in checks] == [False, True]
