"""The file tools through the ACP client, when it offers ``fs.readTextFile`` and
``fs.writeTextFile``: a read sees the editor's unsaved buffer, a write lands in the editor,
which tracks the edit. The session's policy has judged the path before either is asked."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from ..convert import structure, unstructure
from ..tools.base import ToolFailure
from . import wire

log = logging.getLogger(__name__)


class FilePeer(Protocol):
    """What this needs of the ACP connection (``rpc.Connection``)."""

    async def request(self, method: str, params: Any) -> Any: ...


class ClientFiles:
    """``tools.base.EditorFiles`` over one session's ACP client."""

    def __init__(self, peer: FilePeer, session_id: str, read: bool, write: bool) -> None:
        self.peer, self.session_id = peer, session_id
        self.read, self.write = read, write

    async def read_text(self, path: Path) -> str | None:
        if not self.read:
            return None
        try:
            asked = wire.ReadTextFile(self.session_id, str(path))
            answer = await self.peer.request("fs/read_text_file", unstructure(asked))
            content = structure(answer, wire.FileText).content
        except Exception as exc:  # the disk is read instead: a new file, say
            log.info("the client did not read %s (%s); reading the disk", path, exc)
            return None
        return content

    async def write_text(self, path: Path, text: str) -> bool:
        if not self.write:
            return False
        try:
            written = wire.WriteTextFile(self.session_id, str(path), text)
            await self.peer.request("fs/write_text_file", unstructure(written))
        except Exception as exc:
            raise ToolFailure(f"the editor did not write {path.name}: {exc}") from exc
        return True
