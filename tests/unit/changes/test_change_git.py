"""Snapshots of a git work tree through a private index: what a command changed, with
nothing of the user's written and nothing the repository configures run."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.fixtures.git_repo import git, make_repo, user_state
from trellisd.changes import GitTree, Kind


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.txt": "a\n", "sub/b.txt": "b\n"})


def test_a_snapshot_pair_shows_what_changed_and_the_users_state_is_untouched(
    repo: Path, tmp_path: Path
) -> None:
    before = user_state(repo)
    tree = GitTree.find(repo, tmp_path / "state", "s-1")
    assert tree is not None
    first = tree.snapshot(keep=True)
    (repo / "a.txt").write_text("A\n")
    (repo / "sub" / "b.txt").unlink()
    (repo / "new.txt").write_text("new\n")
    second = tree.snapshot()
    found = {path: (was, now) for path, was, now in tree.contents(tree.changes(first, second))}
    assert sorted(found) == ["a.txt", "new.txt", "sub/b.txt"]
    assert (found["a.txt"][0].data, found["a.txt"][1].data) == (b"a\n", b"A\n")
    assert found["sub/b.txt"][1].kind == Kind.ABSENT
    assert found["new.txt"][0].kind == Kind.ABSENT
    after = user_state(repo)
    assert {k: v for k, v in after.items() if k != "status"} == {
        k: v for k, v in before.items() if k != "status"
    }
    assert git(repo, "rev-parse", "refs/trellisd/s-1").strip() == first
    assert not (repo / ".git" / "logs" / "refs" / "trellisd").exists()


def test_a_root_below_the_top_sees_only_its_own_files_by_their_root_relative_paths(
    repo: Path, tmp_path: Path
) -> None:
    tree = GitTree.find(repo / "sub", tmp_path / "state", "s-1")
    assert tree is not None
    first = tree.snapshot()
    (repo / "a.txt").write_text("outside the root\n")
    (repo / "sub" / "b.txt").write_text("B\n")
    assert [c.path for c in tree.changes(first, tree.snapshot())] == ["b.txt"]


def test_a_folder_outside_git_has_no_tree(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert GitTree.find(tmp_path / "plain", tmp_path / "state", "s-1") is None


def test_what_the_repository_configures_to_run_never_runs(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    for key, value in [
        ("filter.evil.clean", str(script)),
        ("filter.evil.process", str(script)),
        ("core.fsmonitor", str(script)),
        ("core.hooksPath", str(tmp_path)),
    ]:
        git(repo, "config", key, value)
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    (tmp_path / "reference-transaction").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (tmp_path / "reference-transaction").chmod(0o755)
    (repo / ".gitattributes").write_text("* filter=evil\n")
    tree = GitTree.find(repo, tmp_path / "state", "s-1")
    assert tree is not None
    first = tree.snapshot()
    (repo / "a.txt").write_text("changed\n")
    changed = tree.contents(tree.changes(first, tree.snapshot()))
    assert [(path, now.data) for path, _, now in changed] == [("a.txt", b"changed\n")]
    assert not marker.exists()


def _evil_filter(repo: Path, tmp_path: Path) -> Path:
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (repo / ".gitattributes").write_text("* filter=evil\n")
    git(repo, "add", ".gitattributes")
    return script


@pytest.mark.parametrize("where", ["config", "include"])
def test_a_filter_configured_between_snapshots_never_runs(
    repo: Path, tmp_path: Path, where: str
) -> None:
    script = _evil_filter(repo, tmp_path)
    extra = tmp_path / "extra.cfg"
    if where == "include":
        git(repo, "config", "include.path", str(extra))  # not there yet
    tree = GitTree.find(repo, tmp_path / "state", "s-1")
    assert tree is not None
    first = tree.snapshot(keep=True)
    # What a command could do between two snapshots: configure a filter, directly or in a
    # file the configuration includes.
    if where == "include":
        extra.write_text(f'[filter "evil"]\n\tclean = {script}\n\tprocess = {script}\n')
    else:
        git(repo, "config", "filter.evil.clean", str(script))
        git(repo, "config", "filter.evil.process", str(script))
    (repo / "a.txt").write_text("changed\n")
    changed = tree.contents(tree.changes(first, tree.snapshot(keep=True)))
    assert [(path, now.data) for path, _, now in changed] == [("a.txt", b"changed\n")]
    assert not (tmp_path / "ran").exists()


def test_snapshots_with_nothing_changed_between_are_one_tree_and_the_next_change_shows(
    repo: Path, tmp_path: Path
) -> None:
    tree = GitTree.find(repo, tmp_path / "state", "s-1")
    assert tree is not None
    first = tree.snapshot(keep=True)
    assert tree.snapshot(keep=True) == first
    (repo / "sub" / "b.txt").write_text("a person's edit\n")
    second = tree.snapshot(keep=True)
    assert [c.path for c in tree.changes(first, second)] == ["sub/b.txt"]
    assert git(repo, "rev-parse", "refs/trellisd/s-1").strip() == second
    tree.index.unlink()  # the private index lost: taken again from the user's
    third = tree.snapshot(keep=True)
    assert [c.path for c in tree.changes(second, third)] == []
