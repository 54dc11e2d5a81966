"""Change sets over real pipes and real git repositories: what a turn changed, the diff
before an approval, restoring files with a branch, reverting one turn, and conflicts."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from pathlib import Path

import apsw
import pytest

from tests.fixtures.driver import (
    OPEN,
    Daemon,
    agent_turn,
    answer_approvals,
    changes,
    edit,
    events,
    open_session,
    python,
    write,
    write_then_change,
)
from tests.fixtures.git_repo import git, make_repo, user_state
from tests.fixtures.model_server import ModelServer


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"README.md": "# demo project\n", "tracked.txt": "one\ntwo\n", "gone.txt": "bye\n"},
    )


async def test_a_turn_lists_what_its_tools_and_commands_changed_and_git_state_is_untouched(
    daemon: Daemon, model: ModelServer, repo: Path
) -> None:
    (repo / ".env.local").write_text("API_TOKEN=left-untracked\n")
    before = user_state(repo)
    session = await open_session(daemon, repo, policy=OPEN)
    command = (
        "import pathlib; p = pathlib.Path('tracked.txt'); p.write_text('one\\nTWO\\n');"
        " pathlib.Path('gone.txt').unlink(); pathlib.Path('made.txt').write_text('made\\n')"
    )
    result = await agent_turn(
        daemon,
        model,
        session,
        write("notes/new.txt", "hello\n"),
        edit("README.md", "# demo project", "# demo, edited"),
        python(command),
    )

    files = await changes(daemon, result["turnId"])
    assert {p: f["status"] for p, f in files.items()} == {
        "README.md": "modified",
        "gone.txt": "deleted",
        "made.txt": "added",
        "notes/new.txt": "added",
        "tracked.txt": "modified",
    }
    assert "-# demo project\n+# demo, edited\n" in files["README.md"]["diff"]
    assert files["tracked.txt"]["diff"].startswith("--- a/tracked.txt\n+++ b/tracked.txt\n")
    assert "-two\n+TWO\n" in files["tracked.txt"]["diff"]
    assert "--- a/gone.txt\n+++ /dev/null\n" in files["gone.txt"]["diff"]
    assert "+hello\n" in files["notes/new.txt"]["diff"]
    after = user_state(repo)
    # The user's index, HEAD, branch, stash and reflogs are byte for byte as they were; so
    # is what git status says, but for the files the turn itself changed.
    assert {k: v for k, v in after.items() if k != "status"} == {
        k: v for k, v in before.items() if k != "status"
    }
    # The snapshots are the daemon's own: no ref of it in the repository, and a mirror of
    # the repository takes no untracked file along.
    assert "trellisd" not in git(repo, "for-each-ref")
    git(repo.parent, "clone", "-q", "--mirror", str(repo), "mirror.git")
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo.parent / "mirror.git",
        capture_output=True,
        check=True,
    ).stdout
    assert b"tracked.txt" in objects
    assert b"left-untracked" not in objects and b"made\n" not in objects


async def test_git_status_reads_the_same_after_a_turn_that_changes_nothing_tracked(
    daemon: Daemon, model: ModelServer, repo: Path
) -> None:
    before = user_state(repo)
    session = await open_session(daemon, repo, policy=OPEN)
    result = await agent_turn(daemon, model, session, python("print('just looking')"))
    assert await changes(daemon, result["turnId"]) == {}
    assert user_state(repo) == before


async def test_outside_git_only_the_file_tools_are_tracked(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    result = await agent_turn(
        daemon,
        model,
        session,
        write("a.txt", "from the tool\n"),
        python("open('b.txt', 'w').write('from a command\\n')"),
    )
    assert (workspace / "b.txt").exists()
    assert list(await changes(daemon, result["turnId"])) == ["a.txt"]


async def test_branching_back_restores_the_files_and_forward_brings_them_back(
    daemon: Daemon, model: ModelServer, repo: Path
) -> None:
    session = await open_session(daemon, repo, policy=OPEN)
    sid = session["sessionId"]
    first, second = await write_then_change(daemon, model, session)

    net = await daemon.call(
        "session/changes", {"sessionId": sid, "from": first["turnId"], "to": second["turnId"]}
    )
    assert {f["path"]: f["status"] for f in net["files"]} == {
        "README.md": "deleted",
        "a.txt": "modified",
        "b.txt": "added",
    }

    back = await daemon.call(
        "session/branch", {"sessionId": sid, "turnId": first["turnId"], "restoreFiles": True}
    )
    assert back["head"] == first["turnId"]
    assert sorted(back["files"]["restored"]) == ["README.md", "a.txt", "b.txt"]
    assert (repo / "a.txt").read_text() == "v1\n"
    assert not (repo / "b.txt").exists()
    assert (repo / "README.md").read_text() == "# demo project\n"

    forward = await daemon.call(
        "session/branch", {"sessionId": sid, "turnId": second["turnId"], "restoreFiles": True}
    )
    assert forward["head"] == second["turnId"]
    assert (repo / "a.txt").read_text() == "v2\n"
    assert (repo / "b.txt").read_text() == "new\n"
    assert not (repo / "README.md").exists()

    everything = await daemon.call(
        "session/branch", {"sessionId": sid, "turnId": None, "restoreFiles": True}
    )
    assert everything["head"] is None
    assert not (repo / "a.txt").exists() and not (repo / "b.txt").exists()
    # Nothing was deleted from the store: the turns and their changes are all there.
    assert len((await daemon.call("session/turns", {"sessionId": sid}))["turns"]) == 2
    assert "b.txt" in await changes(daemon, second["turnId"])


async def test_a_branch_without_restore_files_leaves_the_files_alone(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    await agent_turn(daemon, model, session, write("a.txt", "v1\n"))
    moved = await daemon.call("session/branch", {"sessionId": session["sessionId"], "turnId": None})
    assert moved["head"] is None and "files" not in moved
    assert (workspace / "a.txt").read_text() == "v1\n"


async def test_reverting_one_turn_undoes_its_changes_alone_and_is_recorded(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    first = await agent_turn(
        daemon, model, session, write("a.txt", "a\n"), edit("README.md", "demo", "changed")
    )
    await agent_turn(daemon, model, session, write("c.txt", "c\n"))

    answer = await daemon.call("turn/revert", {"turnId": first["turnId"]})
    assert answer == {"turnId": first["turnId"], "restored": ["README.md", "a.txt"], "skipped": []}
    assert not (workspace / "a.txt").exists()
    assert (workspace / "README.md").read_text() == "# demo project\n"
    assert (workspace / "c.txt").read_text() == "c\n"
    reverted = await events(daemon, first["runId"], "reverted")
    assert reverted[0]["detail"]["files"] == ["README.md", "a.txt"]
    # What the turn did is still listed.
    assert list(await changes(daemon, first["turnId"])) == ["README.md", "a.txt"]


async def test_a_file_a_person_changed_is_a_conflict_until_forced(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    sid = session["sessionId"]
    first = await agent_turn(
        daemon, model, session, write("a.txt", "agent\n"), write("b.txt", "b\n")
    )
    (workspace / "a.txt").write_text("a person's edit\n")

    refused = await daemon.error(
        "session/branch", {"sessionId": sid, "turnId": None, "restoreFiles": True}
    )
    assert refused.code == -32020
    assert refused.data["paths"] == ["a.txt"]
    assert "a.txt" in refused.message
    assert (workspace / "a.txt").read_text() == "a person's edit\n"
    assert (workspace / "b.txt").exists()  # nothing was done
    assert (await daemon.call("session/reopen", {"sessionId": sid}))["head"] == first["turnId"]

    reverting = await daemon.error("turn/revert", {"turnId": first["turnId"]})
    assert reverting.code == -32020 and reverting.data["paths"] == ["a.txt"]
    assert (workspace / "b.txt").exists()

    forced = await daemon.call(
        "session/branch", {"sessionId": sid, "turnId": None, "restoreFiles": True, "force": True}
    )
    assert forced["head"] is None
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


async def test_binary_and_too_large_files_are_listed_but_not_kept(
    daemon: Daemon, model: ModelServer, repo: Path
) -> None:
    session = await open_session(daemon, repo, policy=OPEN)
    sid = session["sessionId"]
    command = (
        "open('image.bin', 'wb').write(b'\\x89PNG\\0\\0' * 100);"
        " open('big.log', 'w').write('x' * (9 * 1024 * 1024))"
    )
    result = await agent_turn(daemon, model, session, python(command))
    files = await changes(daemon, result["turnId"])
    assert files["image.bin"] == {
        "path": "image.bin",
        "status": "added",
        "diff": "",
        "binary": True,
    }
    assert files["big.log"] == {"path": "big.log", "status": "added", "diff": "", "tooLarge": True}

    back = await daemon.call(
        "session/branch", {"sessionId": sid, "turnId": None, "restoreFiles": True}
    )
    assert sorted(back["files"]["restored"]) == [
        "big.log",
        "image.bin",
    ]  # removed: they were absent
    assert not (repo / "big.log").exists()
    forward = await daemon.call(
        "session/branch", {"sessionId": sid, "turnId": result["turnId"], "restoreFiles": True}
    )
    assert forward["files"] == {
        "restored": [],
        "skipped": [
            {"path": "big.log", "reason": "tooLarge"},
            {"path": "image.bin", "reason": "binary"},
        ],
    }


async def test_an_approval_for_a_write_carries_the_diff_against_the_file_on_disk(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    policy = {**OPEN, "approval": "ask"}
    session = await open_session(daemon, workspace, policy=policy)
    asked = answer_approvals(daemon, ["allow", "deny", "allow"])
    (workspace / "README.md").write_text("# demo project\nsecond line\n")
    await agent_turn(
        daemon,
        model,
        session,
        edit("README.md", "second line", "line two"),
        write("README.md", "replaced\n"),
        python("print('no diff for a command')"),
    )
    assert asked[0]["diff"] == (
        "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n"
        " # demo project\n-second line\n+line two\n"
    )
    # The second approval is against the file as the first call left it.
    assert "-line two\n" in asked[1]["diff"] and "+replaced\n" in asked[1]["diff"]
    assert "diff" not in asked[2]


async def test_a_revert_asks_the_editor_before_it_touches_a_protected_path(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    naming = {**OPEN, "layers": [{**OPEN["layers"][0], "allowWrite": ["**", ".vscode/**"]}]}
    session = await open_session(daemon, workspace, policy=naming)
    asked = answer_approvals(daemon, ["allow", "deny"])
    result = await agent_turn(
        daemon, model, session, write(".vscode/tasks.json", "{}\n"), write("notes.txt", "n\n")
    )
    reverted = await daemon.call("turn/revert", {"turnId": result["turnId"]})
    assert reverted["restored"] == ["notes.txt"]
    assert reverted["skipped"] == [{"path": ".vscode/tasks.json", "reason": "protected"}]
    assert [a["summary"] for a in asked] == [
        "write_file wants to write .vscode/tasks.json",
        "turn/revert wants to write .vscode/tasks.json",
    ]
    assert asked[1]["turnId"] == result["turnId"] and asked[1]["tool"] == "turn/revert"
    assert (workspace / ".vscode" / "tasks.json").read_text() == "{}\n"


async def test_changes_of_unknown_turns_and_of_another_sessions_turn_are_refused(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    other = await open_session(daemon, workspace, policy=OPEN)
    theirs = await agent_turn(daemon, model, other, write("a.txt", "a\n"))
    unknown = await daemon.error("turn/changes", {"turnId": "t-nope"})
    assert unknown.code == -32010 and unknown.data == {"turnId": "t-nope"}
    foreign = await daemon.error(
        "session/changes",
        {"sessionId": session["sessionId"], "from": None, "to": theirs["turnId"]},
    )
    assert foreign.code == -32602 and foreign.data["turnId"] == theirs["turnId"]
    branch = await daemon.error(
        "session/branch",
        {"sessionId": session["sessionId"], "turnId": "t-nope", "restoreFiles": True},
    )
    assert branch.code == -32010
    assert (workspace / "a.txt").read_text() == "a\n"


async def test_a_session_whose_turns_changed_files_is_deleted_with_its_change_sets(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    kept = await open_session(daemon, workspace, policy=OPEN)
    await agent_turn(daemon, model, kept, write("kept.txt", "shared line\n"))
    doomed = await open_session(daemon, workspace, policy=OPEN)
    await agent_turn(daemon, model, doomed, write("a.txt", "only the doomed session's\n"))
    await agent_turn(daemon, model, doomed, write("kept.txt", "shared line\n"))

    await daemon.call("session/delete", {"sessionId": doomed["sessionId"]})

    with contextlib.closing(apsw.Connection(str(daemon.db))) as con:
        left = {row[0] for row in con.execute("SELECT sha256 FROM blob")}
        changed = con.execute("SELECT count(*) FROM change").fetchone()[0]
    assert changed == 1  # the kept session's write
    assert left == {hashlib.sha256(b"shared line\n").hexdigest()}
    reopened = await daemon.call("session/reopen", {"sessionId": kept["sessionId"]})
    assert list(await changes(daemon, reopened["head"])) == ["kept.txt"]
