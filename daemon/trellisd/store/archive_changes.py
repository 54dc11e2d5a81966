"""Change sets in session files (``archive``): each run's ``change`` records, and a ``blob``
record for each text content they name, once per file, right after the first change that
names it; and a ``blob`` record for each image an ``images`` event names, right after the
first such event (``store.images``).

A ``change`` record is the store's row (``changes``) under its camelCase names; its
``changeId`` is the number the log's ``change`` entries name in the store it came from. A
``blob`` record is ``{sha256, size, data}``: ``data`` the content's bytes compressed with
zlib, in base64. Reading checks every content against its SHA-256 and size before it is
stored, decompressing no more than the size it says (at most ``MAX_STORED_BYTES``), and
stores it as the store stores any content: once, as a delta against the content before it
where that is smaller (an image: whole, checked against its SHA-256 and size). A file whose
changes or images name a content it does not hold is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zlib
from pathlib import PurePosixPath
from typing import Any

import apsw
import attrs

from ..changes.content import MAX_STORED_BYTES, Content, Kind
from ..convert import Invalid
from . import blobs, images
from .changes import SOURCES
from .images import IMAGE_TYPES, MAX_IMAGE_BYTES

_SHA256 = re.compile(r"[0-9a-f]{64}")
_KINDS = tuple(Kind)


class Unfit(Exception):
    """A record the file cannot hold: ``check`` as the import names it, and why."""

    def __init__(self, check: str, problem: str) -> None:
        super().__init__(problem)
        self.check, self.problem = check, problem


def _source(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in SOURCES:
        raise Invalid.of(attribute, f"must be one of {', '.join(SOURCES)}")


def _kind(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in _KINDS:
        raise Invalid.of(attribute, f"must be one of {', '.join(_KINDS)}")


def _path(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    parts = PurePosixPath(value).parts
    if not parts or value.startswith("/") or ".." in parts or "\0" in value:
        raise Invalid.of(attribute, "must be a path inside the session's folder")


def _digest(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and not _SHA256.fullmatch(value):
        raise Invalid.of(attribute, "must be 64 lowercase hex digits")


def _size(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 0:
        raise Invalid.of(attribute, "must not be negative")


@attrs.frozen
class ChangeRecord:
    change_id: int
    run_id: str
    path: str = attrs.field(validator=_path)
    source: str = attrs.field(validator=_source)
    before_kind: str = attrs.field(validator=_kind)
    before_size: int = attrs.field(validator=_size)
    after_kind: str = attrs.field(validator=_kind)
    after_size: int = attrs.field(validator=_size)
    created_at: str
    step: int | None = None
    before_sha256: str | None = attrs.field(default=None, validator=_digest)
    after_sha256: str | None = attrs.field(default=None, validator=_digest)

    def sides(self) -> tuple[Content, Content]:
        return (
            Content(Kind(self.before_kind), self.before_sha256, self.before_size),
            Content(Kind(self.after_kind), self.after_sha256, self.after_size),
        )


@attrs.frozen
class BlobRecord:
    sha256: str
    size: int
    data: str


def texts(row: dict[str, Any]) -> list[str]:
    """The text contents a change row names, its content before first."""
    return [
        str(row[f"{side}_sha256"])
        for side in ("before", "after")
        if row[f"{side}_kind"] == Kind.TEXT and row[f"{side}_sha256"] is not None
    ]


def blob_record(con: apsw.Connection, sha256: str) -> dict[str, Any] | None:
    """The ``blob`` record of a stored content (None: the store does not hold it)."""
    try:
        data = blobs.get(con, sha256)
    except KeyError:
        return None
    packed = base64.b64encode(zlib.compress(data, 6)).decode("ascii")
    return {"type": "blob", "sha256": sha256, "size": len(data), "data": packed}


class Contents:
    """The contents a file's changes name, checked and stored as their records come; holds
    their digests only."""

    def __init__(self) -> None:
        self.named: dict[str, int] = {}  # a text content named by a change: its size
        self.bases: dict[str, str] = {}  # a content after a change: the content before it
        self.held: set[str] = set()
        self.pictured: set[str] = set()  # of ``named``, the images' (stored whole, as bytes)

    def change(self, record: ChangeRecord) -> None:
        """Note what the change names; ``Unfit`` for sides that do not agree with their kind."""
        before, after = record.sides()
        for side, content in (("before", before), ("after", after)):
            if (content.kind == Kind.ABSENT) != (content.sha256 is None):
                raise Unfit(
                    "record", f"change.{side}Sha256 must be null exactly when the file is absent"
                )
            if content.kind == Kind.TEXT and content.sha256 is not None:
                if content.size > MAX_STORED_BYTES:
                    raise Unfit("record", f"change.{side}Size is over what a text content keeps")
                if self.named.setdefault(content.sha256, content.size) != content.size:
                    raise Unfit("record", f"content {content.sha256} is named with two sizes")
        if before.kind == Kind.TEXT and after.kind == Kind.TEXT and after.sha256 is not None:
            self.bases.setdefault(after.sha256, str(before.sha256))

    def images(self, detail: dict[str, Any]) -> None:
        """Note the images an ``images`` event names; ``Unfit`` for one that is not
        ``{sha256, mimeType, bytes}`` of an image type, at most ``MAX_IMAGE_BYTES``."""
        found = detail.get("images")
        if not isinstance(found, list):
            raise Unfit("record", "an images event must hold a list of images")
        for image in found:
            sha256 = image.get("sha256") if isinstance(image, dict) else None
            size = image.get("bytes") if isinstance(image, dict) else None
            if (
                not isinstance(sha256, str)
                or not _SHA256.fullmatch(sha256)
                or type(size) is not int
                or not 0 < size <= MAX_IMAGE_BYTES
                or image.get("mimeType") not in IMAGE_TYPES
            ):
                raise Unfit(
                    "record",
                    "each image of an images event must be {sha256, mimeType, bytes} of a"
                    " png, jpeg, gif or webp image of at most 20 MiB",
                )
            if self.named.setdefault(sha256, size) != size:
                raise Unfit("record", f"content {sha256} is named with two sizes")
            self.pictured.add(sha256)

    def blob(self, con: apsw.Connection, record: BlobRecord) -> None:
        """Check the content against its digest and size, and store it."""
        size = self.named.get(record.sha256)
        if size is None or record.sha256 in self.held:
            raise Unfit(
                "reference",
                f"blob {record.sha256} is named by no change before it, or appears twice",
            )
        damaged = Unfit(
            "content",
            f"blob {record.sha256} does not match its SHA-256 and size:"
            " the file was changed or damaged",
        )
        try:
            packed = base64.b64decode(record.data, validate=True)
            inflate = zlib.decompressobj()
            data = inflate.decompress(packed, size + 1)
        except (binascii.Error, zlib.error):
            raise damaged from None
        if not inflate.eof or inflate.unconsumed_tail or inflate.unused_data:
            raise damaged
        if record.sha256 in self.pictured:
            if hashlib.sha256(data).hexdigest() != record.sha256 or len(data) != size:
                raise damaged
            images.put(con, record.sha256, data)
            self.held.add(record.sha256)
            return
        content = Content.of(data)
        if content.sha256 != record.sha256 or content.size != size or content.kind != Kind.TEXT:
            raise damaged
        blobs.put(con, content, self.bases.get(record.sha256))
        self.held.add(record.sha256)

    def missing(self) -> str | None:
        """A text content a change names and the file does not hold (None: it holds all)."""
        return next((sha for sha in self.named if sha not in self.held), None)
