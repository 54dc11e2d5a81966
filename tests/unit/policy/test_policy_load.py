"""load_policy: the daemon's default, then .trellisd.toml, then session/open's policy."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from trellisd.convert import structure
from trellisd.errors import InvalidParams
from trellisd.policy import DEFAULT_POLICY, Action, Layer, Policy, PolicySpec, load_policy


def spec(raw: Any) -> PolicySpec:
    """session/open's policy, as the request carries it."""
    return structure(raw, PolicySpec, "policy")


WRITE = Action("write", "src/app.py")
EXEC = Action("exec", "pytest -q")

PROJECT = """
approval = "never"

[[layers]]
name = "project"
denyRead = [".env", "secrets/**"]
denyExec = ["git push*"]

[[layers]]
name = "generated"
denyWrite = ["build/**"]

[checks]
test = ["pytest", "-q"]
"""


def test_by_default_reads_run_and_writes_and_commands_ask(tmp_path: Path) -> None:
    policy = load_policy(tmp_path, None)
    assert policy == DEFAULT_POLICY
    assert policy.to_wire() == {
        "layers": [
            {
                "name": "default",
                "allowRead": ["**"],
                "allowWrite": ["**"],
                "allowExec": ["*"],
                "denyRead": [],
                "denyWrite": [],
                "denyExec": [],
            }
        ],
        "approval": "ask",
        "grants": [],
        "sandbox": "workspace-write",
        "network": False,
    }
    assert policy.check(Action("read", "any/where.txt")).ruling == "allow"
    assert policy.check(WRITE).ruling == "ask"
    assert policy.check(EXEC).ruling == "ask"


def test_the_project_file_adds_layers_and_may_tighten_approval(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text(PROJECT)
    policy = load_policy(tmp_path, None)
    assert [layer.name for layer in policy.layers] == ["default", "project", "generated"]
    assert policy.approval == "never"
    assert policy.check(Action("read", "secrets/key.pem")).ruling == "refuse"
    assert policy.check(EXEC).ruling == "refuse"


def test_the_callers_policy_goes_on_top_and_sets_approval(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text(PROJECT)
    requested = spec(
        {
            "layers": [{"name": "editor", "allowRead": [".env"], "denyWrite": ["*.lock"]}],
            "approval": "all",
        }
    )
    policy = load_policy(tmp_path, requested)
    assert [layer.name for layer in policy.layers] == ["default", "project", "generated", "editor"]
    assert policy.approval == "all"
    assert policy.check(Action("read", ".env")).ruling == "refuse", "the project's deny holds"
    assert policy.check(Action("write", "uv.lock")).ruling == "refuse"
    assert policy.check(Action("write", "build/out.js")).ruling == "refuse"
    assert policy.check(WRITE).ruling == "allow"
    assert policy.check(Action("exec", "git push origin main")).ruling == "refuse"
    assert policy.check(EXEC).ruling == "allow"


def test_a_caller_that_sets_no_approval_keeps_the_projects(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text(PROJECT)
    assert load_policy(tmp_path, spec({"layers": []})).approval == "never"


def test_the_project_file_cannot_loosen_approval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / ".trellisd.toml").write_text(
        'approval = "all"\n[[layers]]\nname = "project"\ndenyWrite = ["*.lock"]\n'
    )
    with caplog.at_level(logging.WARNING, logger="trellisd.policy.load"):
        policy = load_policy(tmp_path, None)
    assert policy.approval == "ask"
    assert policy.check(WRITE).ruling == "ask"
    assert [layer.name for layer in policy.layers] == ["default", "project"]
    assert "may only tighten it" in caplog.text


def test_a_daemon_default_can_be_given(tmp_path: Path) -> None:
    strict = Policy((Layer("default", allow_read=("src/**",)),), "never")
    assert load_policy(tmp_path, None, default=strict).check(WRITE).ruling == "refuse"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("approval = ", "is not valid TOML"),
        (
            'approval = "maybe"',
            ": approval must be one of 'all', 'auto', 'acceptEdits', 'ask', 'plan' or 'never'",
        ),
        ("layers = 3", ": layers must be a list of layers"),
        (
            '[[layers]]\nname = "a"\n[[layers]]\nname = "b"\ndenyWrite = "x"',
            ": layers[1].denyWrite must be a list of strings",
        ),
        ("[[layers]]\nallowRead = []", ": layers[0].name must be a non-empty string"),
    ],
)
def test_a_broken_project_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / ".trellisd.toml").write_text(text)
    with pytest.raises(InvalidParams) as raised:
        load_policy(tmp_path, None)
    assert str(tmp_path / ".trellisd.toml") in raised.value.message
    assert message in raised.value.message


