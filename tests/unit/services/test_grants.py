"""Remembered approvals in-process: kept in the store with the session or its root, read
again by the next daemon, revoked one at a time; and the config file's default policy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fixtures.fake_services import Editor, Model
from tests.unit.services.test_services import write
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.config_file import Settings
from trellisd.errors import InvalidParams, NotFound
from trellisd.policy import Layer, Policy, PolicySpec
from trellisd.policy.layers import GrantSpec
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.tools.base import Action
from trellisd.vocabulary import Decision


async def grant_by_answer(
    app: Services, model: Model, editor: Editor, session: str, decision: Decision, path: str
) -> None:
    editor.decisions = [decision]
    model.reply("", write(path))
    model.reply("Written.")
    await app.turns.turn(TurnRequest(session, f"write {path}"))


async def grants(app: Services, session: str) -> list[dict[str, str]]:
    wire: list[dict[str, str]] = (await app.sessions.policy(session)).to_wire()["grants"]
    return wire


async def test_grants_outlive_the_daemon_and_a_project_grant_holds_on_its_root_only(
    tmp_path: Path, model: Model, editor: Editor, root: Path
) -> None:
    other_root = tmp_path / "other"
    other_root.mkdir()
    db = tmp_path / "store.db"
    app = await services.start(db, ProviderSettings(name="openai"), editor, lambda s: model)
    first = (await app.sessions.open(str(root), None, None, None)).session_id
    await grant_by_answer(app, model, editor, first, Decision.ALLOW_ALWAYS, "a.txt")
    await grant_by_answer(app, model, editor, first, Decision.ALLOW_ALWAYS_PROJECT, "b.txt")
    await app.close()

    app = await services.start(db, ProviderSettings(name="openai"), editor, lambda s: model)
    try:
        assert await grants(app, first) == [
            {"kind": "write", "target": "a.txt", "scope": "session"},
            {"kind": "write", "target": "b.txt", "scope": "project"},
        ]
        same = (await app.sessions.open(str(root), None, None, None)).session_id
        elsewhere = (await app.sessions.open(str(other_root), None, None, None)).session_id
        assert await grants(app, same) == [{"kind": "write", "target": "b.txt", "scope": "project"}]
        assert await grants(app, elsewhere) == []

        editor.asked.clear()
        model.reply("", write("b.txt", "again"))
        model.reply("Written.")
        await app.turns.turn(TurnRequest(same, "write b"))
        assert editor.asked == [] and (root / "b.txt").read_text() == "again"

        after = await app.sessions.revoke(first, Action("write", "b.txt"), "project")
        assert [g["target"] for g in after.to_wire()["grants"]] == ["a.txt"]
        assert await grants(app, same) == []
        with pytest.raises(NotFound, match="has no grant to write b.txt"):
            await app.sessions.revoke(first, Action("write", "b.txt"), None)
    finally:
        await app.close()


async def test_a_grant_of_the_sessions_own_policy_is_not_revoked_here(
    app: Services, root: Path
) -> None:
    spec = PolicySpec(grants=(GrantSpec("exec", "make"),))
    session = (await app.sessions.open(str(root), None, None, spec)).session_id
    with pytest.raises(InvalidParams, match="came with the session's policy"):
        await app.sessions.revoke(session, Action("exec", "make"), None)


async def test_a_deleted_session_takes_its_grants_along(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    await grant_by_answer(app, model, editor, session, Decision.ALLOW_ALWAYS, "a.txt")
    await app.sessions.delete(session)
    assert await app.store.grants.of(session, str(root)) == (frozenset(), frozenset())


async def test_sessions_stack_on_the_config_files_default_policy(
    tmp_path: Path, model: Model, editor: Editor, root: Path
) -> None:
    mine = Policy((Layer("mine", allow_read=("**",)),), "never")
    settings = Settings(ProviderSettings(name="openai"), policy=mine)
    app = await services.start(tmp_path / "s.db", settings, editor, lambda s: model)
    try:
        session = (await app.sessions.open(str(root), None, None, None)).session_id
        policy = await app.sessions.policy(session)
        assert [layer.name for layer in policy.layers] == ["mine"]
        assert policy.effective_approval == "never"
        loosened = PolicySpec(approval="ask")
        other = (await app.sessions.open(str(root), None, None, loosened)).session_id
        assert (await app.sessions.policy(other)).effective_approval == "ask"
    finally:
        await app.close()


async def test_a_policy_asked_for_while_it_is_first_read_is_answered_whole(
    app: Services, root: Path
) -> None:
    opened = await app.sessions.open(str(root), None, None, None)
    app.sessions.policies.forget(opened.session_id)  # read afresh, as after a reopen
    first = asyncio.ensure_future(app.sessions.policies.of(opened))
    meanwhile = []
    while not first.done():  # asked again at every turn of the loop while the first reads
        meanwhile.append(asyncio.ensure_future(app.sessions.policies.of(opened)))
        await asyncio.sleep(0)
    answers = await asyncio.gather(first, *meanwhile)
    assert len(meanwhile) > 1 and all(a == answers[0] for a in answers)
