"""The one SQLite file: connection, migrations and transactions.

The store is private to its user: the folders it creates are 0700 and the database with its
``-wal`` and ``-shm`` files 0600, whatever the umask (SQLite gives the journal files the
database's mode). A folder that already existed keeps its mode.

Every connection is WAL with foreign keys (``apsw.bestpractice``) and waits for another
process's lock from its first statement, so daemons started together on a new store take
turns creating and migrating it. Writes take the write lock up front (``BEGIN IMMEDIATE``) so
that a second process on the same file waits its turn instead of failing with
``SQLITE_BUSY``; reads never wait on a writer.

A store this process cannot write opens read-only: reads are served and ``write`` refuses.
That is a file it cannot write, or one in a folder it cannot write (no ``-wal`` or ``-shm``
can be made there, so nothing can write the store: it is read as immutable), or a newer
trellisd's store within its compatibility level. Nothing is written to a store only read:
not its header, not the statistics ``PRAGMA optimize`` keeps.
SQLite errors become ``StoreError`` (-32040) at this boundary: a full disk, a read-only file,
a lock that never frees.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import apsw
import apsw.bestpractice

from ..build import build
from ..errors import StoreError
from . import costs, migrations
from .migrations import MIGRATIONS

log = logging.getLogger(__name__)

apsw.bestpractice.library_logging()
_CONNECTION_PRACTICES = [
    f
    for f in apsw.bestpractice.recommended
    if f.__name__.startswith("connection_") and f is not apsw.bestpractice.connection_busy_timeout
]  # the store waits for a lock with its own busy handler, longer than the practice's 100 ms
_WRITING_PRACTICES = (apsw.bestpractice.connection_wal, apsw.bestpractice.connection_optimize)

MEMORY = ":memory:"  # ``--db :memory:``: a store in this process's memory, gone when it ends
BUSY_TIMEOUT_MS = 5_000
BUSY_RETRIES = 12
VERSION = build()  # this build's name, recorded in the store as the build that wrote it


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class Database:
    """A connection to the store, safe to share between threads (calls are serialised)."""

    def __init__(self, path: str | Path) -> None:
        # ``:memory:``, or a path ending in it: what the shared daemon is handed for
        # ``--db :memory:`` (the store's path made absolute names its daemon).
        self.in_memory = Path(path).name == MEMORY
        self.path = Path(MEMORY) if self.in_memory else Path(path).expanduser()
        try:
            if not self.in_memory:
                _private_folder(self.path.parent)
                _private_file(self.path)
            self.con = _connect(self.path)
        except (OSError, apsw.Error) as exc:
            raise StoreError(
                f"cannot open the store at {self.path}: {exc}", path=str(self.path)
            ) from exc
        self.read_only = self.con.readonly("main")
        if self.read_only:
            log.warning("the store at %s is read-only: serving reads only", self.path)
        self.newer: StoreError | None = None  # a newer trellisd's store, read but not written
        self._lock = threading.RLock()
        self._busy_since = 0.0
        try:
            self.con.set_busy_handler(self._busy)
            self._prepare()
        except apsw.Error as exc:
            self.con.close()
            raise _translate(exc, self.path) from exc
        except StoreError:
            self.con.close()
            raise
        # The daemon's own folder, beside the store (its snapshots of workspaces); for a store
        # in memory, a private temporary one removed on close.
        self.folder = self.path.parent
        if self.in_memory:
            self.folder = Path(tempfile.mkdtemp(prefix="trellisd-"))

    def close(self) -> None:
        with self._lock:
            self.con.close()
            if self.in_memory:
                shutil.rmtree(self.folder, ignore_errors=True)

    def _prepare(self) -> None:
        """Check, set up and migrate the file. Daemons started together on a new store
        take turns: one waits (and retries) while another creates or migrates it."""
        for attempt in range(BUSY_RETRIES):
            try:
                self._refuse_schema()
                if self.read_only:
                    # Nothing of a store only read is written, not even its header or the
                    # statistics ``PRAGMA optimize`` would keep in it.
                    self.con.pragma("query_only", True)
                # apsw's best practice (WAL, foreign keys, ...), applied once the file is
                # known to be ours; to a store only read, only those that write nothing.
                for practice in _CONNECTION_PRACTICES:
                    if not self.read_only or practice not in _WRITING_PRACTICES:
                        practice(self.con)
                if not self.read_only:
                    self._migrate()
                return
            except apsw.BusyError:
                log.info("the store at %s is locked while it is set up; retrying", self.path)
                time.sleep(min(0.05 * 2**attempt, 1.0))
        raise _locked(self.path)

    def _busy(self, attempts: int) -> bool:
        """SQLite's busy handler: wait up to ``BUSY_TIMEOUT_MS`` for another process's lock."""
        if attempts == 0:
            self._busy_since = time.monotonic()
            log.info("the store at %s is locked by another process; waiting", self.path)
        if time.monotonic() - self._busy_since > BUSY_TIMEOUT_MS / 1000:
            return False
        time.sleep(min(0.001 * 2**attempts, 0.05))
        return True

    def _refuse_schema(self) -> None:
        """Refuse a newer trellisd's store (left untouched) unless its compatibility level
        lets this build read it (then it is only read), and a read-only store at an older
        schema (it cannot be migrated). A refusal names the build that wrote the store and
        this one."""
        version, known = self.con.pragma("user_version"), len(MIGRATIONS)
        if version == known or (version < known and not self.read_only):
            return
        info = self._info()
        writer = info.get("written_by")
        try:
            oldest: int | None = int(info["readable_from"])
        except (KeyError, ValueError):
            oldest = None  # written before stores recorded their compatibility level
        facts: dict[str, object] = {
            "path": str(self.path),
            "schemaVersion": version,
            "knownVersion": known,
            "build": VERSION,
            **({"writtenBy": writer} if writer else {}),
            **({"readableFrom": oldest} if oldest is not None else {}),
        }
        if version < known:
            raise StoreError(
                f"the store at {self.path} is read-only and was written by an older trellisd"
                f" ({_named(writer)}schema {version}); it cannot be upgraded by this trellisd"
                f" {VERSION} (schema {known})",
                readOnly=True,
                **facts,
            )
        if oldest is not None and oldest <= known:
            self.newer = StoreError(
                f"the store at {self.path} was written by trellisd {writer or 'of a newer build'}"
                f" (schema {version}); this trellisd {VERSION} (schema {known}) can read it but"
                " not write it",
                readOnly=True,
                **facts,
            )
            self.read_only = True
            log.warning("%s", self.newer.message)
            return
        level = "" if oldest is None else f"; readable from schema {oldest}"
        raise StoreError(
            f"the store at {self.path} was written by a newer trellisd ({_named(writer)}schema"
            f" {version}{level}); this trellisd {VERSION} reads schemas up to {known}; it was"
            " left untouched",
            **({"readOnly": True} if self.read_only else {}),
            **facts,
        )

    def _info(self) -> dict[str, str]:
        """What the store says of itself (``store_info``); nothing for a store written before
        it did."""
        try:
            return {
                str(k): str(v) for k, v in self.con.execute("SELECT key, value FROM store_info")
            }
        except apsw.SQLError:
            return {}

    def _migrate(self) -> None:
        with self.write():
            self._refuse_schema()
            version, known = self.con.pragma("user_version"), len(MIGRATIONS)
            for number in range(version, known):
                log.info("migrating %s to schema %d", self.path, number + 1)
                step = MIGRATIONS[number]
                if callable(step):
                    step(self.con)
                else:
                    self.con.execute(step)
                self.con.pragma("user_version", number + 1)
            if version < migrations.COSTED <= known:
                costs.fill(self.con)
            self._record_level()

    def _record_level(self) -> None:
        """Inside the migration: record the oldest schema able to read the store and this
        build as its writer (once the schema has ``store_info``), when they are not recorded
        already: a store another build of this schema wrote names this one from now on."""
        has_info = self.con.execute(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'store_info'"
        ).fetchone()
        if has_info is None:
            return
        held = self._info()
        wanted = {"readable_from": str(migrations.OLDEST_READER), "written_by": VERSION}
        changed = [(k, v) for k, v in wanted.items() if held.get(k) != v]
        if changed:
            self.con.executemany(
                "INSERT OR REPLACE INTO store_info(key, value) VALUES (?, ?)", changed
            )

    @contextlib.contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """One write transaction, holding the file's write lock from its first statement."""
        if self.newer is not None:
            raise self.newer
        if self.read_only:
            raise StoreError(
                f"the store at {self.path} is read-only: it serves reads, but nothing can be"
                " written to it",
                path=str(self.path),
                readOnly=True,
            )
        with self._lock:
            self._begin_immediate()
            try:
                yield self.con
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, apsw.Error):
                    raise _translate(exc, self.path) from exc
                raise
            try:
                self.con.execute("COMMIT")
            except apsw.Error as exc:
                self._rollback()
                raise _translate(exc, self.path) from exc

    def _rollback(self) -> None:
        """Undo the open transaction; SQLite has already undone it after some errors
        (a full disk, say), and then there is nothing left to undo."""
        if self.con.in_transaction:
            self.con.execute("ROLLBACK")

    @contextlib.contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot for several reads."""
        with self._lock:
            self.con.execute("BEGIN")
            try:
                yield self.con
            except apsw.Error as exc:
                raise _translate(exc, self.path) from exc
            finally:
                if self.con.in_transaction:
                    self.con.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot on a connection of its own, for a long read (an export)
        that must not hold up this connection's other work. Writers go on meanwhile (WAL).
        A store in memory has one connection: its snapshot is a read on it."""
        if self.in_memory:
            with self.read() as con:
                yield con
            return
        try:
            con = _connect(self.path)
        except apsw.Error as exc:
            raise _translate(exc, self.path) from exc
        try:
            con.set_busy_timeout(BUSY_TIMEOUT_MS)
            con.execute("BEGIN")
            yield con
        except apsw.Error as exc:
            raise _translate(exc, self.path) from exc
        finally:
            con.close()

    def _begin_immediate(self) -> None:
        for attempt in range(BUSY_RETRIES):
            try:
                self.con.execute("BEGIN IMMEDIATE")
                return
            except apsw.BusyError:
                log.warning("store is busy; waiting (attempt %d)", attempt + 1)
                time.sleep(min(0.05 * 2**attempt, 1.0))
            except apsw.Error as exc:
                raise _translate(exc, self.path) from exc
        raise _locked(self.path)


