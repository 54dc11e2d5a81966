"""Custom commands as the service finds them: the user's folder and the project's, the user's
winning, a project's narrowed to what the user's settings allow, files that hold none."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from trellisd.commands import MAX_COMMANDS, CommandSettings, parse
from trellisd.records import Budget, ProviderChoice
from trellisd.services.commands import (
    PROJECT_FOLDER,
    Bounds,
    merged,
    narrow,
    read_project,
    read_user,
    with_command,
)
from trellisd.services.turns import TurnRequest


def bounds(**given: object) -> Bounds:
    values: dict[str, object] = {
        "approval": "ask",
        "max_steps": 50,
        "budget": 1.0,
        "models": frozenset({"big-model", "small-model"}),
        "may_run": lambda argv: argv[0] == "pytest",
    }
    return Bounds(**{**values, **given})  # type: ignore[arg-type]


def test_a_project_command_that_asks_for_more_is_narrowed_and_says_how() -> None:
    command = parse(
        "c",
        "project",
        b"---\napproval: all\nmaxSteps: 500\nbudget: 9\nmodel: huge-model\nverify: rm -rf /\n"
        b"---\nGo.",
    )
    narrowed = narrow(command, bounds())
    assert narrowed.settings == CommandSettings(max_steps=50, budget=1.0)
    said = {n.setting: (n.asked, n.applied) for n in narrowed.narrowed}
    assert said == {
        "approval": ("all", None),
        "maxSteps": (500, 50),
        "budget": (9.0, 1.0),
        "model": ("huge-model", None),
        "verify": (["rm", "-rf", "/"], None),
    }
    assert "stricter" in narrowed.narrowed[0].reason


def test_a_project_command_that_asks_for_less_keeps_it_all() -> None:
    command = parse(
        "c",
        "project",
        b"---\napproval: never\nmaxSteps: 5\nbudget: 0.2\nmodel: small-model\nverify: pytest -q\n"
        b"---\nGo.",
    )
    narrowed = narrow(command, bounds())
    assert narrowed.settings == command.settings and narrowed.narrowed == ()


def test_without_a_session_budget_a_project_budget_is_a_bound_of_its_own() -> None:
    command = parse("c", "project", b"---\nbudget: 3\napproval: ask\n---\nGo.")
    narrowed = narrow(command, bounds(budget=None))
    assert narrowed.settings == CommandSettings(budget=3.0)  # the same approval: nothing to set
    assert narrowed.narrowed == ()


def test_the_users_command_wins_over_the_projects_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user, root = tmp_path / "commands", tmp_path / "repo"
    user.mkdir()
    (root / PROJECT_FOLDER).mkdir(parents=True)
    (user / "review.md").write_text("Mine: $ARGUMENTS")
    (root / PROJECT_FOLDER / "review.md").write_text("Theirs: $ARGUMENTS")
    (root / PROJECT_FOLDER / "deploy.md").write_text("Deploy.")
    with caplog.at_level(logging.INFO):
        found = merged(read_user(user), read_project(root))
    assert [(c.name, c.source, c.shadows) for c in found] == [
        ("deploy", "project", False),
        ("review", "user", True),
    ]
    assert found[1].expand("x") == "Mine: x"
    assert "/review" in caplog.text


def test_files_that_hold_no_command_are_skipped_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = tmp_path / "commands"
    user.mkdir()
    (user / "Bad Name.md").write_text("x")
    (user / "broken.md").write_text("---\nmaxSteps: 0\n---\nGo.")
    (user / "notes.txt").write_text("not a command")
    (user / "folder.md").mkdir()
    (user / "good.md").write_text("Good.")
    with caplog.at_level(logging.WARNING):
        found = read_user(user)
    assert [c.name for c in found] == ["good"]
    assert "Bad Name.md" in caplog.text and "broken.md" in caplog.text
    assert "maxSteps" in caplog.text


def test_no_folder_means_no_commands(tmp_path: Path) -> None:
    assert read_user(None) == [] and read_user(tmp_path / "none") == []
    assert read_project(tmp_path) == []


def test_a_project_symlink_out_of_the_root_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root, outside = tmp_path / "repo", tmp_path / "outside"
    (root / PROJECT_FOLDER).mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("Secret prompt.")
    os.symlink(outside / "secret.md", root / PROJECT_FOLDER / "leak.md")
    (root / "inside.md").write_text("Inside.")
    os.symlink(root / "inside.md", root / PROJECT_FOLDER / "inside.md")
    (root / PROJECT_FOLDER / "plain.md").write_text("Plain.")
    with caplog.at_level(logging.WARNING):
        found = read_project(root)
    assert [c.name for c in found] == ["inside", "plain"]
    assert "leak.md" in caplog.text


def test_a_project_commands_folder_that_leads_out_is_skipped_whole(tmp_path: Path) -> None:
    root, outside = tmp_path / "repo", tmp_path / "outside"
    (root / ".trellisd").mkdir(parents=True)
    outside.mkdir()
    (outside / "x.md").write_text("X.")
    os.symlink(outside, root / PROJECT_FOLDER)
    assert read_project(root) == []


def test_at_most_so_many_commands_a_folder(tmp_path: Path) -> None:
    user = tmp_path / "commands"
    user.mkdir()
    for n in range(MAX_COMMANDS + 5):
        (user / f"c{n:04}.md").write_text("Go.")
    found = read_user(user)
    assert len(found) == MAX_COMMANDS and found[-1].name == f"c{MAX_COMMANDS - 1:04}"


def test_a_turn_of_a_command_takes_its_settings_below_the_requests_and_above_the_sessions() -> None:
    command = parse(
        "c",
        "user",
        b"---\nmodel: small-model\neffort: low\nmaxSteps: 7\nbudget: 0.5\nverify: pytest $1\n"
        b"---\nFix $1.",
    )
    chosen = ProviderChoice(model="chosen-model", effort="high")

    plain = with_command(TurnRequest("s", ""), command, "a.py", chosen)
    assert (plain.prompt, plain.max_steps, plain.verify) == (
        "Fix a.py.",
        7,
        (["pytest", "a.py"], 0),
    )
    assert (plain.choice.model, plain.choice.effort, plain.budget) == (
        "small-model",
        "low",
        Budget(usd=0.5),
    )
    assert plain.command is not None and plain.command["arguments"] == "a.py"

    asked = TurnRequest("s", "", ProviderChoice(model="big-model"), max_steps=2)
    given = with_command(asked, command, "a.py", chosen)
    assert (given.choice.model, given.choice.effort, given.max_steps) == ("big-model", "low", 2)

    bare = with_command(TurnRequest("s", ""), parse("d", "user", b"Go."), "", chosen)
    assert (bare.choice.model, bare.choice.effort) == ("chosen-model", "high")
