"""Images given with a turn's prompt: checked, read, stored, and fetched again.

An image is given as a root-relative ``path`` (read as ``read_file`` reads: through no
symlink under the root, inside it, and only when the session's policy lets the model read
it) or as base64 ``data`` with its ``mimeType``. Its bytes must be a PNG, JPEG, GIF or WebP
(judged by their magic, and agreeing with a given type), at most ``MAX_IMAGE_BYTES``
(base64 is measured before it is decoded), at most ``MAX_IMAGES`` a turn; anything else is
``-32602`` naming the image (``images[2]: ...``). A model known not to take images
(``TEXT_ONLY``) is refused before anything is sent.

The model gets the turn's images with its prompt, and earlier turns' images again with their
prompts when the path is sent, newest first while they fit in ``REPLAY_IMAGE_BYTES``; an
older one past it becomes a line of text saying what it was (``agent.context.placeholder``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import fnmatch
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import attrs

from ..convert import Invalid
from ..errors import InvalidParams, NotFound
from ..policy.layers import Verdict
from ..pricing import normal_name
from ..providers.base import Image
from ..records import ImageRef, Turn
from ..store.facade import AsyncStore
from ..store.images import IMAGE_TYPES, MAX_IMAGE_BYTES
from ..tools import Action, ToolContext, ToolFailure

MAX_IMAGES = 16
"""The most images one turn's prompt may carry."""

REPLAY_IMAGE_BYTES = 20 * 1024 * 1024
"""The most bytes of earlier turns' images one request carries again (the turn's own
images always go, and count against it first)."""

TEXT_ONLY = (
    "gpt-3.5*",
    "gpt-4",
    "gpt-4-0314",
    "gpt-4-0613",
    "gpt-4-32k*",
    "o1-mini*",
    "o3-mini*",
    "deepseek-chat",
    "deepseek-reasoner",
    "deepseek-coder*",
    "deepseek-r1*",
    "deepseek-v3*",
    "claude-2*",
    "claude-instant*",
)
"""Models known not to take images, as patterns over the model's name (lower case, with and
without its vendor prefix and date: ``normal_name``)."""

_PATTERNS = {p for pattern in TEXT_ONLY for p in (pattern, pattern.replace(".", "-"))}
_BASE64_LIMIT = (MAX_IMAGE_BYTES + 2) // 3 * 4  # the base64 of the largest image allowed


@attrs.frozen
class ImageInput:
    """An image as the client gives it: a ``path`` under the root, or base64 ``data`` with
    its ``mime_type``."""

    path: str | None = None
    data: str | None = None
    mime_type: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.path is None) == (self.data is None):
            raise Invalid("needs either a path or data with its mimeType")
        if self.data is not None and self.mime_type is None:
            raise Invalid("data needs its mimeType")


@dataclass(frozen=True)
class GivenImage:
    """An image ready for the model and the store: its record and its bytes."""

    ref: ImageRef
    data: bytes

    def image(self) -> Image:
        return Image(self.ref.mime_type, self.data)


def sniff(data: bytes) -> str | None:
    """The image type the bytes' magic says (None: none of the four)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def takes_images(model: str | None) -> bool:
    """False for a model ``TEXT_ONLY`` names; any other is taken to take images."""
    if not model:
        return True
    raw = model.strip().lower()
    names = {raw, raw.rsplit("/", 1)[-1], normal_name(model)}
    return not any(fnmatch.fnmatchcase(n, p) for n in names for p in _PATTERNS)


def refuse_model(model: str | None, given: int) -> None:
    """``-32602`` when images go to a model known not to take them."""
    if given and not takes_images(model):
        raise InvalidParams(
            f"images: the model {model} does not take images; pick another model or send"
            " the prompt without them",
            field="images",
            model=model,
        )


async def check(
    inputs: tuple[ImageInput, ...], context: ToolContext, judge: Callable[[Action], Verdict]
) -> list[GivenImage]:
    """The images, read and checked, in order; ``judge`` is the session's policy."""
    if len(inputs) > MAX_IMAGES:
        raise InvalidParams(
            f"images: at most {MAX_IMAGES} images may go with a prompt, not {len(inputs)}",
            field="images",
        )
    return [await _one(i, given, context, judge) for i, given in enumerate(inputs)]


