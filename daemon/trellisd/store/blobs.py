"""Text contents stored once each, by SHA-256, compressed with zlib.

A content is stored whole, or as a line delta against another blob (the file's content
before the change that produced it) when that is smaller: 100 rewrites of a 100 KiB file
that each change a few lines cost a few hundred bytes each, not 100 compressed copies.
Deltas chain at most ``MAX_DEPTH`` deep; a content is never stored twice, across turns and
sessions.

A delta is a list of operations over the base's lines: ``c`` + two 4-byte big-endian line
numbers (copy lines ``start`` to ``end`` of the base), ``i`` + a 4-byte length + bytes
(insert).
"""

from __future__ import annotations

import difflib
import struct
import zlib

import apsw

from ..changes.content import Content, Kind

MAX_DEPTH = 32
DELTA_LIMIT_BYTES = 1024 * 1024
"""Contents larger than this are stored whole: a line diff of them costs too much time."""


def put(con: apsw.Connection, content: Content, base: str | None) -> None:
    """Store ``content`` (text only) unless it is there already; as a delta against
    ``base`` when that is smaller."""
    if content.kind != Kind.TEXT or content.data is None or content.sha256 is None:
        return
    if con.execute("SELECT 1 FROM blob WHERE sha256 = ?", (content.sha256,)).fetchone():
        return
    data = content.data
    stored, base_of, depth = zlib.compress(data, 6), None, 0
    row = None
    if base is not None and len(data) <= DELTA_LIMIT_BYTES:
        row = con.execute("SELECT depth, size FROM blob WHERE sha256 = ?", (base,)).fetchone()
    if row is not None and int(row[0]) < MAX_DEPTH and int(row[1]) <= DELTA_LIMIT_BYTES:
        delta = zlib.compress(_delta(get(con, base or ""), data), 6)
        if len(delta) < len(stored):
            stored, base_of, depth = delta, base, int(row[0]) + 1
    con.execute(
        "INSERT INTO blob(sha256, size, base, depth, data) VALUES (?, ?, ?, ?, ?)",
        (content.sha256, len(data), base_of, depth, stored),
    )


def get(con: apsw.Connection, sha256: str) -> bytes:
    """The bytes of a stored content (``KeyError`` if it is not stored)."""
    chain: list[bytes] = []
    key: str | None = sha256
    while key is not None:
        row = con.execute("SELECT base, data FROM blob WHERE sha256 = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        chain.append(zlib.decompress(row[1]))
        key = row[0]
    data = chain.pop()
    while chain:
        data = _apply(data, chain.pop())
    return data


def _delta(base: bytes, data: bytes) -> bytes:
    old, new = base.splitlines(keepends=True), data.splitlines(keepends=True)
    out = bytearray()
    matcher = difflib.SequenceMatcher(None, old, new)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out += b"c" + struct.pack(">II", i1, i2)
        elif j2 > j1:
            piece = b"".join(new[j1:j2])
            out += b"i" + struct.pack(">I", len(piece)) + piece
    return bytes(out)


def _apply(base: bytes, delta: bytes) -> bytes:
    old = base.splitlines(keepends=True)
    out = bytearray()
    at = 0
    while at < len(delta):
        op = delta[at : at + 1]
        if op == b"c":
            start, end = struct.unpack_from(">II", delta, at + 1)
            out += b"".join(old[start:end])
            at += 9
        else:
            (length,) = struct.unpack_from(">I", delta, at + 1)
            out += delta[at + 5 : at + 5 + length]
            at += 5 + length
    return bytes(out)
