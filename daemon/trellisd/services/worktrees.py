"""A git worktree per session: made when the session opens (``session/open`` with
``worktree``), merged into the branch it started from (``session/worktree/merge``), removed
with its branch (``session/worktree/discard``, or deleting the session).

The worktree is a folder of the daemon's own (``<store folder>/worktrees/<repository>/<name>``),
never inside the user's checkout, on a new branch ``trellisd/<name>`` that starts at the commit
of the branch checked out in the user's checkout (its ``base``). The session's root is the
same folder of the worktree as the root it was opened on is of the checkout.

Merging is three-way (``git merge-tree --write-tree``, then ``commit-tree``; what the worktree
holds uncommitted is first committed on its branch) and then moves the base branch. When the
base branch is checked out in the user's checkout, only the files the merge changed are written
there, with their index entries; where the user has a change of their own to one of them
(staged, unstaged or untracked), nothing is done and the paths are answered. A conflict of the
merge itself also answers the paths and merges nothing.

Every git step is recorded first (``store.worktrees``), so a start after a crash adopts the
worktrees whose session exists and prunes the rest (``recover``): the worktree, its branch and
git's entry for it; each step is idempotent.

The repositories are the model's to write, so git runs as ``changes.git`` runs it: found once
on the absolute entries of ``PATH``, argv only, no ``GIT_*`` variable of the daemon's, hooks
off (``core.hooksPath=/dev/null``), and every setting that names a program (a filter or merge
driver, an fsmonitor, a pager, an external diff) overridden so that none runs: a filter does
nothing, a merge driver of the repository's own answers a conflict.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..changes.git import git_program
from ..errors import Conflict, InvalidParams, NotFound, TrellisError
from ..records import Session, Worktree
from ..store.facade import AsyncStore
from .running import Running

log = logging.getLogger(__name__)

BRANCH_PREFIX = "trellisd/"
TIMEOUT_SECONDS = 300.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")
_SAFE = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.sshCommand=false",
    "diff.external=",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "submodule.recurse=false",
    "commit.gpgSign=false",
    "credential.helper=",
)
_PROGRAMS = re.compile(r"(filter|merge|diff)\.(.+)\.(clean|smudge|process|driver|command|textconv)")
_ZERO = "0" * 40


class WorktreeError(TrellisError):
    """Git could not do what a worktree needed; the message says what and why."""


@dataclass(frozen=True)
class Merged:
    """What ``session/worktree/merge`` did: the base branch's new commit (its old one when
    there was nothing to merge) and the paths it changed."""

    session_id: str
    base: str
    commit: str
    paths: tuple[str, ...]
    checkout_updated: bool


class Git:
    """git, run in one repository with nothing that could run a program of the
    repository's: the settings that name one are read first, and overridden."""

    def __init__(self, program: str, environment: Mapping[str, str], folder: Path) -> None:
        self.program, self.folder = program, folder
        env = {k: v for k, v in environment.items() if not k.startswith("GIT_")}
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(p)
        )
        env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        env.update(GIT_COMMITTER_NAME="trellisd", GIT_COMMITTER_EMAIL="trellisd@localhost")
        self.env = env
        self.code = 0  # the exit code of the last command run
        self.options: list[str] = ["--no-pager"]
        for option in _SAFE:
            self.options += ["-c", option]
        listed = self.run(["config", "--null", "--list"], check=False)
        keys = {e.split(b"\n", 1)[0].decode(errors="replace") for e in listed.split(b"\0")}
        for key in sorted(keys):
            found = _PROGRAMS.fullmatch(key)
            if found is None:
                continue
            kind, driver = found.group(1), found.group(2)
            if kind == "filter":
                self.options += ["-c", f"{key}=", "-c", f"filter.{driver}.required=false"]
            elif kind == "merge":
                self.options += ["-c", f"{key}=exit 1"]
            else:
                self.options += ["-c", f"{key}="]
        if "user.name" not in keys or "user.email" not in keys:
            env.update(GIT_AUTHOR_NAME="trellisd", GIT_AUTHOR_EMAIL="trellisd@localhost")

    def run(
        self,
        args: list[str],
        check: bool = True,
        stdin: bytes | None = None,
        cwd: Path | None = None,
        codes: tuple[int, ...] = (0,),
    ) -> bytes:
        """git's output; ``WorktreeError`` when it ends with a code not in ``codes`` (unless
        ``check`` is False)."""
        try:
            done = subprocess.run(
                [self.program, *self.options, *args],
                cwd=cwd or self.folder,
                env=self.env,
                input=stdin,
                stdin=subprocess.DEVNULL if stdin is None else None,
                capture_output=True,
                timeout=TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise WorktreeError(f"git {args[0]} could not run: {exc}") from exc
        self.code = done.returncode
        if check and done.returncode not in codes:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exit code {done.returncode}"
            raise WorktreeError(f"git {args[0]} failed in {cwd or self.folder}: {why}")
        return done.stdout

    def text(self, args: list[str], cwd: Path | None = None) -> str:
        return self.run(args, cwd=cwd).decode("utf-8", errors="surrogateescape").strip()

    def has(self, ref: str) -> bool:
        self.run(["show-ref", "--verify", "--quiet", ref], check=False)
        return self.code == 0


@dataclass(frozen=True)
class Planned:
    """A worktree about to be made, and the session root inside it."""

    worktree: Worktree
    root: Path


class WorktreeService:
    def __init__(self, store: AsyncStore, running: Running, environment: Mapping[str, str]) -> None:
        self.store, self.running, self.environment = store, running, environment
        self._lock = asyncio.Lock()

    @property
    def folder(self) -> Path:
        """Where the worktrees are made: the daemon's, beside its store."""
        return self.store.folder / "worktrees"

    def git(self, folder: Path) -> Git:
        program = git_program(self.environment.get("PATH", os.defpath))
        if program is None:
            raise WorktreeError("a worktree needs git, and there is none on PATH")
        return Git(program, self.environment, folder)

    async def make(self, root: Path, name: bool | str) -> Planned:
        """Make a worktree of the repository ``root`` is in, named ``name`` (True: a name
        made up); recorded first, as ``creating``. The caller makes its session, or
        ``undo``es it."""
        async with self._lock:  # two opens never pick the same name
            planned = await asyncio.to_thread(self._plan, root, name)
            await self.store.worktrees.begin(planned.worktree)
        try:
            await asyncio.to_thread(self._add, planned.worktree)
        except BaseException:
            await self.undo(planned.worktree)
            raise
        return planned

    async def undo(self, worktree: Worktree) -> None:
        """Take apart a worktree whose session was never made."""
        await asyncio.to_thread(self._remove, worktree)
        await self.store.worktrees.forget(worktree.path)

    def _plan(self, root: Path, name: bool | str) -> Planned:
        git = self.git(root)
        found = git.run(
            [
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-common-dir",
                "--show-prefix",
            ],
            check=False,
        )
        lines = found.decode("utf-8", errors="surrogateescape").split("\n")
        if git.code != 0 or len(lines) < 2:
            raise InvalidParams(f"root {root} is not in a git work tree", field="worktree")
        top, common = Path(lines[0]), Path(lines[1])
        prefix = lines[2] if len(lines) > 2 else ""
        base = git.run(["symbolic-ref", "-q", "HEAD"], check=False).decode().strip()
        if not base.startswith("refs/heads/"):
            raise Conflict(
                f"the checkout at {top} has no branch checked out (a detached HEAD):"
                " a worktree starts from a branch, to merge it back into",
                root=str(root),
            )
        commit = git.run(["rev-parse", "--verify", "-q", "HEAD^{commit}"], check=False)
        if git.code != 0:
            raise Conflict(
                f"the branch {base[11:]} at {top} has no commit yet: a worktree starts from one",
                root=str(root),
            )
        repository = self.folder / hashlib.sha256(str(common).encode()).hexdigest()[:16]
        if isinstance(name, str):
            _check(name)
            if git.has(f"refs/heads/{BRANCH_PREFIX}{name}") or (repository / name).exists():
                raise Conflict(
                    f"a worktree named {name} exists already in {top}: choose another name",
                    name=name,
                )
        else:
            name = secrets.token_hex(3)
            while git.has(f"refs/heads/{BRANCH_PREFIX}{name}") or (repository / name).exists():
                name = secrets.token_hex(3)
        path = repository / name
        worktree = Worktree(
            str(path), BRANCH_PREFIX + name, base[11:], commit.decode().strip(), str(top)
        )
        return Planned(worktree, path / prefix if prefix else path)

    def _add(self, worktree: Worktree) -> None:
        path = Path(worktree.path)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        git = self.git(Path(worktree.checkout))
        git.run(
            ["worktree", "add", "--quiet", "-b", worktree.branch, str(path), worktree.base_commit]
        )

    def _remove(self, worktree: Worktree) -> None:
        """Remove the worktree, its branch and git's entry for it: each step skipped when
        it was done already."""
        path, checkout = Path(worktree.path), Path(worktree.checkout)
        if self.folder not in path.parents:  # never anything but a folder of the daemon's
            raise WorktreeError(f"{path} is not a worktree of trellisd's; left as it is")
        if worktree.checkout and checkout.is_dir():
            git = self.git(checkout)
            if path.exists():
                git.run(["worktree", "remove", "--force", "--force", str(path)], check=False)
            shutil.rmtree(path, ignore_errors=True)
            git.run(["worktree", "prune"], check=False)
            if git.has(f"refs/heads/{worktree.branch}"):
                git.run(["branch", "-D", "--", worktree.branch], check=False)
        shutil.rmtree(path, ignore_errors=True)
        try:
            path.parent.rmdir()  # the repository's folder, when it held no other worktree
        except OSError:
            pass

    async def discard(self, session_id: str) -> Session:
        """Remove the session's worktree and its branch; refused while a turn runs."""
        self.running.refuse(session_id, "discard its worktree")
        session = await self.store.sessions.get(session_id)
        await self.store.leases.claim(session_id)
        worktree = await self.store.worktrees.removing(session_id)
        if worktree is None:
            raise _none(session_id)
        await asyncio.to_thread(self._remove, worktree)
        await self.store.worktrees.forget(worktree.path)
        return await self.store.sessions.get(session.session_id)

    async def deleted(self, worktree: Worktree) -> None:
        """The session of ``worktree`` was deleted: take the worktree apart."""
        await asyncio.to_thread(self._remove, worktree)
        await self.store.worktrees.forget(worktree.path)

    async def merge(self, session_id: str) -> Merged:
        """Merge the session's branch into its base branch (see the module's docstring)."""
        self.running.refuse(session_id, "merge its worktree")
        session = await self.store.sessions.get(session_id)
        if session.worktree is None:
            raise _none(session_id)
        await self.store.leases.claim(session_id)
        async with self._lock:  # two merges into one branch go one after the other
            return await asyncio.to_thread(self._merge, session.session_id, session.worktree)

    def _merge(self, session_id: str, worktree: Worktree) -> Merged:
        checkout, path = Path(worktree.checkout), Path(worktree.path)
        if not path.is_dir() or not checkout.is_dir():
            raise NotFound(
                f"the worktree of session {session_id} or its checkout {checkout} is gone",
                sessionId=session_id,
            )
        git = self.git(checkout)
        _commit_work(self.git(path), path, session_id)
        base_ref = f"refs/heads/{worktree.base}"
        old = git.text(["rev-parse", "--verify", base_ref + "^{commit}"])
        ours = git.text(["rev-parse", "--verify", f"refs/heads/{worktree.branch}^{{commit}}"])
        git.run(["merge-base", "--is-ancestor", ours, old], check=False)
        if git.code == 0:  # nothing of the session's that the base lacks
            return Merged(session_id, worktree.base, old, (), False)
        git.run(["merge-base", "--is-ancestor", old, ours], check=False)
        if git.code == 0:
            new = ours
        else:
            out = git.run(
                ["merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", old, ours],
                codes=(0, 1),
            )
            fields = [f.decode("utf-8", errors="surrogateescape") for f in out.split(b"\0") if f]
            if git.code == 1:
                paths = sorted(set(fields[1:]))
                raise Conflict(
                    f"merging session {session_id} into {worktree.base} conflicts in"
                    f" {_listed(paths)}; nothing was merged",
                    sessionId=session_id,
                    paths=paths,
                )
            message = f"Merge {worktree.branch} into {worktree.base}\n"
            new = git.text(
                ["commit-tree", "--no-gpg-sign", "-p", old, "-p", ours, "-m", message, fields[0]]
            )
        changed = _changed(git, old, new)
        head = git.run(["symbolic-ref", "-q", "HEAD"], check=False).decode().strip()
        checked_out = head == base_ref
        if checked_out:
            _refuse_theirs(git, checkout, changed, session_id, worktree.base)
        git.run(["update-ref", "-m", f"trellisd: merge {worktree.branch}", base_ref, new, old])
        if checked_out:
            _write_files(git, checkout, changed)
        return Merged(session_id, worktree.base, new, tuple(sorted(changed)), checked_out)

    async def recover(self) -> None:
        """At start: prune the worktrees left by a daemon that stopped while making or
        removing them, or whose session is gone, and the folders no row names."""
        if self.store.read_only:  # a newer trellisd's store: not ours to change
            return
        for worktree in await self.store.worktrees.leftovers():
            log.info("pruning the worktree %s: left over", worktree.path)
            await asyncio.to_thread(self._remove, worktree)
            await self.store.worktrees.forget(worktree.path)
        # The folders first, then the rows: a row is written before its folder is made, so
        # a folder another daemon makes meanwhile is either not listed or has its row read.
        folders = await asyncio.to_thread(self._folders)
        known = {Path(r.worktree.path) for r in await self.store.worktrees.rows()}
        await asyncio.to_thread(self._prune_unknown, [f for f in folders if f not in known])

    def _folders(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return [
            path
            for repository in self.folder.iterdir()
            if repository.is_dir()
            for path in repository.iterdir()
        ]

    def _prune_unknown(self, unknown: list[Path]) -> None:
        for path in unknown:
            log.info("pruning the worktree %s: no session has it", path)
            checkout = _checkout_of(path)
            branch = BRANCH_PREFIX + path.name
            self._remove(Worktree(str(path), branch, "", "", str(checkout or "")))


def _check(name: str) -> None:
    """Refuse a name that is not one folder and one plain branch name."""
    if (
        len(name) > 64
        or not _NAME.fullmatch(name)
        or name.endswith(".lock")
        or name.lower() == "head"
    ):
        raise InvalidParams(
            f"worktree name {name!r} is not usable: letters, digits, '-', '_' and single dots"
            " inside, at most 64, not ending in .lock",
            field="worktree",
        )


def _none(session_id: str) -> Conflict:
    return Conflict(f"session {session_id} has no worktree", sessionId=session_id)


def _listed(paths: list[str]) -> str:
    shown = ", ".join(paths[:5])
    return shown if len(paths) <= 5 else f"{shown} and {len(paths) - 5} more"


def _commit_work(git: Git, path: Path, session_id: str) -> None:
    """Commit what the worktree holds on its branch, when it differs from its last commit."""
    git.run(["add", "-A", "--", "."])
    tree = git.text(["write-tree"])
    head = git.text(["rev-parse", "--verify", "HEAD^{commit}"])
    if tree == git.text(["rev-parse", "--verify", "HEAD^{tree}"]):
        return
    message = f"Work of session {session_id}\n"
    commit = git.text(["commit-tree", "--no-gpg-sign", "-p", head, "-m", message, tree])
    git.run(["update-ref", "-m", "trellisd: the session's work", "HEAD", commit, head])


@dataclass(frozen=True)
class _Entry:
    """A path the merge changed: its mode and blob after (mode "000000": deleted)."""

    mode: str
    blob: str
    before_mode: str


def _changed(git: Git, old: str, new: str) -> dict[str, _Entry]:
    out = git.run(["diff-tree", "-r", "-z", "--no-renames", old, new])
    fields = out.split(b"\0")
    changed: dict[str, _Entry] = {}
    for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.decode().lstrip(":").split(" ")
        if len(parts) < 5:
            continue
        changed[raw.decode("utf-8", errors="surrogateescape")] = _Entry(
            parts[1], parts[3], parts[0]
        )
    return changed


def _refuse_theirs(
    git: Git, checkout: Path, changed: dict[str, _Entry], session_id: str, base: str
) -> None:
    """A ``Conflict`` naming the paths the merge changes that the user has a change of
    their own to: staged, unstaged, or a file where the merge adds one."""
    out = git.run(["status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all"])
    theirs = {e[3:].decode("utf-8", errors="surrogateescape") for e in out.split(b"\0") if e}
    clash = {p for p in changed if p in theirs}
    for p, entry in changed.items():
        if entry.before_mode == "000000" and os.path.lexists(checkout / p):
            clash.add(p)  # an ignored file the merge would overwrite
    if clash:
        paths = sorted(clash)
        raise Conflict(
            f"the checkout at {checkout} has changes of its own to {_listed(paths)}, which the"
            f" merge changes: commit or set them aside, then merge again; {base} was not moved",
            sessionId=session_id,
            paths=paths,
        )


def _write_files(git: Git, checkout: Path, changed: dict[str, _Entry]) -> None:
    """Write the paths the merge changed into the user's checkout and its index, and
    nothing else of either."""
    info = b"".join(
        (
            f"0 {_ZERO}\t{p}".encode("utf-8", errors="surrogateescape")
            if e.mode == "000000"
            else f"{e.mode} {e.blob}\t{p}".encode("utf-8", errors="surrogateescape")
        )
        + b"\0"
        for p, e in changed.items()
    )
    git.run(["update-index", "-z", "--index-info"], stdin=info)
    written = [p for p, e in changed.items() if e.mode != "000000"]
    if written:
        names = b"".join(p.encode("utf-8", errors="surrogateescape") + b"\0" for p in written)
        git.run(["checkout-index", "-f", "-u", "-z", "--stdin"], stdin=names)
    for p, e in changed.items():
        if e.mode == "000000":
            target = checkout / p
            if target.is_file() or target.is_symlink():
                target.unlink()
            _prune_empty(target.parent, checkout)


def _prune_empty(folder: Path, top: Path) -> None:
    while folder != top and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _checkout_of(path: Path) -> Path | None:
    """The user's checkout a worktree folder belongs to, from its ``.git`` file."""
    try:
        pointer = (path / ".git").read_text().strip()
    except OSError:
        return None
    if not pointer.startswith("gitdir: "):
        return None
    entry = Path(pointer[8:])  # <checkout>/.git/worktrees/<name>
    common = entry.parent.parent
    return common.parent if common.name == ".git" else None
