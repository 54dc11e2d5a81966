"""What a command changed in a git work tree, seen with git plumbing and nothing of the user's.

Before and after each command the work tree under the session root is written as a tree
object (``git add -A`` then ``git write-tree``) by a private repository in the daemon's own
folder: ``GIT_DIR`` is that repository, ``GIT_WORK_TREE`` the user's work tree, and the
user's object store its alternate (``objects/info/alternates``), so what is committed already
is not stored twice and what the snapshots add (the blobs of untracked and changed files,
the trees) lands in the daemon's folder only. Its index is first copied from the user's, so
that git's stat cache spares rehashing every file. Nothing is written in the user's ``.git``:
no object, no ref, no index, no reflog; ``git status`` reads the same before and after. Refs
``refs/trellisd/*`` that earlier versions kept in the user's repository are deleted.

The repository is the model's to write, so git is run as a program whose configuration may
be hostile. It is found once, by an absolute path, in the absolute entries of ``PATH`` (an
empty or relative entry would name the repository's own files); argv only, no shell. The
snapshots read no configuration but the private repository's own (no system or global
configuration, nothing of the user's ``.git/config`` or what it includes), so no filter
driver, fsmonitor, hook, pager or external diff a configuration names can run, whatever its
name; hooks are off besides (``core.hooksPath=/dev/null``). Of the user's configuration only
settings that say how to read the work tree are taken over, once, when the tree is first
found (``KEPT_SETTINGS``: file modes, symlinks, case, the excludes file); the private
repository's ``info/exclude`` is a link to the user's. Blobs are read a chunk at a time, so a
large file never sits in memory whole.

Content is what git stores: ``.gitattributes`` line-ending conversions apply. Ignored files
(``.gitignore``, ``info/exclude``, the excludes file) are not in the snapshots, so what
commands do to them is not recorded.

The private repository holds only what the last snapshots need: when it has grown past
``MAX_PRIVATE_BYTES`` it is emptied before a command starts (its index then copied from the
user's again), and one left unused for ``IDLE_DAYS`` is removed.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
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
KEPT_SETTINGS = frozenset(
    {
        "core.filemode",
        "core.symlinks",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.trustctime",
        "core.checkstat",
        "core.excludesfile",
    }
)
"""The user's settings the snapshots keep: how git reads the work tree's files and which it
ignores. None of them names a program."""
_REGULAR = ("100644", "100755")
TIMEOUT_SECONDS = 120.0
MAX_PRIVATE_BYTES = 256 * 1024 * 1024
TIDY_EVERY = 32
"""The private repository's size is looked at before the first command and every 32nd."""
IDLE_DAYS = 30


class GitError(Exception):
    """A git command failed; the change set of the command is then not recorded."""


@dataclass(frozen=True)
class Change:
    """A file a command changed: its path relative to the session root, its blobs before
    and after (None: absent, or not a regular file)."""

    path: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class _Place:
    """Where a session's snapshots are taken: the user's work tree, and the private
    repository in the daemon's folder that takes them."""

    program: str
    root: Path
    top: Path
    user_index: Path
    objects: Path
    excludes: Path
    object_format: str
    private: Path
    prefix: str
    settings: tuple[str, ...]