def _connect(path: Path) -> apsw.Connection:
    """Open the file for reading and writing, or for reading only when this process cannot
    write it. A WAL file whose ``-wal`` and ``-shm`` files cannot be made (a folder this
    process cannot write, whether or not it can write the file) can have no writer, so it is
    read as immutable: read-only, with no lock and no file beside it."""
    con = apsw.Connection(str(path))
    con.set_busy_timeout(BUSY_TIMEOUT_MS)
    try:
        con.pragma("user_version")  # the first read opens the WAL index, if it can
        return con
    except apsw.BusyError:
        return con  # another process is setting the store up: ``_prepare`` takes turns
    except (apsw.CantOpenError, apsw.ReadOnlyError):
        con.close()
    return apsw.Connection(
        f"file:{urllib.parse.quote(str(path))}?immutable=1",
        flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI,
    )


def _private_folder(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each 0700; existing ones are left alone."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another daemon made it first
        created.chmod(0o700)


def _private_file(path: Path) -> None:
    """Create the database file 0600, or take group and other access from our own store."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for existing in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            with contextlib.suppress(OSError):  # gone, not ours, or on a read-only disk
                info = existing.stat()
                if info.st_uid == os.geteuid() and info.st_mode & 0o077:
                    existing.chmod(stat.S_IMODE(info.st_mode) & 0o700)
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _named(writer: str | None) -> str:
    return f"{writer}, " if writer else ""


def _locked(path: Path) -> StoreError:
    return StoreError(f"the store at {path} stayed locked by another process", path=str(path))


def _translate(exc: apsw.Error, path: Path) -> StoreError:
    if isinstance(exc, apsw.BusyError):
        return _locked(path)
    if isinstance(exc, apsw.FullError):
        return StoreError(f"the disk holding {path} is full; nothing was written", path=str(path))
    if isinstance(exc, apsw.ReadOnlyError):
        return StoreError(f"the store at {path} is read-only", path=str(path))
    return StoreError(f"the store at {path} failed: {exc}", path=str(path))
