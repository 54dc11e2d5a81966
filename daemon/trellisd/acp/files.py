"""The file tools through the ACP client, when it offers ``fs.readTextFile`` and
``fs.writeTextFile``: a read sees the editor's unsaved buffer, a write lands in the editor,
which tracks the edit. The session's policy has judged the path before either is asked."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from acp import schema

from ..tools.base import ToolFailure

log = logging.getLogger(__name__)


class FilePeer(Protocol):
    """What this needs of the ACP connection (``AgentSideConnection``)."""

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None
    ) -> schema.ReadTextFileResponse: ...

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse | None: ...


class ClientFiles:
    """``tools.base.EditorFiles`` over one session's ACP client."""

    def __init__(self, peer: FilePeer, session_id: str, read: bool, write: bool) -> None:
        self.peer, self.session_id = peer, session_id
        self.read, self.write = read, write

    async def read_text(self, path: Path) -> str | None:
        if not self.read:
            return None
        try:
            answer = await self.peer.read_text_file(session_id=self.session_id, path=str(path))
        except Exception as exc:  # the disk is read instead: a new file, say
            log.info("the client did not read %s (%s); reading the disk", path, exc)
            return None
        return answer.content

    async def write_text(self, path: Path, text: str) -> bool:
        if not self.write:
            return False
        try:
            await self.peer.write_text_file(
                session_id=self.session_id, path=str(path), content=text
            )
        except Exception as exc:
            raise ToolFailure(f"the editor did not write {path.name}: {exc}") from exc
        return True


def offered(capabilities: schema.ClientCapabilities | None) -> tuple[bool, bool]:
    """Whether the client reads and writes text files for the agent."""
    fs = None if capabilities is None else capabilities.fs
    if fs is None:
        return False, False
    return bool(fs.read_text_file), bool(fs.write_text_file)
