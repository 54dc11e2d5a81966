"""Plans and modes over real pipes: the model keeps a plan with update_plan, plan mode refuses
what would change anything and says so, session/plan/approve runs the plan in a new turn
under the mode the editor chose, and acceptEdits writes without asking but asks for commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fixtures.driver import (
    DaemonFactory,
    answer_approvals,
    call,
    events,
    followed,
    open_session,
    python,
    tool_results,
    turn,
    write,
)
from tests.fixtures.model_server import ModelServer

PLAN = [
    {"content": "Read the parser", "status": "completed"},
    {"content": "Write notes.md", "status": "in_progress", "priority": "high"},
    {"content": "Run the tests", "status": "pending"},
]
ALLOW_ALL_LAYERS = {
    "layers": [{"name": "editor", "allowRead": ["**"], "allowWrite": ["**"], "allowExec": ["*"]}]
}


def update_plan(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return call("update_plan", entries=entries)


async def test_plan_mode_plans_refuses_changes_and_the_approved_plan_runs_in_a_new_turn(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    asked = answer_approvals(daemon, ["deny"] * 3)
    session = await open_session(daemon, workspace, policy=ALLOW_ALL_LAYERS)
    sid = session["sessionId"]
    policy = await daemon.call("session/mode", {"sessionId": sid, "approval": "plan"})
    assert policy["approval"] == "plan"
    assert followed(daemon, "session/modeChanged") == [{"sessionId": sid, "approval": "plan"}]

    model.reply("", tool_calls=[update_plan(PLAN)])
    model.reply("", tool_calls=[write("notes.md", "planned")])
    model.reply("", tool_calls=[python("print(1)")])
    model.reply("Here is the plan.")
    planned = await turn(daemon, session, "plan the notes")
    assert planned["outcome"] == "finished"
    assert not (workspace / "notes.md").exists() and asked == []  # refused, never asked
    assert model.requests[0]["messages"][-1]["content"].startswith("<mode>The session is in plan")

    told = followed(daemon, "session/plan")
    assert [(p["turnId"], p["step"], p["entries"]) for p in told] == [(planned["turnId"], 1, PLAN)]
    results = await tool_results(daemon, planned["runId"])
    assert results[0] == "Plan updated: 1 of 3 done."
    assert all("the session is in plan mode" in r for r in results[1:])
    refusals = await events(daemon, planned["runId"], "refusal")
    assert [(r["detail"]["mode"], r["detail"]["layer"]) for r in refusals] == [
        ("plan", "mode"),
        ("plan", "mode"),
    ]
    history = (await daemon.call("session/history", {"sessionId": sid}))["turns"]
    assert history[-1]["plan"] == {"step": 1, "entries": PLAN}
    reopened = await daemon.call("session/reopen", {"sessionId": sid})
    assert reopened["history"][-1]["plan"] == {"step": 1, "entries": PLAN}

    done = [{**e, "status": "completed"} for e in PLAN]
    model.reply("", tool_calls=[write("notes.md", "carried out")])
    model.reply("", tool_calls=[update_plan(done)])
    model.reply("All done.")
    ran = await daemon.call(
        "session/plan/approve",
        {"sessionId": sid, "turnId": planned["turnId"], "approval": "acceptEdits"},
    )
    assert ran["outcome"] == "finished" and asked == []  # acceptEdits: the write ran unasked
    assert (workspace / "notes.md").read_text() == "carried out"
    prompt = model.requests[-3]["messages"][-1]["content"]
    assert "1. [completed] Read the parser" in prompt and "3. [pending] Run the tests" in prompt
    turns = (await daemon.call("session/history", {"sessionId": sid}))["turns"]
    assert turns[-1]["followsPlan"] == {"turnId": planned["turnId"]}
    assert turns[-1]["plan"] == {"step": 2, "entries": done}
    approved = await events(daemon, ran["runId"], "plan-approved")
    assert approved[0]["detail"] == {"turnId": planned["turnId"], "entries": PLAN}
    policy = await daemon.call("session/policy", {"sessionId": sid})
    assert policy["approval"] == "acceptEdits"
    assert [p["approval"] for p in followed(daemon, "session/modeChanged")] == [
        "plan",
        "acceptEdits",  # the plan's approval changed the mode, and the window is told so
    ]
    daemon.check_sent()


async def test_accept_edits_writes_without_asking_and_asks_for_commands_and_protected_paths(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    asked = answer_approvals(daemon, ["deny", "deny"])
    policy = {
        "layers": [
            {
                "name": "editor",
                "allowRead": ["**"],
                "allowWrite": ["**", ".vscode/**"],
                "allowExec": ["*"],
                "denyWrite": ["secret/**"],
            }
        ],
        "approval": "acceptEdits",
    }
    session = await open_session(daemon, workspace, policy=policy)
    model.reply("", tool_calls=[write("a.txt", "1")])
    model.reply("", tool_calls=[python("print(1)")])
    model.reply("", tool_calls=[write(".vscode/tasks.json", "{}")])
    model.reply("", tool_calls=[write("secret/key", "x")])
    model.reply("done")
    result = await turn(daemon, session, "edit")
    assert (workspace / "a.txt").read_text() == "1"
    assert [a["tool"] for a in asked] == ["run_command", "write_file"]
    assert asked[1]["arguments"]["path"] == ".vscode/tasks.json"
    results = await tool_results(daemon, result["runId"])
    assert "refused by the rule 'secret/**'" in results[3]
    assert not (workspace / "secret").exists()


async def test_a_mode_is_kept_with_the_session_and_bad_plan_requests_are_clear(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "kept.db"
    first = await spawn(db=db)
    session = await open_session(first, workspace, policy=ALLOW_ALL_LAYERS)
    sid = session["sessionId"]
    await first.call("session/mode", {"sessionId": sid, "approval": "plan"})
    model.reply("Nothing to plan.")
    plain = await turn(first, session, "hello")
    await first.client.shutdown_session()
    await first.client.stop()

    second = await spawn(db=db)
    policy = await second.call("session/policy", {"sessionId": sid})
    assert policy["approval"] == "plan"
    tools = (await second.call("session/tools", {"sessionId": sid}))["tools"]
    rulings = {t["name"]: (t["kind"], t["policy"]) for t in tools}
    assert rulings["update_plan"] == ("none", "allow")
    assert rulings["start_process"] == ("exec", "refuse")
    assert rulings["read_process_output"] == ("none", "allow")
    assert rulings["write_file"] == ("write", "refuse")

    unplanned = await second.error(
        "session/plan/approve", {"sessionId": sid, "turnId": plain["turnId"]}
    )
    assert unplanned.code == -32602 and "made no plan" in unplanned.message
    in_plan = await second.error(
        "session/plan/approve", {"sessionId": sid, "turnId": plain["turnId"], "approval": "plan"}
    )
    assert in_plan.code == -32602 and "cannot run in plan mode" in in_plan.message
    unknown = await second.error(
        "session/plan/approve", {"sessionId": sid, "turnId": "no-such-turn"}
    )
    assert unknown.code == -32010
    bad = await second.error("session/mode", {"sessionId": sid, "approval": "sometimes"})
    assert bad.code == -32602 and "approval must be one of" in bad.message
    model.reply("", tool_calls=[update_plan([{"content": "x", "status": "done"}])])
    model.reply("ok")
    result = await turn(second, {"sessionId": sid}, "plan badly")
    results = await tool_results(second, result["runId"])
    assert "entries[0].status must be one of 'pending', 'in_progress' or 'completed'" in results[0]
    history = (await second.call("session/history", {"sessionId": sid}))["turns"]
    assert "plan" not in history[-1]
