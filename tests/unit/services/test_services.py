"""The services in-process, over a real store in a temp folder, a fake provider and a fake
editor: approvals, refusals, bounded turns, steers handed back, cancel and resume."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.fake_services import Editor, Model
from trellisd import services
from trellisd.agent.steering import Steer
from trellisd.config import ProviderSettings
from trellisd.policy import LayerSpec, PolicySpec
from trellisd.records import Step, Tokens, ToolCall
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Decision, Outcome, StepKind


def write(path: str, content: str = "x") -> ToolCall:
    return ToolCall(f"call-{path}", "write_file", {"path": path, "content": content})


async def events(app: Services, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.detail for e in await app.runs.events(run_id) if e.kind == kind]


async def open_session(app: Services, root: Path, policy: PolicySpec | None = None) -> str:
    session = await app.sessions.open(str(root), None, None, policy)
    return session.session_id


@pytest.mark.parametrize("decision", [Decision.ALLOW, Decision.ALLOW_ALWAYS])
async def test_an_approved_write_happens(
    app: Services, model: Model, editor: Editor, root: Path, decision: Decision
) -> None:
    session = await open_session(app, root)
    editor.decisions = [decision]
    model.reply("", write("a.txt"))
    model.reply("Written.")

    result = await app.turns.turn(TurnRequest(session, "write a"))

    assert result.outcome == Outcome.FINISHED
    assert (root / "a.txt").read_text() == "x"
    assert editor.asked[0]["summary"] == "write_file wants to write a.txt"
    assert [e["decision"] for e in await events(app, result.run_id, "approval")] == [decision]
    assert await events(app, result.run_id, "refusal") == []


async def test_allow_always_is_not_asked_again_in_the_session(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    session = await open_session(app, root)
    editor.decisions = [Decision.ALLOW_ALWAYS]
    model.reply("", write("a.txt"))
    model.reply("", write("a.txt", "y"))
    model.reply("Written twice.")

    await app.turns.turn(TurnRequest(session, "write a twice"))

    assert len(editor.asked) == 1
    assert (root / "a.txt").read_text() == "y"
    grants = (await app.sessions.policy(session)).to_wire()["grants"]
    assert grants == [{"kind": "write", "target": "a.txt", "scope": "session"}]


@pytest.mark.parametrize("decision", [Decision.DENY, Decision.TIMEOUT])
async def test_a_write_the_user_did_not_approve_is_refused(
    app: Services, model: Model, editor: Editor, root: Path, decision: Decision
) -> None:
    session = await open_session(app, root)
    editor.decisions = [decision]
    model.reply("", write("a.txt"))
    model.reply("I may not.")

    result = await app.turns.turn(TurnRequest(session, "write a"))

    assert not (root / "a.txt").exists()
    [refusal] = await events(app, result.run_id, "refusal")
    assert (refusal["layer"], refusal["rule"]) == ("approval", decision.value)
    told = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert told and f"({decision.value})" in told[0]


async def test_a_denied_write_is_refused_by_its_layer_without_asking(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    policy = PolicySpec((LayerSpec("project", allow_write=("**",), deny_write=("secret*",)),))
    session = await open_session(app, root, policy)
    model.reply("", write("secret.txt"))
    model.reply("Refused.")

    result = await app.turns.turn(TurnRequest(session, "write the secret"))

    assert editor.asked == []
    assert not (root / "secret.txt").exists()
    [refusal] = await events(app, result.run_id, "refusal")
    assert (refusal["layer"], refusal["rule"]) == ("project", "secret*")
    assert refusal["action"] == {"kind": "write", "target": "secret.txt"}


async def test_a_passing_check_ends_a_bounded_turn_in_success(
    app: Services, model: Model, root: Path
) -> None:
    session = await open_session(app, root)
    model.reply("Done.")
    check = ([sys.executable, "-c", "print('all good')"], 0)

    result = await app.turns.turn(TurnRequest(session, "do it", max_steps=3, verify=check))

    assert result.outcome == Outcome.SUCCESS
    [ran] = await events(app, result.run_id, "check")
    assert ran["passed"] is True and "all good" in ran["output"]


async def test_a_failing_check_goes_back_to_the_model_until_failure(
    app: Services, model: Model, root: Path
) -> None:
    session = await open_session(app, root)
    check = ([sys.executable, "-c", "import sys; print('broken'); sys.exit(3)"], 0)

    result = await app.turns.turn(TurnRequest(session, "do it", max_steps=2, verify=check))

    assert result.outcome == Outcome.FAILURE
    checks = await events(app, result.run_id, "check")
    assert [c["exitCode"] for c in checks] == [3, 3]
    told = model.requests[1].messages[-1].content
    assert "failed (exit 3, expected 0)" in told and "broken" in told


async def test_cancel_stops_the_turn_and_hands_back_its_steers(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    session = await open_session(app, root)
    model.reply("never said", hold=asyncio.Event())
    running = asyncio.ensure_future(app.turns.turn(TurnRequest(session, "wait")))
    await asyncio.wait_for(model.waiting.wait(), 10)
    ref, new = await app.turns.steer(session, "also this", "m-1")
    assert new
    assert (await app.turns.steer(session, "also this", "m-1"))[1] is False

    assert await app.turns.cancel(session) == ref
    result = await asyncio.wait_for(running, 10)

    assert result.outcome == Outcome.CANCELLED
    assert editor.returned == [Steer("also this", "m-1")]
    returned = await events(app, ref.run_id, "steer-returned")
    assert returned == [{"text": "also this", "clientMsgId": "m-1"}]
    assert await app.turns.cancel(session) is None


async def test_an_interrupted_turn_resumes_under_its_run(
    tmp_path: Path, model: Model, editor: Editor, root: Path
) -> None:
    db = tmp_path / "store.db"
    first = await services.start(db, ProviderSettings(name="openai"), editor, lambda s: model)
    session = await open_session(first, root)
    turn_id, run_id, _ = await first.store.runs.begin(session, "read it", "fake-model")
    call = ToolCall("call-1", "list_dir", {"path": "."})
    await first.store.runs.add_step(
        run_id, Step(1, StepKind.TOOL, "read it", "Looking. ", call, "a.txt", Tokens(1, 1, 0))
    )
    await first.close()  # it stopped without ending the turn
    leftover = root / "sub" / ".trellisd-write-0123456789ab-notes.md"
    leftover.parent.mkdir()
    leftover.write_text("half a file")
    (root / "sub" / "notes.md").write_text("the user's own file")

    second = await services.start(db, ProviderSettings(name="openai"), editor, lambda s: model)
    try:
        assert (await second.sessions.turns(session))[0].outcome == Outcome.INTERRUPTED
        model.reply("There is a.txt.")
        result = await second.turns.resume(session, turn_id)
    finally:
        await second.close()

    assert (result.run_id, result.outcome) == (run_id, Outcome.FINISHED)
    assert result.reply == "There is a.txt."
    assert not leftover.exists() and (root / "sub" / "notes.md").exists()
    replayed = model.requests[0].messages
    assert any(m.role == "tool" and m.content == "a.txt" for m in replayed)


async def test_closing_the_services_lets_go_of_the_providers_connections(
    tmp_path: Path, model: Model, editor: Editor, root: Path
) -> None:
    app = await services.start(
        tmp_path / "own.db", ProviderSettings(name="openai"), editor, lambda s: model
    )
    session_id = await open_session(app, root)
    await app.turns.turn(TurnRequest(session_id, "hi"))
    assert not model.closed
    await app.close()
    assert model.closed
