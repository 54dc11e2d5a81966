"""Restores and reverts ask before they write a protected path (a git hook, an editor's
tasks), as a tool's write does, whatever rule of the session's policy names it: one that
came with an imported session's file included. Denied, or with nobody to ask, such a path is
left as it is (``protected``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.fixtures.fake_services import Editor, Model
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.policy import LayerSpec, PolicySpec
from trellisd.records import Restored, ToolCall
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Decision, Outcome

NAMING = PolicySpec(
    layers=(
        LayerSpec(
            name="editor",
            allow_read=("**",),
            allow_write=("**", ".git/**", ".vscode/**"),
            allow_exec=("*",),
        ),
    ),
    approval="all",
)
HOOK, TASKS = ".git/hooks/post-checkout", ".vscode/tasks.json"
PLANTED = {HOOK: "#!/bin/sh\ntouch pwned\n", TASKS: '{"tasks": [{"command": "touch pwned"}]}\n'}


@pytest_asyncio.fixture
async def app(tmp_path: Path, model: Model, editor: Editor) -> AsyncIterator[Services]:
    started = await services.start(
        tmp_path / "store.db",
        ProviderSettings(name="openai"),
        editor,
        lambda s: model,
        asker=editor,
    )
    yield started
    await started.close()


async def planting_turn(app: Services, model: Model, editor: Editor, root: Path) -> tuple[str, str]:
    """A session whose one turn writes a git hook and an editor task, both approved:
    ``(session_id, turn_id)``."""
    sid = (await app.sessions.open(str(root), None, None, NAMING)).session_id
    editor.decisions = [Decision.ALLOW, Decision.ALLOW]
    for path, text in PLANTED.items():
        model.reply("", ToolCall(f"c-{path}", "write_file", {"path": path, "content": text}))
    model.reply("Done.")
    result = await app.turns.turn(TurnRequest(sid, "set things up"))
    assert result.outcome == Outcome.FINISHED
    assert {p: (root / p).read_text() for p in PLANTED} == PLANTED
    editor.asked.clear()
    return sid, result.turn_id


def on_disk(root: Path) -> dict[str, str | None]:
    return {p: (root / p).read_text() if (root / p).exists() else None for p in PLANTED}


def reasons(restored: Restored | None) -> dict[str, str]:
    assert restored is not None
    return {s.path: s.reason for s in restored.skipped}


async def test_a_revert_asks_before_it_touches_a_protected_path_and_a_denial_leaves_it(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    _, turn_id = await planting_turn(app, model, editor, root)
    editor.decisions = [Decision.DENY, Decision.ALLOW]
    reverted = await app.changes.revert(turn_id, force=False)
    assert [a["summary"] for a in editor.asked] == [
        f"turn/revert wants to write {HOOK}",
        f"turn/revert wants to write {TASKS}",
    ]
    assert editor.asked[0]["arguments"] == {"path": HOOK}
    assert f"--- a/{HOOK}\n+++ /dev/null\n" in editor.asked[0]["diff"]
    assert reverted.restored == [TASKS] and reasons(reverted) == {HOOK: "protected"}
    assert on_disk(root) == {HOOK: PLANTED[HOOK], TASKS: None}


async def test_an_imported_sessions_restore_asks_before_it_writes_a_hook_or_a_task(
    app: Services, model: Model, editor: Editor, root: Path, tmp_path: Path
) -> None:
    sid, turn_id = await planting_turn(app, model, editor, root)
    path = tmp_path / "session.trellisd"
    await app.archive.export(sid, str(path))
    await app.sessions.delete(sid)
    for planted in PLANTED:
        (root / planted).unlink()
    imported = await app.archive.import_(str(path), str(root), False)
    # Its file's layers name .git/** and .vscode/**: back to before its turn (nothing to
    # write), then forward to its turn, which would plant both.
    await app.sessions.branch(imported.session_id, None, restore_files=True, force=True)
    assert editor.asked == []
    editor.decisions = [Decision.DENY, Decision.DENY]
    _, forward = await app.sessions.branch(imported.session_id, turn_id, restore_files=True)
    assert [a["summary"] for a in editor.asked] == [
        f"session/branch wants to write {HOOK}",
        f"session/branch wants to write {TASKS}",
    ]
    assert f"+++ b/{HOOK}\n" in editor.asked[0]["diff"]
    assert reasons(forward) == {HOOK: "protected", TASKS: "protected"}
    assert on_disk(root) == {HOOK: None, TASKS: None}


async def test_with_nobody_to_ask_a_restore_leaves_protected_paths_and_writes_the_rest(
    app: Services, model: Model, editor: Editor, root: Path
) -> None:
    sid, turn_id = await planting_turn(app, model, editor, root)
    model.reply("", ToolCall("c-n", "write_file", {"path": "notes.txt", "content": "n\n"}))
    model.reply("Done.")
    await app.turns.turn(TurnRequest(sid, "a note"))
    editor.present = False
    _, back = await app.sessions.branch(sid, None, restore_files=True)
    assert editor.asked == []
    assert back is not None and back.restored == ["notes.txt"]
    assert reasons(back) == {HOOK: "protected", TASKS: "protected"}
    assert on_disk(root) == PLANTED and not (root / "notes.txt").exists()
