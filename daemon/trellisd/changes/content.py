"""A file's content at one moment, as a change set keeps it.

Text files up to ``MAX_STORED_BYTES`` are kept whole; a binary file (a NUL byte in its first
8 KiB) or a larger one is kept as its SHA-256 and size only, enough to list it and to notice
that someone changed it since, not to put it back. Reading never holds more than
``MAX_STORED_BYTES`` (and one chunk) in memory, however large the file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from ..tools.base import ToolContext, ToolFailure

MAX_STORED_BYTES = 8 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
CHUNK_BYTES = 1024 * 1024


class Kind(StrEnum):
    ABSENT = "absent"
    TEXT = "text"
    BINARY = "binary"
    TOO_LARGE = "tooLarge"


@dataclass(frozen=True)
class Content:
    """``data`` is there for text (``kind`` ``text``) read from disk or the store; ``sha256``
    names the bytes whatever the kind (None when absent)."""

    kind: Kind
    sha256: str | None = None
    size: int = 0
    data: bytes | None = None

    @classmethod
    def of(cls, data: bytes) -> Content:
        return cls.read([data])

    @classmethod
    def read(cls, chunks: Iterable[bytes]) -> Content:
        """The content of a stream of bytes, read once."""
        digest, size, kept, binary = hashlib.sha256(), 0, bytearray(), False
        for chunk in chunks:
            if size < BINARY_SNIFF_BYTES and b"\0" in chunk[: BINARY_SNIFF_BYTES - size]:
                binary = True
            digest.update(chunk)
            size += len(chunk)
            if not binary and size <= MAX_STORED_BYTES:
                kept += chunk
        if binary:
            return cls(Kind.BINARY, digest.hexdigest(), size)
        if size > MAX_STORED_BYTES:
            return cls(Kind.TOO_LARGE, digest.hexdigest(), size)
        return cls(Kind.TEXT, digest.hexdigest(), size, bytes(kept))

    def same(self, other: Content) -> bool:
        """The same bytes (or both absent)."""
        return self.kind == other.kind if self.sha256 is None else self.sha256 == other.sha256

    @property
    def restorable(self) -> bool:
        return self.kind == Kind.ABSENT or self.data is not None

    def text(self) -> str:
        return (self.data or b"").decode("utf-8", errors="replace")


ABSENT = Content(Kind.ABSENT)


def read_content(context: ToolContext, relative: str) -> Content | None:
    """The file at ``relative`` (root-relative) now, opened as the tools open files (no
    symlink followed); None when something other than a regular file is there."""
    try:
        path = context.resolve(relative)
        fd = context.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT
    except (ToolFailure, OSError):
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        os.set_blocking(f.fileno(), True)
        return Content.read(iter(lambda: f.read(CHUNK_BYTES), b""))
