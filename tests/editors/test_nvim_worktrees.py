"""Worktree sessions and shared change marks in real headless Neovims (0.7 and 0.11) against
the real daemon, over a git repository the test makes: :TrellisWorktree, :TrellisMerge and
:TrellisDiscard, and a revert refused over a path another session's command may have changed,
then forced."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.gates import gates_in
from tests.fixtures.git_repo import git, make_repo

try:
    from .test_nvim import Start, nvim_bin, start  # noqa: F401 (fixtures)
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_nvim import Start, nvim_bin, start  # type: ignore[no-redef]  # noqa: F401

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

ALLOWED = {"policy": {"approval": "all"}}  # writes and commands run unasked


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "# demo project\n"})


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool": "write_file", "arguments": {"path": path, "content": content}}


def shell(script: str) -> dict[str, Any]:
    return {"tool": "run_command", "arguments": {"argv": ["sh", "-c", script]}}


def in_worktree(start: Start, repo: Path, script: list[dict[str, Any]], name: str = "") -> Any:  # noqa: F811
    """An editor over ``repo`` with a session opened by :TrellisWorktree [name], shown."""
    ed = start(script=script, workdir=repo, setup=ALLOWED)
    ed.command(f"TrellisWorktree {name}")
    ed.wait_text(f"⎇ trellisd/{name}")
    return ed


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--list", "--format=%(refname:short)").split()


def test_a_worktree_session_works_beside_the_checkout_and_merges_into_it(
    start: Start,  # noqa: F811
    repo: Path,
) -> None:
    script = [write("login.txt", "a login page\n"), {"text": "Added the login page."}]
    ed = in_worktree(start, repo, script, "fix-login")
    assert "⎇ trellisd/fix-login → main" in ed.text()
    ed.wait_note("working in a new worktree on trellisd/fix-login (from main)")
    ed.command("Trellis add a login page")
    ed.wait_text("Added the login page.")
    ed.wait_idle()
    header = ed.conversation()[:4]
    assert "⎇ trellisd/fix-login → main" in header, header
    assert not (repo / "login.txt").exists()  # the agent wrote in its worktree
    assert ed.statusline() == "trellis: idle · ⎇ trellisd/fix-login → main"

    ed.command("TrellisSessions")  # nothing picked: only the list is looked at
    ed.wait_for(lambda: any(a.get("kind") == "trellisd.session" for a in ed.asked()), "the list")
    listed = next(a for a in ed.asked() if a.get("kind") == "trellisd.session")["items"]
    assert any("add a login page" in i and "⎇ trellisd/fix-login → main" in i for i in listed)

    ed.command("TrellisMerge")
    note = ed.wait_note("merged trellisd/fix-login into main")
    assert "1 file (login.txt), written into the checkout" in note, note
    assert (repo / "login.txt").read_text() == "a login page\n"
    assert "login.txt" in git(repo, "show", "--name-only", "--format=", "main")
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]  # the user's
    assert "*merged trellisd/fix-login into main: 1 file (login.txt)" in ed.text()


def test_a_conflicting_merge_names_the_files_and_a_discard_asks_then_removes_the_worktree(
    start: Start,  # noqa: F811
    repo: Path,
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    script = [
        write("README.md", "# the agent's readme\n"),
        {"text": "Rewrote the readme.", "holdAfter": 1, "holdFile": str(go)},
    ]
    ed = start(script=script, workdir=repo, setup=ALLOWED)
    ed.command("TrellisWorktree")
    ed.command("Trellis rewrite the readme")  # sent while the worktree is made: it waits
    ed.wait_text("Rewrote ")
    ed.command("TrellisMerge")  # refused here while the turn runs, plainly
    ed.wait_note("a turn is running: wait for it to end or :TrellisCancel it before you merge")
    go.touch()
    ed.wait_text("Rewrote the readme.")
    ed.wait_idle()
    worktree = ed.lua('return require("trellisd.sessions").current_state().session.worktree')
    assert Path(worktree["path"], "README.md").read_text() == "# the agent's readme\n"

    (repo / "README.md").write_text("# the user's readme\n")
    git(repo, "commit", "-q", "-m", "mine", "README.md")
    ed.command("TrellisMerge")
    note = ed.wait_note("could not merge: ")
    assert "conflicts in README.md" in note and "nothing was merged" in note, note
    ed.wait_text("*not merged into main; the files in the way: README.md*")
    assert (repo / "README.md").read_text() == "# the user's readme\n"

    ed.will_pick("Discard the worktree")
    ed.command("TrellisDiscard")
    ed.wait_note(f"discarded the worktree and its branch {worktree['branch']}")
    question = next(a for a in ed.asked() if a.get("kind") == "trellisd.discard")
    assert question["items"] == ["Discard the worktree", "Keep it"]
    assert worktree["branch"] in question["prompt"] and "not merged into main" in question["prompt"]
    assert not Path(worktree["path"]).exists()
    assert branches(repo) == ["main"]
    assert "⎇" not in "\n".join(ed.conversation()[:4])  # no worktree any more
    assert (repo / "README.md").read_text() == "# the user's readme\n"


def test_a_revert_over_a_path_another_sessions_command_changed_says_so_and_is_forced(
    start: Start,  # noqa: F811
    repo: Path,
) -> None:
    go = gates_in(repo) / "go"  # git ignores it, so no change set holds it
    os.mkfifo(go)
    ed = start(
        script=[
            # the model answers in the order asked: A's command, B's, B's end, A's end
            shell(f"echo a > a.txt && echo a is waiting && cat '{go}' > /dev/null"),
            shell("echo b > b.txt"),
            {"text": "B is done."},
            {"text": "A is done."},
        ],
        workdir=repo,
        setup=ALLOWED,
    )
    ed.command("Trellis write a.txt")
    ed.wait_text("│ a is waiting")  # A's command runs, and waits
    first = ed.current()["sessionId"]  # type: ignore[index]
    ed.command("TrellisNew")
    ed.wait_for(lambda: ed.current()["sessionId"] != first, "the second session")  # type: ignore[index]
    ed.command("Trellis write b.txt")
    ed.wait_text("B is done.")
    ed.wait_idle()
    with open(go, "w") as f:  # A's command ends
        f.write("go\n")
    ed.wait_for(lambda: "A is done." in "\n".join(ed.buffer_named(first)), "A's turn to end")

    ed.will_pick("write a.txt")
    ed.command("TrellisSessions")
    ed.wait_for(lambda: ed.current()["sessionId"] == first, "A reopened")  # type: ignore[index]
    ed.command("TrellisChanges")
    changes = ed.wait_for(lambda: ed.buffer_named(f"{first}/changes"), "A's changes")
    assert "# b.txt: shared with session “write b.txt”" in changes, changes
    assert not any(line.startswith("# a.txt") for line in changes), changes  # its own

    ed.will_pick("Overwrite them")
    ed.nvim.input("R")
    ed.wait_note("reverted: 2 file(s) put back")
    question = next(a for a in ed.asked() if a.get("kind") == "trellisd.restore")
    assert question["prompt"] == (
        "another session's command ran at the same time and may have made these changes:"
        " b.txt (shared with session “write b.txt”)"
    )
    assert question["items"] == ["Overwrite them", "Cancel the revert"]
    assert not (repo / "a.txt").exists() and not (repo / "b.txt").exists()
