"""A restore asked about a protected path takes the rule answers as an allow: a restore
proposes no rule, so ``allowRule`` and ``allowRuleProject`` let it write, as ``allow`` does."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.fake_services import Editor, Model
from tests.unit.services.test_restore_protected import (  # noqa: F401 (the fixture)
    HOOK,
    TASKS,
    app,
    on_disk,
    planting_turn,
)
from trellisd.services import Services
from trellisd.vocabulary import Decision


async def test_a_revert_answered_with_a_rule_decision_restores_the_protected_paths(
    app: Services,  # noqa: F811
    model: Model,
    editor: Editor,
    root: Path,
) -> None:
    _, turn_id = await planting_turn(app, model, editor, root)
    editor.decisions = [Decision.ALLOW_RULE, Decision.ALLOW_RULE_PROJECT]
    reverted = await app.changes.revert(turn_id, force=False)
    assert len(editor.asked) == 2 and all("proposedRule" not in a for a in editor.asked)
    assert sorted(reverted.restored) == sorted([HOOK, TASKS])
    assert on_disk(root) == {HOOK: None, TASKS: None}