class GitTree:
    """The git work tree that a session root is in, seen through a private repository."""

    def __init__(self, place: _Place, environment: Mapping[str, str]) -> None:
        self.place = place
        self.root, self.prefix = place.root, place.prefix
        self.index = place.private / "index"
        self._env = _environment(environment, place.private, place.top)
        self._starts = 0
        self._tree: str | None = None
        """The tree the private index holds, when the last snapshot wrote it whole."""

    @classmethod
    def find(
        cls, root: Path, state_dir: Path, session_id: str, environment: Mapping[str, str]
    ) -> GitTree | None:
        """The work tree ``root`` is in, or None outside git (or without a usable git).
        ``environment``: the daemon's, which git runs in (less its ``GIT_*`` variables), and
        whose ``PATH`` it is looked for on."""
        program = git_program(environment.get("PATH", os.defpath))
        if program is None:
            return None
        env = _environment(environment)
        try:
            out = _run(
                program,
                root,
                env,
                [
                    "rev-parse",
                    "--path-format=absolute",
                    "--is-inside-work-tree",
                    "--show-toplevel",
                    "--git-dir",
                    "--git-common-dir",
                    "--show-object-format",
                    "--show-prefix",
                ],
            )
            settings = _kept(_run(program, root, env, ["config", "--null", "--list"]))
        except GitError:
            return None
        lines = out.decode("utf-8", errors="surrogateescape").split("\n")
        if len(lines) < 6 or lines[0] != "true":
            return None
        top, git_dir, common, object_format, prefix = (
            Path(lines[1]),
            Path(lines[2]),
            Path(lines[3]),
            lines[4],
            lines[5],
        )
        key = hashlib.sha256(f"{git_dir}\0{session_id}".encode()).hexdigest()[:24]
        place = _Place(
            program,
            root,
            top,
            git_dir / "index",
            common / "objects",
            common / "info" / "exclude",
            object_format,
            state_dir / key,
            prefix,
            settings,
        )
        try:
            state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            _forget_idle(state_dir, place.private)
            _prepare(place)
        except OSError as exc:
            log.warning("no private repository for snapshots in %s: %s", state_dir, exc)
            return None
        _drop_old_refs(program, root, env)
        return cls(place, environment)

    def snapshot(self, start: bool = False) -> str:
        """The work tree under the session root now, as a tree object's id. ``start``: a
        command is about to run, and no tree an earlier snapshot gave is needed any more."""
        if start:
            self._tidy()
        primed = False
        if not self.index.exists():
            self._tree = None
            primed = self._prime()
        tree, self._tree = self._tree, None
        add = ["add", "-A", "-v", "--ignore-errors", "--", "."]
        try:
            staged = self._git(add)
        except GitError:
            if not primed:
                raise
            # The user's index could not be read here (a split index keeps its entries
            # in the user's folder): the snapshot starts from an empty one.
            self.index.unlink(missing_ok=True)
            staged = self._git(add)
        # ``-v`` names each path staged or removed: none, and the index holds the tree the
        # last snapshot wrote, so ``write-tree`` is spared.
        if tree is None or staged.strip():
            tree = self._git(["write-tree"]).decode().strip()
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
            [self.place.program, *_options(self.place.settings), "cat-file", "--batch"],
            cwd=self.root,
            env=self._env,
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

    def _prime(self) -> bool:
        """Start the private index from a copy of the user's: its stat data spares
        rehashing the files that did not change."""
        try:
            shutil.copyfile(self.place.user_index, self.index)
        except OSError:
            return False
        return True

    def _tidy(self) -> None:
        """Empty the private repository when it has grown past ``MAX_PRIVATE_BYTES``."""
        self._starts += 1
        if (self._starts - 1) % TIDY_EVERY:
            return
        out = self._git(["count-objects", "-v"]).decode(errors="replace")
        figures = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        kib = sum(int(figures.get(k, "0")) for k in ("size", "size-pack", "size-garbage"))
        if kib * 1024 <= MAX_PRIVATE_BYTES:
            return
        log.info("emptying %s: its snapshots hold %d KiB", self.place.private, kib)
        shutil.rmtree(self.place.private / "objects", ignore_errors=True)
        self.index.unlink(missing_ok=True)
        self._tree = None
        _prepare(self.place)

    def _git(self, args: list[str]) -> bytes:
        return _run(self.place.program, self.root, self._env, args, self.place.settings)


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


