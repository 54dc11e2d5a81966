"""A session in its own git worktree over real pipes: opened, a turn writing files and
running a command there, merged into the user's branch with the user's work in progress
kept, and a daemon killed with worktrees on disk leaving no orphan for the next one."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import apsw
import pytest

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import OPEN, agent_turn, open_session, python, write
from tests.fixtures.git_repo import git, make_repo
from tests.fixtures.model_server import ModelServer


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"src/app.txt": "v1\n"})


async def test_open_turn_merge_over_the_wire(
    spawn: DaemonFactory, model: ModelServer, repo: Path
) -> None:
    daemon = await spawn()
    session = await open_session(daemon, repo, policy=OPEN, worktree="wire")
    worktree = session["worktree"]
    assert worktree["branch"] == "trellisd/wire" and worktree["base"] == "main"
    assert session["root"] == worktree["path"] and worktree["checkout"] == str(repo.resolve())
    assert not worktree["path"].startswith(str(repo))

    made = "open('made.txt', 'w').write('by a command\\n')"
    await agent_turn(daemon, model, session, write("src/app.txt", "v2\n"), python(made))
    assert (Path(worktree["path"]) / "made.txt").read_text() == "by a command\n"
    assert (repo / "src" / "app.txt").read_text() == "v1\n"

    listed = await daemon.call("session/list", {"root": str(repo)})
    assert [s["worktree"]["branch"] for s in listed["sessions"]] == ["trellisd/wire"]

    merged = await daemon.call("session/worktree/merge", {"sessionId": session["sessionId"]})

    assert merged["paths"] == ["made.txt", "src/app.txt"] and merged["checkoutUpdated"] is True
    assert git(repo, "rev-parse", "main").strip() == merged["commit"]
    assert (repo / "src" / "app.txt").read_text() == "v2\n"
    assert (repo / "made.txt").read_text() == "by a command\n"
    status = sorted(git(repo, "status", "--porcelain").splitlines())
    assert status == ["?? untracked.txt", "A  staged.txt"]  # the user's work in progress

    discarded = await daemon.call("session/worktree/discard", {"sessionId": session["sessionId"]})
    assert "worktree" not in discarded and not Path(worktree["path"]).exists()
    assert git(repo, "branch", "--list", "trellisd/*").strip() == ""


async def test_a_bad_worktree_param_is_named(spawn: DaemonFactory, repo: Path) -> None:
    daemon = await spawn()
    wrong = await daemon.error("session/open", {"root": str(repo), "worktree": 3})
    assert wrong.code == -32602 and wrong.data["field"] == "worktree"
    unusable = await daemon.error("session/open", {"root": str(repo), "worktree": "../x"})
    assert unusable.code == -32602 and unusable.data["field"] == "worktree"


async def test_a_killed_daemon_leaves_no_orphan_for_the_next(
    spawn: DaemonFactory, repo: Path, tmp_path: Path
) -> None:
    first = await spawn()
    kept = await open_session(first, repo, worktree="kept")
    half = await open_session(first, repo, worktree="half")
    os.kill(first.process.pid, signal.SIGKILL)
    await first.process.wait()
    # As if it died making "half": its session not made yet, its row still ``creating``.
    con = apsw.Connection(str(first.db))
    con.execute(
        "UPDATE worktree SET state = 'creating', session_id = NULL WHERE branch = ?",
        ("trellisd/half",),
    )
    con.execute("DELETE FROM session WHERE id = ?", (half["sessionId"],))
    con.close()

    second = await spawn()
    adopted = await second.call("session/reopen", {"sessionId": kept["sessionId"]})

    assert adopted["worktree"] == kept["worktree"] and Path(kept["root"]).is_dir()
    assert not Path(half["worktree"]["path"]).exists()
    branches = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/trellisd/")
    assert branches.split() == ["trellisd/kept"]
    assert half["worktree"]["path"] not in git(repo, "worktree", "list", "--porcelain")
