"""Change sets and the budget carried over real pipes and a real git repository: a fork's
inherited turns restore files as the origin's do, and a session exported from one store and
imported into another lists its turns' changes and verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.driver import (
    OPEN,
    Daemon,
    DaemonFactory,
    agent_turn,
    changes,
    open_session,
    python,
    write,
    write_then_change,
)
from tests.fixtures.git_repo import make_repo, user_state
from tests.fixtures.model_server import ModelServer


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "# demo project\n", "tracked.txt": "one\n"})


async def test_a_fork_restores_files_across_its_inherited_turns(
    daemon: Daemon, model: ModelServer, repo: Path
) -> None:
    session = await open_session(daemon, repo, policy=OPEN, budget={"tokens": 1_000_000})
    _, second = await write_then_change(daemon, model, session)
    git = user_state(repo)

    fork = await daemon.call(
        "session/fork", {"sessionId": session["sessionId"], "turnId": second["turnId"]}
    )
    fid = fork["sessionId"]
    one, two = [
        t["turnId"] for t in (await daemon.call("session/history", {"sessionId": fid}))["turns"]
    ]
    assert await changes(daemon, two) == await changes(daemon, second["turnId"])

    back = await daemon.call(
        "session/branch", {"sessionId": fid, "turnId": one, "restoreFiles": True}
    )
    assert back["head"] == one
    assert sorted(back["files"]["restored"]) == ["README.md", "a.txt", "b.txt"]
    assert (repo / "a.txt").read_text() == "v1\n"
    assert not (repo / "b.txt").exists()
    assert (repo / "README.md").read_text() == "# demo project\n"

    forward = await daemon.call(
        "session/branch", {"sessionId": fid, "turnId": two, "restoreFiles": True}
    )
    assert sorted(forward["files"]["restored"]) == ["README.md", "a.txt", "b.txt"]
    assert (repo / "a.txt").read_text() == "v2\n" and not (repo / "README.md").exists()
    assert user_state(repo) == git

    reopened = await daemon.call("session/reopen", {"sessionId": fid})
    assert reopened["budget"] == {"tokens": 1_000_000}
    assert reopened["spent"]["tokens"] > 0
    assert (await daemon.call("session/verify", {"sessionId": fid}))["ok"]


async def test_an_imported_session_lists_its_turns_changes(
    spawn: DaemonFactory, model: ModelServer, repo: Path, tmp_path: Path
) -> None:
    first = await spawn()
    session = await open_session(first, repo, policy=OPEN, budget={"tokens": 2_000_000})
    sid = session["sessionId"]
    done = await agent_turn(
        first,
        model,
        session,
        write("a.txt", "v1\n"),
        python("open('tracked.txt', 'a').write('three\\n')"),
    )
    listed = await changes(first, done["turnId"])
    path = tmp_path / "session.trellisd"
    await first.call("session/export", {"sessionId": sid, "path": str(path)})

    second = await spawn(db=tmp_path / "elsewhere" / "trellisd.db")
    imported = await second.call("session/import", {"path": str(path), "asNew": True})
    (turn,) = (await second.call("session/history", {"sessionId": imported["sessionId"]}))["turns"]

    assert turn["turnId"] != done["turnId"]
    assert await changes(second, turn["turnId"]) == listed
    assert set(listed) == {"a.txt", "tracked.txt"}
    assert "+three" in listed["tracked.txt"]["diff"]
    net = await second.call(
        "session/changes",
        {"sessionId": imported["sessionId"], "from": None, "to": turn["turnId"]},
    )
    assert {f["path"] for f in net["files"]} == {"a.txt", "tracked.txt"}
    assert (await second.call("session/verify", {"sessionId": imported["sessionId"]}))["ok"]
    reopened = await second.call("session/reopen", {"sessionId": imported["sessionId"]})
    assert reopened["budget"] == {"tokens": 2_000_000}
