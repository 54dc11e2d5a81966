"""What a command changed in a git work tree, seen with git plumbing and nothing of the user's.

Before and after each command the work tree under the session root is written as a tree
object (``git add -A`` then ``git write-tree``) into a private index: ``GIT_INDEX_FILE`` is a
file in the daemon's own folder, first copied from the user's index so that git's stat cache
spares rehashing every file. The latest tree is kept reachable by a private ref,
``refs/trellisd/<session>``, written without a reflog. The user's index, HEAD, branches,
stash and reflogs are never written; ``git status`` reads the same before and after.

The repository is the model's to write, so git is run as a program whose configuration may
be hostile: argv only, no shell; hooks off (``core.hooksPath=/dev/null``), no fsmonitor, no
pager, no external diff or textconv, every clean/smudge/process filter named in any
configuration emptied (git runs none), no system configuration, no prompts. Blobs are read
a chunk at a time, so a large file never sits in memory whole.

Content is what git stores: ``.gitattributes`` line-ending conversions apply. Ignored files
(``.gitignore``) are not in the snapshots, so what commands do to them is not recorded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .content import ABSENT, CHUNK_BYTES, Content

log = logging.getLogger(__name__)

_SAFE = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.autocrlf=false",
    "core.logAllRefUpdates=false",
    "core.pager=cat",
    "diff.external=",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
)
_REGULAR = ("100644", "100755")
TIMEOUT_SECONDS = 120.0


class GitError(Exception):
    """A git command failed; the change set of the command is then not recorded."""


@dataclass(frozen=True)
class Change:
    """A file a command changed: its path relative to the session root, its blobs before
    and after (None: absent, or not a regular file)."""

    path: str
    before: str | None
    after: str | None


class GitTree:
    """The git work tree that a session root is in, seen through a private index."""

    def __init__(self, root: Path, git_dir: Path, prefix: str, index: Path, ref: str) -> None:
        self.root, self.git_dir, self.prefix, self.index, self.ref = (
            root,
            git_dir,
            prefix,
            index,
            ref,
        )
        self._neutral: tuple[str, ...] = ()
        """The filter drivers emptied, as the configuration named them at the last snapshot
        (``write-tree`` runs filters too, on entries whose stat data is stale)."""
        self._filters = _Filters(root, git_dir)
        self._tree: str | None = None
        """The tree the private index holds, when the last snapshot wrote it whole."""
        self._kept: str | None = None
        """The tree the private ref was last pointed at."""

    @classmethod
    def find(cls, root: Path, state_dir: Path, session_id: str) -> GitTree | None:
        """The work tree ``root`` is in, or None outside git (or without a usable git)."""
        if shutil.which("git") is None:
            return None
        try:
            out = _run(
                root,
                _environment(None),
                ["rev-parse", "--is-inside-work-tree", "--absolute-git-dir", "--show-prefix"],
            )
        except GitError:
            return None
        lines = out.decode("utf-8", errors="surrogateescape").split("\n")
        if len(lines) < 3 or lines[0] != "true":
            return None
        git_dir, prefix = Path(lines[1]), lines[2]
        key = hashlib.sha256(f"{git_dir}\0{session_id}".encode()).hexdigest()[:24]
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        index = state_dir / f"{key}.index"
        return cls(root, git_dir, prefix, index, f"refs/trellisd/{session_id}")

    def snapshot(self, keep: bool = False) -> str:
        """The work tree under the session root now, as a tree object's id; ``keep`` points
        the private ref at it, so that no ``git gc`` prunes it while a command runs."""
        if not self.index.exists():
            self._tree = None
            if (self.git_dir / "index").is_file():
                shutil.copyfile(self.git_dir / "index", self.index)
        self._neutral = self._filters.drivers(_environment(self.index))
        tree, self._tree = self._tree, None
        # ``-v`` names each path staged or removed: none, and the index holds the tree the
        # last snapshot wrote, so ``write-tree`` is spared.
        staged = self._git(["add", "-A", "-v", "--ignore-errors", "--", "."])
        if tree is None or staged.strip():
            tree = self._git(["write-tree"]).decode().strip()
        if keep and tree != self._kept:
            self._kept = None
            self._git(["update-ref", "--no-deref", self.ref, tree])
            self._kept = tree
        self._tree = tree
        return tree

    def changes(self, before: str, after: str) -> list[Change]:
        """The regular files under the session root that differ between two snapshots."""
        if before == after:
            return []
        out = self._git(
            ["diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", before, after, "--", "."]
        )
        fields = out.split(b"\0")
        found: list[Change] = []
        for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
            parts = meta.decode().lstrip(":").split(" ")
            if len(parts) < 5:
                continue
            old_mode, new_mode, old, new = parts[:4]
            path = raw.decode("utf-8", errors="surrogateescape")
            if self.prefix and path.startswith(self.prefix):
                path = path[len(self.prefix) :]
            was = old if old_mode in _REGULAR else None
            now = new if new_mode in _REGULAR else None
            if was != now:
                found.append(Change(path, was, now))
        return found

    def contents(self, changes: list[Change]) -> list[tuple[str, Content, Content]]:
        """Each change's path with its contents before and after, read by one
        ``git cat-file --batch``, a chunk at a time."""
        if not changes:
            return []
        with subprocess.Popen(
            ["git", *_options(self._neutral), "cat-file", "--batch"],
            cwd=self.root,
            env=_environment(self.index),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            reader = _BlobReader(process.stdin, process.stdout)
            try:
                return [(c.path, reader.read(c.before), reader.read(c.after)) for c in changes]
            finally:
                process.stdin.close()

    def _git(self, args: list[str]) -> bytes:
        return _run(self.root, _environment(self.index), args, self._neutral)


class _BlobReader:
    """Blobs asked of a running ``git cat-file --batch``, one at a time."""

    def __init__(self, ask: IO[bytes], answers: IO[bytes]) -> None:
        self.ask, self.answers = ask, answers

    def read(self, blob: str | None) -> Content:
        if blob is None:
            return ABSENT
        self.ask.write(blob.encode() + b"\n")
        self.ask.flush()
        header = self.answers.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise GitError(f"git could not read the blob {blob}")
        left = int(header[2])

        def chunks() -> Iterator[bytes]:
            nonlocal left
            while left > 0:
                chunk = self.answers.read(min(CHUNK_BYTES, left))
                if not chunk:
                    raise GitError(f"git stopped in the middle of the blob {blob}")
                left -= len(chunk)
                yield chunk

        content = Content.read(chunks())
        self.answers.read(1)  # the newline after the blob
        return content


def _options(extra: tuple[str, ...] = ()) -> list[str]:
    out: list[str] = ["--no-pager"]
    for option in (*_SAFE, *extra):
        out += ["-c", option]
    return out


class _Filters:
    """Every filter driver any configuration names, emptied: git then runs none of them.

    Git is asked again whenever a configuration file it read, or one it would read, has
    changed since (its inode, size, mtime or ctime), and always while any of them includes
    another: an included file may not exist yet when it is first asked."""

    def __init__(self, root: Path, git_dir: Path) -> None:
        self.root, self.git_dir = root, git_dir
        self._seen: tuple[tuple[str, tuple[int, ...] | None], ...] | None = None
        self._drivers: tuple[str, ...] = ()

    def drivers(self, env: dict[str, str]) -> tuple[str, ...]:
        if self._seen is not None and self._seen == self._look([p for p, _ in self._seen]):
            return self._drivers
        self._seen = None
        try:
            out = _run(self.root, env, ["config", "--list", "--name-only", "--show-origin", "-z"])
        except GitError:
            return ()
        fields = out.split(b"\0")
        origins, names = fields[0:-1:2], fields[1::2]
        keys = [name.decode(errors="replace").lower() for name in names]
        drivers = sorted({k.rsplit(".", 1)[0] for k in keys if k.startswith("filter.")})
        self._drivers = tuple(
            f"{driver}.{key}=" for driver in drivers for key in ("clean", "smudge", "process")
        )
        if not any(k.startswith(("include.", "includeif.")) for k in keys):
            files = {
                origin[5:].decode(errors="surrogateescape")
                for origin in origins
                if origin.startswith(b"file:")
            }
            self._seen = self._look(self._paths(files))
        return self._drivers

    def _paths(self, read: Iterable[str]) -> list[str]:
        home = Path(os.environ.get("HOME", "~")).expanduser()
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        common = self.git_dir / "commondir"
        shared = self.git_dir / common.read_text().strip() if common.is_file() else self.git_dir
        wanted = {str(home / ".gitconfig"), str(xdg / "git" / "config")}
        for folder in {self.git_dir, shared}:
            wanted |= {str(folder / "config"), str(folder / "config.worktree")}
        for path in read:
            wanted.add(path if os.path.isabs(path) else str(self.root / path))
        return sorted(wanted)

    @staticmethod
    def _look(paths: list[str]) -> tuple[tuple[str, tuple[int, ...] | None], ...]:
        def stat(path: str) -> tuple[int, ...] | None:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

        return tuple((path, stat(path)) for path in paths)


def _environment(index: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_AUTHOR_NAME="trellisd",
        GIT_AUTHOR_EMAIL="trellisd@localhost",
        GIT_COMMITTER_NAME="trellisd",
        GIT_COMMITTER_EMAIL="trellisd@localhost",
        LC_ALL="C",
    )
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def _run(root: Path, env: dict[str, str], args: list[str], extra: tuple[str, ...] = ()) -> bytes:
    try:
        done = subprocess.run(
            ["git", *_options(extra), *args],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]} could not run: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
    return done.stdout
