"""Policy.check: deny beats allow across layers, no allow refuses, approval modes, grants."""

from __future__ import annotations

from pathlib import Path

import pytest

from trellisd.policy import DEFAULT_POLICY, Action, Approval, Layer, Policy, Verdict
from trellisd.tools import ToolContext
from trellisd.tools.files import ReadFile

READ = Action("read", "src/app.py")
WRITE = Action("write", "src/app.py")
EXEC = Action("exec", "pytest -q")


def policy(*layers: Layer, approval: Approval | None = "all") -> Policy:
    return Policy(layers, approval)


def test_a_deny_in_any_layer_beats_an_allow_in_any_other() -> None:
    base = Layer("default", allow_read=("**",), allow_write=("**",), allow_exec=("*",))
    project = Layer("project", deny_write=("src/**",), deny_exec=("git push*",))
    caller = Layer("editor", allow_write=("src/app.py",), allow_exec=("git push origin",))
    stack = policy(base, project, caller)
    assert stack.check(WRITE) == Verdict(
        "refuse",
        "project",
        "src/**",
        "Writing src/app.py is refused by the rule 'src/**' of the policy layer 'project'.",
    )
    refused = stack.check(Action("exec", "git push origin"))
    assert (refused.ruling, refused.layer, refused.rule) == ("refuse", "project", "git push*")
    # a deny in the least specific layer still wins over an allow in the most specific one
    stack = policy(
        Layer("default", allow_read=("**",), deny_read=(".env",)),
        Layer("editor", allow_read=(".env",)),
    )
    assert stack.check(Action("read", ".env")).ruling == "refuse"
    assert stack.check(READ).ruling == "allow"


def test_with_no_matching_allow_the_action_is_refused() -> None:
    stack = policy(Layer("narrow", allow_read=("docs/**",), allow_exec=("pytest*",)))
    assert stack.check(READ) == Verdict(
        "refuse", None, None, "Reading src/app.py is refused: no rule of the policy allows it."
    )
    assert stack.check(WRITE).ruling == "refuse"
    assert stack.check(Action("exec", "rm -rf /")).ruling == "refuse"
    assert stack.check(Action("read", "docs/guide/intro.md")).ruling == "allow"
    assert stack.check(EXEC).ruling == "allow"
    assert policy().check(READ).ruling == "refuse"


def test_an_allow_names_its_layer_and_rule() -> None:
    stack = policy(Layer("default", allow_read=("**",)), Layer("editor", allow_read=("src/**",)))
    assert stack.check(READ) == Verdict(
        "allow", "editor", "src/**", "Reading src/app.py is allowed."
    )


@pytest.mark.parametrize(
    ("approval", "read", "write", "exec_"),
    [
        ("all", "allow", "allow", "allow"),
        ("ask", "allow", "ask", "ask"),
        ("never", "allow", "refuse", "refuse"),
        (None, "allow", "ask", "ask"),
    ],
)
def test_approval_modes(approval: Approval | None, read: str, write: str, exec_: str) -> None:
    stack = policy(*DEFAULT_POLICY.layers, approval=approval)
    assert [stack.check(a).ruling for a in (READ, WRITE, EXEC)] == [read, write, exec_]


def test_approval_never_refuses_in_its_own_words() -> None:
    verdict = policy(*DEFAULT_POLICY.layers, approval="never").check(EXEC)
    assert verdict == Verdict(
        "refuse",
        "approval",
        "never",
        "Running `pytest -q` is refused: this session is read-only (approval 'never').",
    )


def test_an_ask_names_the_allow_rule_and_says_why() -> None:
    assert DEFAULT_POLICY.check(WRITE) == Verdict(
        "ask", "default", "**", "Writing src/app.py needs the user's approval."
    )


def test_a_grant_turns_that_exact_ask_into_an_allow() -> None:
    granted = DEFAULT_POLICY.with_grant(EXEC).with_grant(WRITE)
    assert granted.check(EXEC) == Verdict(
        "allow", "grant", "pytest -q", "Running `pytest -q` is allowed for this session."
    )
    assert granted.check(WRITE).ruling == "allow"
    assert granted.check(Action("exec", "pytest -q tests")).ruling == "ask"
    assert granted.check(Action("write", "src/other.py")).ruling == "ask"
    assert granted.check(Action("read", "pytest -q")).ruling == "allow"
    assert DEFAULT_POLICY.check(EXEC).ruling == "ask", "the grant made a new policy"


def test_a_grant_never_lifts_a_deny_or_read_only() -> None:
    deny = DEFAULT_POLICY.stacked(policy(Layer("editor", deny_exec=("pytest*",)), approval=None))
    assert deny.with_grant(EXEC).check(EXEC).ruling == "refuse"
    never = DEFAULT_POLICY.stacked(policy(approval="never"))
    assert never.with_grant(EXEC).check(EXEC).ruling == "refuse"


def test_may_read_follows_the_read_rules() -> None:
    stack = DEFAULT_POLICY.stacked(
        policy(Layer("editor", deny_read=("secrets/**",)), approval=None)
    )
    assert stack.may_read("src/app.py")
    assert not stack.may_read("secrets/key.pem")
    assert not stack.may_read("secrets")


async def test_a_symlink_into_a_denied_folder_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.pem").write_text("KEY")
    (tmp_path / "innocent.txt").symlink_to(tmp_path / "secrets" / "key.pem")
    stack = DEFAULT_POLICY.stacked(
        policy(Layer("editor", deny_read=("secrets/**",)), approval=None)
    )
    action = ReadFile().action({"path": "innocent.txt"}, ToolContext(tmp_path))
    assert stack.check(action).ruling == "refuse"


@pytest.mark.parametrize(
    "target",
    [
        ".trellisd.toml",
        ".git/config",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/config",
        ".vscode/settings.json",
        ".vscode/tasks.json",
        ".nvim.lua",
        ".envrc",
        "tools/.envrc",
    ],
)
def test_a_protected_path_is_not_writable_through_a_wide_allow(target: str) -> None:
    """``**`` does not name them: the write is refused, whatever the approval."""
    wide = Layer("default", allow_read=("**",), allow_write=("**",), allow_exec=("*",))
    for approval in ("all", "ask"):
        verdict = policy(wide, approval=approval).check(Action("write", target))
        assert verdict.ruling == "refuse"
        assert f"{target} is protected" in verdict.reason
    assert policy(wide).check(Action("read", target)).ruling == "allow"


def test_a_protected_path_named_by_an_allow_rule_always_asks() -> None:
    named = Layer("editor", allow_write=("**", ".vscode/settings.json", ".git/**"))
    for approval in ("all", "ask"):
        strict = policy(named, approval=approval)
        settings = Action("write", ".vscode/settings.json")
        assert strict.check(settings).ruling == "ask"
        assert strict.with_grant(settings).check(settings).ruling == "ask"
        assert strict.check(Action("write", ".git/config")).rule == ".git/**"
        assert strict.check(Action("write", ".vscode/tasks.json")).ruling == "refuse"
    assert policy(named, approval="never").check(settings).ruling == "refuse"
    assert policy(named).check(Action("write", ".github/ci.yml")).ruling == "allow"
