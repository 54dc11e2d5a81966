"""The images turns' prompts carried: their bytes in the content-addressed blobs the change
sets keep file contents in (``blobs``), each stored once whole, by SHA-256; the turn's run
names them in an ``images`` event (``{"images": [{sha256, mimeType, bytes}]}``), so the
session's log proves which bytes the model was given. A blob an image names is never
collected, and ``session/verify`` finds one that is missing or whose bytes were altered.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable
from typing import Any

import apsw

from ..records import ImageRef
from ..vocabulary import EventKind
from . import blobs

MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""The most one image may hold, as given and as a session file may carry it."""

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

NAMED_BY_IMAGES = (
    f"SELECT json_extract(i.value, '$.sha256') FROM event e, json_each(e.detail, '$.images') i"
    f" WHERE e.kind = '{EventKind.IMAGES}'"
)
"""Every blob an image of any session names (kept when unused contents are dropped)."""


def put(con: apsw.Connection, sha256: str, data: bytes) -> None:
    """Store an image's bytes whole (no delta: images share no lines) unless they are there."""
    if con.execute("SELECT 1 FROM blob WHERE sha256 = ?", (sha256,)).fetchone():
        return
    con.execute(
        "INSERT INTO blob(sha256, size, base, depth, data) VALUES (?, ?, NULL, 0, ?)",
        (sha256, len(data), zlib.compress(data, 1)),
    )


def get(con: apsw.Connection, sha256: str) -> bytes:
    """An image's bytes (``KeyError`` when the store does not hold them)."""
    return blobs.get(con, sha256)


def detail(images: Iterable[ImageRef]) -> dict[str, Any]:
    """The ``images`` event's detail."""
    return {
        "images": [{"sha256": i.sha256, "mimeType": i.mime_type, "bytes": i.bytes} for i in images]
    }


def refs(stored: str | None) -> tuple[ImageRef, ...]:
    """The images an ``images`` event's stored detail names (none for None)."""
    if stored is None:
        return ()
    found = json.loads(stored).get("images")
    if not isinstance(found, list):
        return ()
    return tuple(
        ImageRef(str(i["sha256"]), str(i["mimeType"]), int(i["bytes"]))
        for i in found
        if isinstance(i, dict) and {"sha256", "mimeType", "bytes"} <= i.keys()
    )


def of_session(
    con: apsw.Connection, session_id: str
) -> list[tuple[int | None, str, int, ImageRef]]:
    """Each image the session's turns carried: its event's log entry, the event's run and
    seq."""
    rows: list[tuple[Any, ...]] = con.execute(
        "SELECT e.run_id, e.seq, e.detail,"
        " (SELECT c.seq FROM chain c WHERE c.session_id = t.session_id AND c.kind = 'event'"
        "  AND c.ref = e.run_id || '/' || e.seq)"
        " FROM event e JOIN run r ON r.id = e.run_id JOIN turn t ON t.id = r.turn_id"
        " WHERE t.session_id = ? AND e.kind = ? ORDER BY t.rowid, e.seq",
        (session_id, EventKind.IMAGES),
    ).fetchall()
    return [
        (None if entry is None else int(entry), str(run_id), int(seq), ref)
        for run_id, seq, stored, entry in rows
        for ref in refs(stored)
    ]


def damaged(con: apsw.Connection, session_id: str) -> tuple[int | None, str, str] | None:
    """The first image of the session whose blob is missing or does not hold its bytes: its
    log entry's seq, the event's ref and why; None when every one is sound."""
    for entry, run_id, seq, ref in of_session(con, session_id):
        try:
            data = get(con, ref.sha256)
        except (KeyError, zlib.error):
            return entry, f"{run_id}/{seq}", f"the bytes of image {ref.sha256} are missing"
        if len(data) != ref.bytes or hashlib.sha256(data).hexdigest() != ref.sha256:
            return (
                entry,
                f"{run_id}/{seq}",
                f"image {ref.sha256} does not match its SHA-256 and size: it was altered",
            )
    return None


def find(con: apsw.Connection, session_id: str, sha256: str) -> ImageRef | None:
    """The image ``sha256`` if a turn of the session carried it."""
    return next((r for _, _, _, r in of_session(con, session_id) if r.sha256 == sha256), None)
