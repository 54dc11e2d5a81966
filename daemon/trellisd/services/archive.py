"""Sessions to and from files (the ``trellisd-session`` format of ``store.archive``): a
backup, or a session handed to another machine. The paths are the client's: absolute, in a
folder that exists."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidParams, NotFound
from ..records import Exported, Session
from ..store.facade import AsyncStore
from .sessions import workspace


class ArchiveService:
    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def export(self, session_id: str, path: str) -> Exported:
        """Write the session's whole tree to ``path``, replacing the file there, atomically."""
        target = _client_path(path)
        if not target.parent.is_dir():
            raise NotFound(f"the folder of {path} does not exist", path=path)
        if target.is_dir():
            raise InvalidParams(f"path {path} is a folder; give a file's path", field="path")
        try:
            size, turns = await self.store.sessions.export(session_id, target)
        except OSError as exc:
            raise InvalidParams(
                f"cannot write {path}: {exc.strerror or exc}", field="path", path=path
            ) from exc
        return Exported(str(target), size, turns)

    async def import_(self, path: str, root: str | None, as_new: bool) -> Session:
        """Import the session file at ``path``, all or nothing; with ``root``, over that
        folder; with ``as_new``, under new ids (a copy beside the session it came from)."""
        source = _client_path(path)
        if not source.is_file():
            raise NotFound(f"there is no file at {path}", path=path)
        folder = None if root is None else str(workspace(root))
        try:
            session_id = await self.store.sessions.import_(source, folder, as_new)
        except OSError as exc:
            raise InvalidParams(
                f"cannot read {path}: {exc.strerror or exc}", field="path", path=path
            ) from exc
        return await self.store.sessions.get(session_id)


def _client_path(path: str) -> Path:
    try:
        target = Path(path).expanduser()
    except RuntimeError as exc:  # ~user of a user this machine does not have
        raise InvalidParams(f"path {path} names an unknown home folder", field="path") from exc
    if not target.is_absolute():
        raise InvalidParams(f"path must be an absolute path, not {path}", field="path")
    return target