@functools.lru_cache(maxsize=4)
def git_program(search: str) -> str | None:
    """The absolute path of ``git`` in the absolute entries of ``search`` (a ``PATH``),
    looked for once."""
    for folder in _absolute(search):
        candidate = os.path.join(folder, "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _absolute(search: str) -> list[str]:
    return [folder for folder in search.split(os.pathsep) if os.path.isabs(folder)]


def _kept(listed: bytes) -> tuple[str, ...]:
    """``KEPT_SETTINGS`` from ``git config --null --list``, as ``-c`` options."""
    kept: dict[str, str] = {}
    for entry in listed.split(b"\0"):
        key, _, value = entry.decode("utf-8", errors="surrogateescape").partition("\n")
        if key.lower() in KEPT_SETTINGS:
            kept[key.lower()] = value
    return tuple(f"{key}={value}" for key, value in sorted(kept.items()))


def _prepare(place: _Place) -> None:
    """The private repository, made or mended: its own configuration, the user's object
    store as its alternate, the user's ``info/exclude`` linked."""
    private = place.private
    for folder in ("", "refs", "objects", "objects/info", "info"):
        (private / folder).mkdir(mode=0o700, exist_ok=True)
    sha256 = place.object_format == "sha256"
    config = f"[core]\n\trepositoryformatversion = {1 if sha256 else 0}\n\tbare = false\n"
    if sha256:
        config += "[extensions]\n\tobjectformat = sha256\n"
    _write(private / "config", config)
    _write(private / "HEAD", "ref: refs/heads/snapshots\n")
    _write(private / "objects" / "info" / "alternates", f"{place.objects}\n")
    exclude = private / "info" / "exclude"
    if not exclude.is_symlink() or os.readlink(exclude) != str(place.excludes):
        exclude.unlink(missing_ok=True)
        exclude.symlink_to(place.excludes)
    os.utime(private)


def _write(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def _forget_idle(state_dir: Path, keep: Path) -> None:
    """Remove the private repositories left unused for ``IDLE_DAYS``, and the private
    indexes earlier versions kept beside them."""
    idle = time.time() - IDLE_DAYS * 86400
    for entry in state_dir.iterdir():
        if entry.suffix == ".index" and entry.is_file():
            entry.unlink(missing_ok=True)
        elif entry != keep and entry.is_dir() and not entry.is_symlink():
            used = max(
                (p.stat().st_mtime for p in (entry, entry / "index") if p.exists()), default=0.0
            )
            if used < idle:
                shutil.rmtree(entry, ignore_errors=True)


def _drop_old_refs(program: str, root: Path, env: dict[str, str]) -> None:
    """Delete the ``refs/trellisd/*`` that earlier versions kept in the user's repository:
    they held trees of untracked files, which a ``git clone --mirror`` would take along."""
    try:
        refs = _run(program, root, env, ["for-each-ref", "--format=%(refname)", "refs/trellisd/"])
        if refs.strip():
            orders = b"".join(b"delete " + ref + b"\n" for ref in refs.split(b"\n") if ref)
            _run(program, root, env, ["update-ref", "--no-deref", "--stdin"], orders=orders)
    except GitError as exc:
        log.warning("could not delete the refs/trellisd/* of %s: %s", root, exc)


def _options(extra: tuple[str, ...] = ()) -> list[str]:
    out: list[str] = ["--no-pager"]
    for option in (*_SAFE, *extra):
        out += ["-c", option]
    return out


def _environment(
    daemon: Mapping[str, str], private: Path | None = None, work_tree: Path | None = None
) -> dict[str, str]:
    """The environment git runs in: no ``GIT_*`` variable of the ``daemon``'s, ``PATH``
    without relative entries; with ``private``, no configuration but the private
    repository's."""
    env = {k: v for k, v in daemon.items() if not k.startswith("GIT_")}
    env["PATH"] = os.pathsep.join(_absolute(env.get("PATH", os.defpath)))
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
    if private is not None and work_tree is not None:
        env.update(GIT_DIR=str(private), GIT_WORK_TREE=str(work_tree), GIT_CONFIG_GLOBAL=os.devnull)
    return env


def _run(
    program: str,
    root: Path,
    env: dict[str, str],
    args: list[str],
    extra: tuple[str, ...] = (),
    orders: bytes | None = None,
) -> bytes:
    try:
        done = subprocess.run(
            [program, *_options(extra), *args],
            cwd=root,
            env=env,
            input=orders,
            stdin=subprocess.DEVNULL if orders is None else None,
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
