"""Each session's log anchored outside the store, so that a rewrite of the whole log is found.

The log (``chain.py``) finds a row edited by hand, but whoever can write the store can also
recompute every hash after an edit with trellisd's own code. So each time a write moves a
session's log, the store signs where it now stands, ``(store, session, seq, hash)``, with
HMAC-SHA256 under a key of the user's own, and keeps that signed head here, in the user's
config folder (``$XDG_CONFIG_HOME/trellisd``), never in the store:

    anchor.key   32 random bytes, 0600, made on first need (a folder 0700)
    anchors.db   one row a session of a store: its last signed head (0600)

A head is kept only when it is further than the one kept (two daemons of the store may
write), except when the write began the log (a session created, forked or imported: a new
log under that id); a deleted session's is dropped. ``session/verify`` then checks that the
log's entry at the signed ``seq`` has the signed hash: the hash covers every entry before it,
so a rewrite anywhere up to there is found. Someone who can write the store but not this
folder can neither sign a rewritten head nor take back a signed one. A store verified
without the key (another machine), or a session never anchored, is simply not anchored.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

import apsw

from .chain import Head

log = logging.getLogger(__name__)

KEY_FILE = "anchor.key"
DB_FILE = "anchors.db"
KEY_BYTES = 32
BUSY_TIMEOUT_MS = 5_000


@dataclass(frozen=True)
class Anchor:
    """A session's signed head; ``signed`` is False when its signature does not match."""

    seq: int
    hash: str
    signed: bool


class Anchors:
    """The signed heads of the sessions of the store at ``store``, kept in ``folder``."""

    def __init__(self, folder: Path, store: Path) -> None:
        self.folder = folder
        self.store = os.path.realpath(store)
        self._key: bytes | None = None
        self._con: apsw.Connection | None = None
        self._unusable = False  # said once; not tried again at every write

    def record(self, heads: dict[str, Head]) -> None:
        """Sign and keep each session's head (committed), further than the one kept."""
        if not heads or not self._open(create=True):
            return
        assert self._con is not None
        with self._con:
            for session_id, head in heads.items():
                mac = self._mac(session_id, head.seq, head.hash)
                values = (self.store, session_id, head.seq, head.hash, mac)
                if head.begun:
                    self._con.execute(
                        "INSERT OR REPLACE INTO anchor(store, session_id, seq, hash, mac)"
                        " VALUES (?, ?, ?, ?, ?)",
                        values,
                    )
                else:
                    self._con.execute(
                        "INSERT INTO anchor(store, session_id, seq, hash, mac)"
                        " VALUES (?, ?, ?, ?, ?) ON CONFLICT(store, session_id) DO UPDATE"
                        " SET seq = excluded.seq, hash = excluded.hash, mac = excluded.mac"
                        " WHERE excluded.seq > anchor.seq",
                        values,
                    )

    def of(self, session_id: str) -> Anchor | None:
        """The session's signed head; None without a key (never made here) or an anchor."""
        if not self._open(create=False):
            return None
        assert self._con is not None
        row = self._con.execute(
            "SELECT seq, hash, mac FROM anchor WHERE store = ? AND session_id = ?",
            (self.store, session_id),
        ).fetchone()
        if row is None:
            return None
        seq, digest, mac = int(row[0]), str(row[1]), str(row[2])
        signed = hmac.compare_digest(mac, self._mac(session_id, seq, digest))
        return Anchor(seq, digest, signed)

    def forget(self, session_id: str) -> None:
        """Drop a deleted session's signed head."""
        if not self._open(create=False):
            return
        assert self._con is not None
        with self._con:
            self._con.execute(
                "DELETE FROM anchor WHERE store = ? AND session_id = ?", (self.store, session_id)
            )

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def _mac(self, session_id: str, seq: int, digest: str) -> str:
        assert self._key is not None
        message = "\0".join((self.store, session_id, str(seq), digest)).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def _open(self, create: bool) -> bool:
        """Load the key (making it and the folder when ``create``) and open the anchors;
        whether they can be used. A key that is not the user's own (0600, owned by this
        uid, 32 bytes) is not used, and said so."""
        if self._con is not None:
            return True
        if self._unusable:
            return False
        key_path = self.folder / KEY_FILE
        try:
            if create and not key_path.exists():
                self._make_key(key_path)
            self._key = self._read_key(key_path)
            if self._key is None:
                self._unusable = True
                return False
            self._con = self._connect(self.folder / DB_FILE)
        except FileNotFoundError:
            return False
        except (OSError, apsw.Error) as exc:
            log.warning("the session logs' anchors in %s cannot be used: %s", self.folder, exc)
            self._unusable = True
            return False
        return True

    def _make_key(self, path: Path) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another daemon made it meanwhile
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, secrets.token_bytes(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)

    def _read_key(self, path: Path) -> bytes | None:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            info = os.fstat(fd)
            key = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            log.warning("%s is not private to this user (0600): the logs are not anchored", path)
            return None
        if len(key) != KEY_BYTES:
            log.warning("%s is not a key of %d bytes: the logs are not anchored", path, KEY_BYTES)
            return None
        return key

    def _connect(self, path: Path) -> apsw.Connection:
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        con = apsw.Connection(str(path))
        try:
            con.set_busy_timeout(BUSY_TIMEOUT_MS)
            con.pragma("journal_mode", "wal")
            con.pragma("synchronous", "normal")
            con.execute(
                "CREATE TABLE IF NOT EXISTS anchor (store TEXT NOT NULL, session_id TEXT NOT"
                " NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, mac TEXT NOT NULL,"
                " PRIMARY KEY (store, session_id)) STRICT"
            )
        except apsw.Error:
            con.close()
            raise
        return con