async def _one(
    index: int, given: ImageInput, context: ToolContext, judge: Callable[[Action], Verdict]
) -> GivenImage:
    field = f"images[{index}]"

    def refused(problem: str, where: str = "") -> InvalidParams:
        return InvalidParams(f"{field}{where}: {problem}", field=field + where)

    if given.data is not None:
        if given.mime_type not in IMAGE_TYPES:
            raise refused(f"mimeType must be one of {', '.join(IMAGE_TYPES)}", ".mimeType")
        if len(given.data) > _BASE64_LIMIT:
            raise refused(f"the image is larger than {_mib(MAX_IMAGE_BYTES)}", ".data")
        try:
            data = base64.b64decode(given.data, validate=True)
        except (binascii.Error, ValueError):
            raise refused("data is not base64", ".data") from None
    else:
        data = await asyncio.to_thread(_read, given.path or "", context, judge, refused)
    if len(data) > MAX_IMAGE_BYTES:
        raise refused(f"the image is larger than {_mib(MAX_IMAGE_BYTES)}")
    kind = sniff(data)
    if kind is None:
        raise refused("the bytes are not a PNG, JPEG, GIF or WebP image")
    if given.mime_type is not None and given.mime_type != kind:
        raise refused(f"the bytes are {kind}, not the {given.mime_type} given", ".mimeType")
    ref = ImageRef(hashlib.sha256(data).hexdigest(), kind, len(data))
    return GivenImage(ref, data)


def _read(
    given: str,
    context: ToolContext,
    judge: Callable[[Action], Verdict],
    refused: Callable[[str, str], InvalidParams],
) -> bytes:
    """The file's bytes, read as ``read_file`` reads, never more than the largest image."""
    try:
        real = context.resolve(given, field="path")
        relative = context.relative(real)
        verdict = judge(Action("read", relative))
        if verdict.ruling == "refuse" or not context.readable(relative):
            reason = verdict.reason if verdict.ruling == "refuse" else "it may not be read"
            raise refused(f"the session's policy refuses reading {relative}: {reason}", ".path")
        fd = context.open(real, os.O_RDONLY)
    except ToolFailure as exc:
        raise refused(str(exc), ".path") from exc
    except FileNotFoundError:
        raise refused(f"{given} does not exist", ".path") from None
    except OSError as exc:
        raise refused(f"{given} cannot be read: {exc.strerror}", ".path") from None
    try:
        with os.fdopen(fd, "rb") as file:
            data = file.read(MAX_IMAGE_BYTES + 1)
    except IsADirectoryError:
        raise refused(f"{given} is a folder, not an image", ".path") from None
    except OSError as exc:
        raise refused(f"{given} cannot be read: {exc.strerror}", ".path") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise refused(f"the image is larger than {_mib(MAX_IMAGE_BYTES)}", ".path")
    return data


def _mib(size: int) -> str:
    return f"{size // (1024 * 1024)} MiB"


def replayed(path: Iterable[Turn], room: int = REPLAY_IMAGE_BYTES) -> set[str]:
    """The images of ``path`` sent again, by SHA-256: the newest first while their bytes fit
    in ``room`` (an image carried by two turns counts once)."""
    chosen: set[str] = set()
    for turn in reversed(list(path)):
        for ref in turn.images:
            if ref.sha256 in chosen:
                continue
            if ref.bytes > room:
                room = -1  # an older image is not sent when a newer one was not
                continue
            chosen.add(ref.sha256)
            room -= ref.bytes
    return chosen


class Images:
    """The store's side of images: each kept once, fetched by the session that carried it."""

    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def keep(self, run_id: str, images: list[GivenImage]) -> None:
        """Store the run's images and the event naming them."""
        if images:
            await self.store.runs.add_images(run_id, [(i.ref, i.data) for i in images])

    async def fetch(self, session_id: str, sha256: str) -> tuple[ImageRef, bytes]:
        """An image a turn of the session carried, with its bytes (``session/image``)."""
        return await self.store.sessions.image(session_id, sha256)

    async def of_path(
        self, session_id: str, path: list[Turn], model: str | None, own: int = 0
    ) -> Mapping[str, Image]:
        """The path's images sent again (``replayed``) to ``model``, by SHA-256, after the
        turn's ``own`` bytes: none to a model known not to take images."""
        if not takes_images(model):
            return {}
        return await self._bytes(session_id, replayed(path, max(REPLAY_IMAGE_BYTES - own, -1)))

    async def of_turn(self, session_id: str, turn: Turn, model: str | None) -> Mapping[str, Image]:
        """A turn's own images, all of them, for its resumed request: none to a model known
        not to take images."""
        if not takes_images(model):
            return {}
        return await self._bytes(session_id, {r.sha256 for r in turn.images})

    async def _bytes(self, session_id: str, chosen: set[str]) -> Mapping[str, Image]:
        """The images ``chosen``, by SHA-256; one whose bytes are missing from the store is
        left out (its placeholder goes)."""
        found: dict[str, Image] = {}
        for sha256 in sorted(chosen):
            try:
                ref, data = await self.store.sessions.image(session_id, sha256)
            except NotFound:
                continue
            found[sha256] = Image(ref.mime_type, data)
        return found
