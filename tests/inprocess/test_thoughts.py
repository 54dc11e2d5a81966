"""What the model reasons, over the native protocol: streamed as ``session/thought`` before the
step's text, kept as the step's ``thought`` (``run/steps``) and a ``thought`` event, counted as
reasoning tokens; and the effort a session and a turn ask for, recorded in the run's ``model``
event. The scripted model reasons here: the providers' wires are tested with their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests import protocol_schema
from tests.fixtures.driver import Daemon, DaemonFactory, events, followed, open_session, turn
from tests.fixtures.model_server import ModelServer

THOUGHT = "The user wants a greeting. Keep it short."
THREE = ("session/thought", "session/token", "session/step")


def scripted(tmp_path: Path, *lines: dict[str, Any]) -> dict[str, str]:
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return {"TRELLISD_PROVIDER": "scripted", "TRELLISD_SCRIPT": str(script)}


async def test_thoughts_stream_before_the_text_and_are_kept_with_the_step(
    spawn: DaemonFactory, tmp_path: Path, workspace: Path
) -> None:
    daemon = await spawn(env=scripted(tmp_path, {"thought": THOUGHT, "text": "Hello there."}))
    session = await open_session(daemon, workspace)

    result = await turn(daemon, session, "greet me")

    told = [m for m in daemon.protocol.received if m.get("method") in THREE]
    thoughts = [m["params"] for m in told if m["method"] == "session/thought"]
    for params in thoughts:
        protocol_schema.check("notifications", "session/thought", "params", params)
    assert "".join(t["text"] for t in thoughts) == THOUGHT
    assert {(t["runId"], t["step"]) for t in thoughts} == {(result["runId"], 1)}
    kinds = [m["method"] for m in told]
    assert (
        kinds.index("session/step") > kinds.index("session/token") > kinds.index("session/thought")
    )
    assert "session/thought" not in kinds[kinds.index("session/token") :]

    reasoned = len(THOUGHT.split())
    (step,) = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert step["thought"] == THOUGHT and step["text"] == "Hello there."
    assert step["tokens"]["reasoning"] == reasoned
    assert step["tokens"]["output"] == reasoned + 2  # reasoning is part of the output
    (event,) = await events(daemon, result["runId"], "thought")
    assert event["step"] == 1
    assert event["detail"] == {
        "text": THOUGHT,
        "provider": "scripted",
        "items": [],
        "tokens": reasoned,
    }
    assert daemon.usages[-1]["tokens"]["turn"]["reasoning"] == reasoned
    assert result["tokens"]["reasoning"] == reasoned
    summary = await daemon.call("run/summary", {"runId": result["runId"]})
    assert summary["tokens"]["reasoning"] == reasoned
    (shown,) = (await daemon.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert shown["tokens"]["reasoning"] == reasoned


async def test_a_step_that_did_not_reason_has_no_thought(
    spawn: DaemonFactory, tmp_path: Path, workspace: Path
) -> None:
    daemon = await spawn(env=scripted(tmp_path, {"text": "Plain."}))
    session = await open_session(daemon, workspace)

    result = await turn(daemon, session, "hi")

    (step,) = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert "thought" not in step and "reasoning" not in step["tokens"]
    assert followed(daemon, "session/thought") == []
    assert await events(daemon, result["runId"], "thought") == []


async def test_the_effort_of_the_session_and_of_a_turn_is_recorded_in_the_model_event(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, provider={"effort": "low"})
    assert session["provider"]["effort"] == "low"

    own = await turn(daemon, session, "think a little")
    harder = await turn(daemon, session, "think hard", effort="high")

    (first,) = await events(daemon, own["runId"], "model")
    (second,) = await events(daemon, harder["runId"], "model")
    assert (first["detail"]["effort"], second["detail"]["effort"]) == ("low", "high")
    assert len(model.requests) == 2


async def test_an_effort_of_no_known_level_is_refused_naming_it(
    daemon: Daemon, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)

    refused = await daemon.error(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "x", "effort": "max"}
    )
    opened = await daemon.error(
        "session/open", {"root": str(workspace), "provider": {"effort": "extreme"}}
    )

    assert (refused.code, refused.data["field"]) == (-32602, "effort")
    assert refused.message == "effort must be low, medium or high"
    assert (opened.code, opened.data["field"]) == (-32602, "provider.effort")


async def test_a_thought_goes_with_its_session_through_export_and_import(
    spawn: DaemonFactory, tmp_path: Path, workspace: Path
) -> None:
    signed = {"type": "thinking", "thinking": THOUGHT, "signature": "c2lnbmVk"}
    line = {"thought": THOUGHT, "reasoningItems": [signed], "text": "Hello there."}
    first = await spawn(env=scripted(tmp_path, line))
    session = await open_session(first, workspace, provider={"effort": "medium"})
    result = await turn(first, session, "greet me")
    path = tmp_path / "greeting.trellisd"
    await first.call("session/export", {"sessionId": session["sessionId"], "path": str(path)})

    second = await spawn(db=tmp_path / "elsewhere" / "trellisd.db")
    imported = await second.call("session/import", {"path": str(path)})

    assert imported["provider"]["effort"] == "medium"
    run = {"runId": result["runId"]}
    assert await second.call("run/steps", run) == await first.call("run/steps", run)
    (event,) = await events(second, result["runId"], "thought")
    assert event["detail"]["items"] == [signed]
    assert (await second.call("session/verify", {"sessionId": session["sessionId"]}))["ok"]
