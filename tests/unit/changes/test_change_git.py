"""Snapshots of a git work tree by a private repository: what a command changed, with
nothing of the user's written and nothing the repository configures run."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.git_repo import git, make_repo, user_state
from trellisd.changes import GitTree, Kind
from trellisd.changes import git as git_module


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.txt": "a\n", "sub/b.txt": "b\n"})


def test_a_snapshot_pair_shows_what_changed_and_the_users_state_is_untouched(
    repo: Path, tmp_path: Path
) -> None:
    before = user_state(repo)
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot(start=True)
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
    assert "trellisd" not in git(repo, "for-each-ref")


def test_a_root_below_the_top_sees_only_its_own_files_by_their_root_relative_paths(
    repo: Path, tmp_path: Path
) -> None:
    tree = GitTree.find(repo / "sub", tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot()
    (repo / "a.txt").write_text("outside the root\n")
    (repo / "sub" / "b.txt").write_text("B\n")
    assert [c.path for c in tree.changes(first, tree.snapshot())] == ["b.txt"]


def test_a_folder_outside_git_has_no_tree(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert GitTree.find(tmp_path / "plain", tmp_path / "state", "s-1", dict(os.environ)) is None


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
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
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
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot(start=True)
    # What a command could do between two snapshots: configure a filter, directly or in a
    # file the configuration includes.
    if where == "include":
        extra.write_text(f'[filter "evil"]\n\tclean = {script}\n\tprocess = {script}\n')
    else:
        git(repo, "config", "filter.evil.clean", str(script))
        git(repo, "config", "filter.evil.process", str(script))
    (repo / "a.txt").write_text("changed\n")
    changed = tree.contents(tree.changes(first, tree.snapshot(start=True)))
    assert [(path, now.data) for path, _, now in changed] == [("a.txt", b"changed\n")]
    assert not (tmp_path / "ran").exists()


def test_snapshots_with_nothing_changed_between_are_one_tree_and_the_next_change_shows(
    repo: Path, tmp_path: Path
) -> None:
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot(start=True)
    assert tree.snapshot(start=True) == first
    (repo / "sub" / "b.txt").write_text("a person's edit\n")
    second = tree.snapshot(start=True)
    assert [c.path for c in tree.changes(first, second)] == ["sub/b.txt"]
    tree.index.unlink()  # the private index lost: taken again from the user's
    third = tree.snapshot(start=True)
    assert [c.path for c in tree.changes(second, third)] == []


@pytest.mark.parametrize("where", ["config", "include", "global"])
def test_a_filter_whose_name_has_capitals_never_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    driver = f'[filter "EviL"]\n\tclean = {script}\n\tsmudge = {script}\n\tprocess = {script}\n'
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    if where == "config":
        with (repo / ".git" / "config").open("a") as config:
            config.write(driver)
    elif where == "include":
        (tmp_path / "extra.cfg").write_text(driver)
        git(repo, "config", "include.path", str(tmp_path / "extra.cfg"))
    else:
        (home / ".gitconfig").write_text(driver)
    (repo / ".gitattributes").write_text("* filter=EviL\n")
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot()
    (repo / "a.txt").write_text("changed\n")
    changed = tree.contents(tree.changes(first, tree.snapshot()))
    assert [(path, now.data) for path, _, now in changed] == [("a.txt", b"changed\n")]
    assert not marker.exists()


@pytest.mark.parametrize("entry", ["", "."])
def test_the_repositorys_own_git_program_never_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    marker = tmp_path / "ran"
    own = repo / "git"
    own.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    own.chmod(0o755)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PATH", f"{entry}{os.pathsep}{os.environ['PATH']}")
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot()
    (repo / "a.txt").write_text("changed\n")
    changed = tree.contents(tree.changes(first, tree.snapshot()))
    assert [(path, now.data) for path, _, now in changed] == [("a.txt", b"changed\n")]
    assert not marker.exists()


def _everything_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_snapshots_leave_nothing_in_the_users_repository_and_a_mirror_takes_no_secret(
    repo: Path, tmp_path: Path
) -> None:
    (repo / ".env.local").write_text("API_TOKEN=hunter2-untracked\n")
    dot_git = _everything_in(repo / ".git")
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot()
    (repo / ".env.local").write_text("API_TOKEN=hunter3-untracked\n")
    (repo / "a.txt").write_text("changed\n")
    second = tree.snapshot()
    assert {c.path for c in tree.changes(first, second)} == {".env.local", "a.txt"}

    assert "trellisd" not in git(repo, "for-each-ref")
    assert _everything_in(repo / ".git") == dot_git
    git(tmp_path, "clone", "-q", "--mirror", str(repo), "mirror.git")
    mirror = tmp_path / "mirror.git"
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=mirror,
        capture_output=True,
        check=True,
    ).stdout
    assert b"untracked" not in objects and objects


def test_what_the_user_ignores_stays_out_of_the_snapshots(repo: Path, tmp_path: Path) -> None:
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("excluded.txt\n")
    (tmp_path / "ignore").write_text("*.log\n")
    git(repo, "config", "core.excludesFile", str(tmp_path / "ignore"))
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    first = tree.snapshot(start=True)
    for name in ("excluded.txt", "build.log", "seen.txt"):
        (repo / name).write_text("made\n")
    assert [c.path for c in tree.changes(first, tree.snapshot())] == ["seen.txt"]


def test_the_refs_earlier_versions_kept_in_the_users_repository_are_deleted(
    repo: Path, tmp_path: Path
) -> None:
    head = git(repo, "rev-parse", "HEAD^{tree}").strip()
    git(repo, "update-ref", "refs/trellisd/s-0", head)
    assert GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ)) is not None
    assert "trellisd" not in git(repo, "for-each-ref")


def test_a_private_repository_past_its_bound_is_emptied_before_a_command_and_still_works(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_module, "MAX_PRIVATE_BYTES", 0)
    monkeypatch.setattr(git_module, "TIDY_EVERY", 1)
    tree = GitTree.find(repo, tmp_path / "state", "s-1", dict(os.environ))
    assert tree is not None
    (repo / "big.txt").write_text("kept by the first snapshot\n")
    blob = git(repo, "hash-object", "big.txt").strip()
    kept = tree.index.parent / "objects" / blob[:2] / blob[2:]
    tree.snapshot(start=True)
    assert kept.is_file()
    (repo / "big.txt").unlink()
    first = tree.snapshot(start=True)  # emptied first: only this snapshot's objects
    assert not kept.exists()
    (repo / "a.txt").write_text("changed\n")
    changed = tree.contents(tree.changes(first, tree.snapshot()))
    assert [(path, now.data) for path, _, now in changed] == [("a.txt", b"changed\n")]
