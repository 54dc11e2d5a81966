"""A git worktree per session, in-process over real git repositories: made at open, the
session's turns working in it, merged into the user's branch (clean, conflicting, or over
the user's own changes), discarded, deleted with its session, and what a daemon that died
at each step left pruned or adopted at the next start."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.fixtures.fake_services import Editor, Model
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.errors import Conflict, InvalidParams
from trellisd.records import ToolCall, Worktree
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Decision, Outcome

ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "HOME": "/nonexistent",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "user",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "user",
    "GIT_COMMITTER_EMAIL": "user@example.com",
}


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=folder, env=ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit(folder: Path, files: dict[str, str], message: str = "change") -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    git(folder, "add", "--", *files)
    git(folder, "commit", "-q", "-m", message)


@pytest.fixture(autouse=True)
def approving(editor: Editor) -> None:
    editor.decisions = [Decision.ALLOW] * 20


@pytest.fixture
def repo(root: Path) -> Path:
    git(root, "init", "-q", "-b", "main")
    commit(root, {"a.txt": "one\ntwo\nthree\n", "b.txt": "bee\n", "sub/c.txt": "sea\n"}, "first")
    return root


def write(path: str, content: str) -> ToolCall:
    return ToolCall(f"call-{path}", "write_file", {"path": path, "content": content})


async def session_writing(app: Services, model: Model, repo: Path, files: dict[str, str]) -> str:
    """A worktree session whose first turn wrote ``files``."""
    session = await app.sessions.open(str(repo), None, None, None, worktree=True)
    for path, content in files.items():
        model.reply("", write(path, content))
    model.reply("Done.")
    result = await app.turns.turn(TurnRequest(session.session_id, "write"))
    assert result.outcome == Outcome.FINISHED
    return session.session_id


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split("\n")


async def test_a_worktree_session_works_in_its_own_worktree_on_its_own_branch(
    app: Services, model: Model, repo: Path
) -> None:
    opened = await app.sessions.open(str(repo), None, None, None, worktree="fix-it")
    worktree = opened.worktree

    assert worktree is not None
    assert worktree.branch == "trellisd/fix-it" and worktree.base == "main"
    assert worktree.base_commit == git(repo, "rev-parse", "main")
    assert worktree.checkout == str(repo.resolve())
    assert opened.root == worktree.path and Path(worktree.path).name == "fix-it"
    assert app.store.folder in Path(worktree.path).parents  # the daemon's, not the user's
    assert (Path(worktree.path) / "sub" / "c.txt").read_text() == "sea\n"
    assert worktree.path in git(repo, "worktree", "list", "--porcelain")

    model.reply("", write("new.txt", "made in the worktree\n"))
    model.reply("Done.")
    await app.turns.turn(TurnRequest(opened.session_id, "write"))

    assert (Path(worktree.path) / "new.txt").read_text() == "made in the worktree\n"
    assert not (repo / "new.txt").exists()
    assert git(repo, "status", "--porcelain") == ""
    [listed], _ = await app.sessions.page(str(repo), 10, None)
    assert listed.session.worktree == worktree
    [found], _ = await app.sessions.page(str(repo), 10, None, "write")
    assert found.session.session_id == opened.session_id
    assert (await app.sessions.get(opened.session_id)).worktree == worktree


async def test_a_session_opened_in_a_subfolder_works_in_the_same_subfolder(
    app: Services, repo: Path
) -> None:
    opened = await app.sessions.open(str(repo / "sub"), None, None, None, worktree=True)
    assert opened.worktree is not None
    assert opened.root == str(Path(opened.worktree.path) / "sub")
    assert len(opened.worktree.branch) == len("trellisd/") + 6  # a short name made up


@pytest.mark.parametrize("name", ["../out", "a/b", "-x", "x.lock", "a..b", "", "HEAD"])
async def test_a_name_that_is_not_one_plain_branch_name_is_refused(
    app: Services, repo: Path, name: str
) -> None:
    with pytest.raises(InvalidParams) as refused:
        await app.sessions.open(str(repo), None, None, None, worktree=name)
    assert refused.value.data["field"] == "worktree"
    assert branches(repo) == ["main"]


async def test_a_name_taken_already_is_refused(app: Services, repo: Path) -> None:
    await app.sessions.open(str(repo), None, None, None, worktree="same")
    with pytest.raises(Conflict, match="exists already"):
        await app.sessions.open(str(repo), None, None, None, worktree="same")


async def test_outside_git_or_on_a_detached_head_there_is_no_worktree(
    app: Services, root: Path, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParams, match="not in a git work tree"):
        await app.sessions.open(str(root), None, None, None, worktree=True)
    git(root, "init", "-q", "-b", "main")
    commit(root, {"a.txt": "a"})
    git(root, "checkout", "-q", "--detach")
    with pytest.raises(Conflict, match="detached HEAD"):
        await app.sessions.open(str(root), None, None, None, worktree=True)
    assert [s async for s in _sessions(app)] == []


async def _sessions(app: Services) -> AsyncIterator[str]:
    page, _ = await app.sessions.page(None, 50, None)
    for summary in page:
        yield summary.session.session_id


async def test_a_clean_merge_lands_in_the_checkout_and_leaves_the_users_changes(
    app: Services, model: Model, repo: Path
) -> None:
    session_id = await session_writing(
        app, model, repo, {"a.txt": "one\nTWO\nthree\n", "n.txt": "n\n"}
    )
    commit(repo, {"b.txt": "bee, the user's\n"}, "the user's own")
    (repo / "sub" / "c.txt").write_text("sea, not committed\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "loose.txt").write_text("untracked\n")
    user_head = git(repo, "rev-parse", "main")

    merged = await app.sessions.worktrees.merge(session_id)

    assert merged.base == "main" and merged.checkout_updated
    assert merged.paths == ("a.txt", "n.txt")
    assert git(repo, "rev-parse", "main") == merged.commit
    assert git(repo, "rev-parse", "main^1") == user_head  # three-way: a merge commit
    assert (repo / "a.txt").read_text() == "one\nTWO\nthree\n"
    assert (repo / "n.txt").read_text() == "n\n"
    assert (repo / "b.txt").read_text() == "bee, the user's\n"
    assert (repo / "sub" / "c.txt").read_text() == "sea, not committed\n"
    assert sorted(git(repo, "status", "--porcelain").split("\n")) == [
        " M sub/c.txt",
        "?? loose.txt",
        "A  staged.txt",
    ]


async def test_a_merge_into_a_branch_not_checked_out_moves_only_the_branch(
    app: Services, model: Model, repo: Path
) -> None:
    session_id = await session_writing(app, model, repo, {"n.txt": "n\n"})
    git(repo, "checkout", "-q", "-b", "elsewhere")

    merged = await app.sessions.worktrees.merge(session_id)

    assert not merged.checkout_updated and merged.paths == ("n.txt",)
    assert git(repo, "rev-parse", "main") == merged.commit  # a fast-forward
    assert git(repo, "show", "main:n.txt") == "n"
    assert not (repo / "n.txt").exists()


async def test_a_conflicting_merge_answers_the_paths_and_merges_nothing(
    app: Services, model: Model, repo: Path
) -> None:
    session_id = await session_writing(app, model, repo, {"a.txt": "one\nsession\nthree\n"})
    commit(repo, {"a.txt": "one\nuser\nthree\n"})
    before = git(repo, "rev-parse", "main")

    with pytest.raises(Conflict) as refused:
        await app.sessions.worktrees.merge(session_id)

    assert refused.value.data["paths"] == ["a.txt"]
    assert "nothing was merged" in refused.value.message
    assert git(repo, "rev-parse", "main") == before
    assert (repo / "a.txt").read_text() == "one\nuser\nthree\n"
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("staged", [False, True])
async def test_a_merge_over_the_users_uncommitted_change_changes_nothing(
    app: Services, model: Model, repo: Path, staged: bool
) -> None:
    session_id = await session_writing(app, model, repo, {"b.txt": "session's bee\n"})
    (repo / "b.txt").write_text("the user's bee, not committed\n")
    if staged:
        git(repo, "add", "b.txt")
    before = git(repo, "rev-parse", "main")

    with pytest.raises(Conflict) as refused:
        await app.sessions.worktrees.merge(session_id)

    assert refused.value.data["paths"] == ["b.txt"]
    assert git(repo, "rev-parse", "main") == before
    assert (repo / "b.txt").read_text() == "the user's bee, not committed\n"


async def test_an_untracked_file_where_the_merge_adds_one_is_kept(
    app: Services, model: Model, repo: Path
) -> None:
    session_id = await session_writing(app, model, repo, {"n.txt": "session's\n"})
    (repo / "n.txt").write_text("the user's\n")
    with pytest.raises(Conflict) as refused:
        await app.sessions.worktrees.merge(session_id)
    assert refused.value.data["paths"] == ["n.txt"]
    assert (repo / "n.txt").read_text() == "the user's\n"


async def test_merging_twice_merges_only_what_is_new(
    app: Services, model: Model, repo: Path
) -> None:
    session_id = await session_writing(app, model, repo, {"n.txt": "n\n"})
    first = await app.sessions.worktrees.merge(session_id)
    again = await app.sessions.worktrees.merge(session_id)
    assert again.commit == first.commit and again.paths == ()


async def test_discard_removes_the_worktree_and_its_branch(
    app: Services, model: Model, repo: Path
) -> None:
    session_id = await session_writing(app, model, repo, {"n.txt": "n\n"})
    path = Path((await app.sessions.get(session_id)).worktree.path)  # type: ignore[union-attr]

    session = await app.sessions.worktrees.discard(session_id)

    assert session.worktree is None
    assert not path.exists()
    assert branches(repo) == ["main"]
    assert str(path) not in git(repo, "worktree", "list", "--porcelain")
    with pytest.raises(Conflict, match="has no worktree"):
        await app.sessions.worktrees.merge(session_id)


async def test_discard_and_merge_are_refused_while_a_turn_runs(
    app: Services, model: Model, repo: Path
) -> None:
    session = await app.sessions.open(str(repo), None, None, None, worktree=True)
    hold = asyncio.Event()
    model.reply("slow", hold=hold)
    turn = asyncio.ensure_future(app.turns.turn(TurnRequest(session.session_id, "wait")))
    await model.waiting.wait()

    with pytest.raises(Conflict, match="running turn"):
        await app.sessions.worktrees.discard(session.session_id)
    with pytest.raises(Conflict, match="running turn"):
        await app.sessions.worktrees.merge(session.session_id)
    hold.set()
    await turn
    assert Path(session.worktree.path).is_dir()  # type: ignore[union-attr]


async def test_closing_keeps_the_worktree_and_deleting_discards_it(
    app: Services, repo: Path
) -> None:
    session = await app.sessions.open(str(repo), None, None, None, worktree="kept")
    path = Path(session.worktree.path)  # type: ignore[union-attr]
    await app.sessions.close(session.session_id)
    assert path.is_dir() and "trellisd/kept" in branches(repo)

    await app.sessions.delete(session.session_id)

    assert not path.exists() and branches(repo) == ["main"]
    assert await app.store.worktrees.rows() == []


async def restart(app: Services, db: Path, model: Model, editor: Editor) -> Services:
    """The daemon ended (its rows left as they were) and a new one started on its store."""
    await app.close()
    return await services.start(db, ProviderSettings(name="openai"), editor, lambda s: model)


@pytest_asyncio.fixture
async def first(tmp_path: Path, model: Model, editor: Editor) -> AsyncIterator[Services]:
    started = await services.start(
        tmp_path / "crash.db", ProviderSettings(name="openai"), editor, lambda s: model
    )
    yield started


async def test_a_start_prunes_a_worktree_recorded_but_never_made(
    first: Services, tmp_path: Path, model: Model, editor: Editor, repo: Path
) -> None:
    path = first.sessions.worktrees.folder / "r" / "never"
    head = git(repo, "rev-parse", "main")
    await first.store.worktrees.begin(
        Worktree(str(path), "trellisd/never", "main", head, str(repo))
    )

    second = await restart(first, tmp_path / "crash.db", model, editor)
    try:
        assert await second.store.worktrees.rows() == []
    finally:
        await second.close()


async def test_a_start_prunes_a_worktree_made_whose_session_never_was(
    first: Services, tmp_path: Path, model: Model, editor: Editor, repo: Path
) -> None:
    made = await first.sessions.worktrees.make(repo, "half")
    assert Path(made.worktree.path).is_dir() and "trellisd/half" in branches(repo)

    second = await restart(first, tmp_path / "crash.db", model, editor)
    try:
        assert not Path(made.worktree.path).exists()
        assert branches(repo) == ["main"]
        assert made.worktree.path not in git(repo, "worktree", "list", "--porcelain")
        assert await second.store.worktrees.rows() == []
    finally:
        await second.close()


@pytest.mark.parametrize("removed", [False, True])
async def test_a_start_finishes_a_removal_under_way(
    first: Services, tmp_path: Path, model: Model, editor: Editor, repo: Path, removed: bool
) -> None:
    session = await first.sessions.open(str(repo), None, None, None, worktree="going")
    path = Path(session.worktree.path)  # type: ignore[union-attr]
    await first.store.worktrees.removing(session.session_id)
    if removed:  # the worktree was removed, its branch not yet
        git(repo, "worktree", "remove", "--force", str(path))

    second = await restart(first, tmp_path / "crash.db", model, editor)
    try:
        assert not path.exists() and branches(repo) == ["main"]
        assert (await second.sessions.get(session.session_id)).worktree is None
    finally:
        await second.close()


async def test_a_start_prunes_a_folder_no_row_names_and_adopts_the_rest(
    first: Services, tmp_path: Path, model: Model, editor: Editor, repo: Path
) -> None:
    kept = await first.sessions.open(str(repo), None, None, None, worktree="kept")
    stray = await first.sessions.worktrees.make(repo, "stray")
    await first.store.worktrees.forget(stray.worktree.path)

    second = await restart(first, tmp_path / "crash.db", model, editor)
    try:
        assert not Path(stray.worktree.path).exists()
        assert branches(repo) == ["main", "trellisd/kept"]
        adopted = await second.sessions.get(kept.session_id)
        assert adopted.worktree == kept.worktree and Path(kept.root).is_dir()
        merged = await second.sessions.worktrees.merge(kept.session_id)
        assert merged.paths == ()
    finally:
        await second.close()


async def test_a_start_prunes_the_worktree_of_a_session_deleted_before_it(
    first: Services, tmp_path: Path, model: Model, editor: Editor, repo: Path
) -> None:
    session = await first.sessions.open(str(repo), None, None, None, worktree="orphan")
    await first.store.worktrees.removing(session.session_id)
    await first.store.sessions.delete(session.session_id)  # and the daemon died there

    second = await restart(first, tmp_path / "crash.db", model, editor)
    try:
        assert not Path(session.root).exists() and branches(repo) == ["main"]
        assert await second.store.worktrees.rows() == []
    finally:
        await second.close()


async def test_no_program_the_repositorys_configuration_names_runs(
    app: Services, model: Model, repo: Path, tmp_path: Path
) -> None:
    """A filter, a merge driver and hooks the repository names (the model may write its
    configuration): making the worktree, committing its work and merging run none of them,
    and the merge driver's files answer a conflict."""
    ran = tmp_path / "ran"
    commit(repo, {".gitattributes": "*.txt filter=evil merge=evil\n"})
    for key, value in {
        "filter.evil.smudge": f"touch {ran}-smudge; cat",
        "filter.evil.clean": f"touch {ran}-clean; cat",
        "filter.evil.required": "true",
        "merge.evil.driver": f"touch {ran}-merge; cp %B %A",
    }.items():
        git(repo, "config", key, value)
    for hook in ("post-checkout", "reference-transaction", "pre-commit"):
        script = repo / ".git" / "hooks" / hook
        script.write_text(f"#!/bin/sh\ntouch {ran}-{hook}\n")
        script.chmod(0o755)
    session_id = await session_writing(app, model, repo, {"a.txt": "one\nsession\nthree\n"})
    (repo / "a.txt").write_text("user\ntwo\nthree\n")
    quiet = ("-c", "filter.evil.clean=", "-c", "filter.evil.required=0", "-c", "core.hooksPath=")
    git(repo, *quiet, "commit", "-qam", "the user's")

    with pytest.raises(Conflict) as refused:
        await app.sessions.worktrees.merge(session_id)

    assert refused.value.data["paths"] == ["a.txt"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ran")) == []


async def test_a_file_the_session_removed_is_removed_from_the_checkout_and_its_index(
    app: Services, model: Model, repo: Path
) -> None:
    session = await app.sessions.open(str(repo), None, None, None, worktree=True)
    model.reply("", ToolCall("call-rm", "run_command", {"argv": ["rm", "sub/c.txt"]}))
    model.reply("Removed.")
    await app.turns.turn(TurnRequest(session.session_id, "remove c"))
    commit(repo, {"b.txt": "the user's bee\n"})  # so that the merge is three-way

    merged = await app.sessions.worktrees.merge(session.session_id)

    assert merged.paths == ("sub/c.txt",)
    assert not (repo / "sub").exists()
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "ls-files").split() == ["a.txt", "b.txt"]