def test_a_project_file_names_itself_and_the_field_in_the_errors_data(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text('[[layers]]\nname = "p"\ndenyRead = "x"\n')
    with pytest.raises(InvalidParams) as raised:
        load_policy(tmp_path, None)
    assert raised.value.data["field"] == f"{tmp_path / '.trellisd.toml'}: layers[0].denyRead"


def test_a_project_file_cannot_grant(tmp_path: Path) -> None:
    """Grants are the user's answers; a file that comes with the folder cannot give them."""
    (tmp_path / ".trellisd.toml").write_text(
        'approval = "ask"\ngrants = [{kind = "exec", target = "pytest -q"}]\n'
    )
    policy = load_policy(tmp_path, None)
    assert policy.grants == frozenset()
    assert policy.check(EXEC).ruling == "ask"


def test_a_broken_caller_policy_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(InvalidParams, match=r"policy\.layers\[0\]\.name"):
        load_policy(tmp_path, spec({"layers": [{"allowRead": ["**"]}]}))


LOOSE_PROJECT = """
approval = "all"

[[layers]]
name = "project"
allowRead = ["**"]
allowWrite = ["**"]
allowExec = ["*"]
"""

EDITOR_SRC_ONLY = spec(
    {"layers": [{"name": "editor", "allowRead": ["**"], "allowWrite": ["src/**"]}]}
)
NO_DEFAULT_LAYER = Policy(approval="ask")  # as when session/open's policy names layers


def test_a_project_file_cannot_widen_what_the_editor_allows(tmp_path: Path) -> None:
    """The editor's layers allow writes under src/ and no command; the repository's file
    allows everything: nothing more is allowed, and nothing runs without asking."""
    (tmp_path / ".trellisd.toml").write_text(LOOSE_PROJECT)
    policy = load_policy(tmp_path, EDITOR_SRC_ONLY, default=NO_DEFAULT_LAYER)
    assert policy.check(WRITE).ruling == "ask"
    assert policy.check(Action("write", "setup.py")).ruling == "refuse"
    assert policy.check(EXEC).ruling == "refuse"
    assert policy.check(Action("read", "README.md")).ruling == "allow"


def test_a_project_files_allows_narrow_what_the_editor_allows(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text(
        '[[layers]]\nname = "project"\nallowWrite = ["docs/**", "src/**"]\nallowExec = ["make"]\n'
    )
    policy = load_policy(tmp_path, None)
    assert policy.check(Action("write", "docs/a.md")).ruling == "ask"
    verdict = policy.check(Action("write", "setup.py"))
    assert (verdict.ruling, verdict.layer) == ("refuse", "project")
    assert "project's policy layers ('project') do not allow it" in verdict.reason
    assert policy.check(Action("exec", "make")).ruling == "ask"
    assert policy.check(Action("exec", "make install")).ruling == "refuse"
    assert policy.check(Action("read", "any/file")).ruling == "allow", "no allowRead: no narrowing"
    narrowed = load_policy(tmp_path, EDITOR_SRC_ONLY, default=NO_DEFAULT_LAYER)
    assert narrowed.check(Action("write", "docs/a.md")).ruling == "refuse"
    assert narrowed.check(WRITE).ruling == "ask"


def test_an_oversized_project_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text("# padding\n" * 200_000)
    with pytest.raises(InvalidParams) as raised:
        load_policy(tmp_path, None)
    assert raised.value.message.startswith(str(tmp_path / ".trellisd.toml") + " is larger than")


def test_an_invalid_glob_in_a_project_file_names_the_field(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text('[[layers]]\nname = "p"\ndenyRead = ["a\\\\"]\n')
    with pytest.raises(InvalidParams, match=r": layers\[0\]\.denyRead has an invalid glob"):
        load_policy(tmp_path, None)


def test_a_project_file_with_too_many_globs_is_refused(tmp_path: Path) -> None:
    """Every action is matched against every glob: a file cannot make each check slow."""
    globs = ", ".join(f'"**/dir{i}/**"' for i in range(1001))
    (tmp_path / ".trellisd.toml").write_text(f'[[layers]]\nname = "p"\ndenyRead = [{globs}]\n')
    with pytest.raises(InvalidParams, match=r": layers\[0\]\.denyRead brings the policy past 1000"):
        load_policy(tmp_path, None)
