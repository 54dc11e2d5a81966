"""The approval modes ``plan`` and ``acceptEdits``: plan mode refuses every change ahead of the
layers and names itself; accept-edits lets the layers' writes run and asks for the rest."""

from __future__ import annotations

import pytest

from trellisd.policy import Policy
from trellisd.policy.layers import MODE_LAYER, STRICTNESS, Layer
from trellisd.tools.base import Action

EDITOR = Layer("editor", allow_read=("**",), allow_write=("**",), allow_exec=("*",))
DENY = Layer("guard", deny_write=("secret/**",), deny_exec=("rm *",))


def ruling(approval: str, action: Action, sandbox: str | None = None) -> tuple[str, str | None]:
    policy = Policy((EDITOR, DENY), approval, sandbox=sandbox)  # type: ignore[arg-type]
    verdict = policy.check(action)
    return verdict.ruling, verdict.layer


@pytest.mark.parametrize(
    "action",
    [
        Action("write", "a.py"),
        Action("write", "secret/key"),
        Action("write", ".git/config"),
        Action("exec", "pytest -q"),
        Action("exec", "rm -rf src"),
        Action("exec", "pytest", escalate=True),
        Action("exec", "mcp:files/delete"),
    ],
)
def test_plan_mode_refuses_every_change_naming_the_mode(action: Action) -> None:
    policy = Policy((EDITOR, DENY), "plan", session_grants=frozenset({action}))
    verdict = policy.check(action)
    assert (verdict.ruling, verdict.layer, verdict.rule) == ("refuse", MODE_LAYER, "plan")
    assert "plan mode" in verdict.reason


def test_plan_mode_still_reads_what_the_layers_allow() -> None:
    assert ruling("plan", Action("read", "src/a.py")) == ("allow", "editor")


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (Action("write", "a.py"), ("allow", "editor")),
        (Action("write", "secret/key"), ("refuse", "guard")),
        (Action("exec", "pytest -q"), ("ask", "editor")),
        (Action("exec", "mcp:files/delete"), ("ask", "editor")),
        (Action("exec", "rm -rf src"), ("refuse", "guard")),
    ],
)
def test_accept_edits_runs_the_layers_writes_and_asks_for_commands(
    action: Action, expected: tuple[str, str | None]
) -> None:
    assert ruling("acceptEdits", action) == expected
    assert ruling("acceptEdits", action, sandbox="off") == expected  # the walls do not matter


def test_accept_edits_still_asks_before_a_protected_path() -> None:
    policy = Policy((Layer("editor", allow_write=("**", ".vscode/**")),), "acceptEdits")
    assert policy.check(Action("write", ".vscode/tasks.json")).ruling == "ask"


def test_the_modes_order_from_loosest_to_strictest() -> None:
    assert sorted(STRICTNESS, key=STRICTNESS.__getitem__) == [
        "all",
        "auto",
        "acceptEdits",
        "ask",
        "plan",
        "never",
    ]
