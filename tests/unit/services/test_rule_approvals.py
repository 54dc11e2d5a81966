"""A command's approval proposes a rule, and ``allowRule`` saves it: later commands it covers
run unasked, others still ask; the rule is in the approval's event. With no rule proposed
(a write, a command that runs code given to it, an escalation) the new answers do what
``allowAlways`` does there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fixtures.fake_services import Editor, Model
from tests.unit.services.test_services import events, write
from trellisd.records import ToolCall
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Decision


def command(*argv: str, **extra: Any) -> ToolCall:
    return ToolCall(f"call-{argv[-1]}", "run_command", {"argv": list(argv), **extra})


async def one_call(app: Services, model: Model, session: str, call: ToolCall) -> str:
    model.reply("", call)
    model.reply("Done.")
    return (await app.turns.turn(TurnRequest(session, "go"))).run_id


async def test_allow_rule_saves_the_proposed_rule_and_it_covers_later_commands(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    editor.decisions = [Decision.ALLOW_RULE, Decision.DENY, Decision.DENY]
    first = await one_call(app, model, session, command("touch", "a"))
    [asked] = editor.asked
    assert asked["proposedRule"] == ["touch", "**"]
    [approval] = await events(app, first, "approval")
    assert approval["decision"] == "allowRule" and approval["rule"] == ["touch", "**"]
    assert (root / "a").exists()

    await one_call(app, model, session, command("touch", "b", "c"))
    assert len(editor.asked) == 1 and (root / "c").exists()
    refused = await one_call(app, model, session, command("sh", "-c", "touch d"))
    assert len(editor.asked) == 2 and "proposedRule" not in editor.asked[1]
    assert not (root / "d").exists()
    await one_call(app, model, session, command("mkdir", "e"))
    assert editor.asked[2]["proposedRule"] == ["mkdir", "**"] and not (root / "e").exists()
    assert [g["kind"] for g in (await app.sessions.policy(session)).to_wire()["grants"]] == ["rule"]
    [denied] = await events(app, refused, "approval")
    assert denied["decision"] == "deny" and "rule" not in denied


async def test_allow_rule_with_no_rule_proposed_grants_the_exact_action(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    editor.decisions = [Decision.ALLOW_RULE_PROJECT, Decision.ALLOW_RULE]
    written = await one_call(app, model, session, write("a.txt"))
    assert "proposedRule" not in editor.asked[0]
    [approval] = await events(app, written, "approval")
    assert approval["decision"] == "allowRuleProject" and "rule" not in approval
    await one_call(app, model, session, command("sh", "-c", "touch x"))
    grants = (await app.sessions.policy(session)).to_wire()["grants"]
    assert grants == [
        {"kind": "exec", "target": "sh -c 'touch x'", "scope": "session"},
        {"kind": "write", "target": "a.txt", "scope": "project"},
    ]
    await one_call(app, model, session, command("sh", "-c", "touch x"))
    await one_call(app, model, session, write("a.txt", "again"))
    assert len(editor.asked) == 2


async def test_an_escalation_proposes_no_rule_and_an_allow_rule_answer_allows_it_once(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    editor.decisions = [Decision.ALLOW_RULE, Decision.DENY]
    way_out = command("touch", "out", escalate=True, reason="needs the network")
    await one_call(app, model, session, way_out)
    assert editor.asked[0]["kind"] == "escalate" and "proposedRule" not in editor.asked[0]
    assert (await app.sessions.policy(session)).to_wire()["grants"] == []
    await one_call(app, model, session, way_out)
    assert len(editor.asked) == 2
