"""session/export and session/import cut short: a daemon killed mid-export or mid-import
leaves neither a partial file nor a partial session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.sessions import fill_session
from tests.fixtures.waits import eventually

BIG_TURNS, BIG_RESULT = 1_000, 50_000  # a 50 MB file: an export or import takes a while


def _partial(folder: Path) -> list[Path]:
    return list(folder.glob(".*.partial"))


async def test_a_daemon_killed_mid_export_leaves_no_file_at_the_path(
    spawn: DaemonFactory, tmp_path: Path
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    sid = await asyncio.to_thread(fill_session, db, BIG_TURNS, BIG_RESULT)
    folder = tmp_path / "backups"
    folder.mkdir()
    path = folder / "big.trellisd"
    first = await spawn(db=db)
    exporting = asyncio.ensure_future(
        first.protocol.send_request_async("session/export", {"sessionId": sid, "path": str(path)})
    )
    await eventually(lambda: _partial(folder) or path.exists(), "the export is being written")
    os.kill(first.process.pid, signal.SIGSTOP)  # held mid-export, to look before the kill
    assert not path.exists()
    assert _partial(folder)
    os.kill(first.process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await exporting
    await first.process.wait()
    assert not path.exists()

    second = await spawn(db=db)
    done = await second.call("session/export", {"sessionId": sid, "path": str(path)})
    assert done["turns"] == BIG_TURNS


async def test_a_daemon_killed_mid_import_leaves_no_session(
    spawn: DaemonFactory, tmp_path: Path
) -> None:
    source = tmp_path / "source" / "trellisd.db"
    sid = await asyncio.to_thread(fill_session, source, BIG_TURNS, BIG_RESULT)
    path = tmp_path / "big.trellisd"
    exporter = await spawn(db=source)
    size = (await exporter.call("session/export", {"sessionId": sid, "path": str(path)}))["bytes"]

    db = tmp_path / "target" / "trellisd.db"
    first = await spawn(db=db)
    importing = asyncio.ensure_future(
        first.protocol.send_request_async("session/import", {"path": str(path)})
    )
    pid = first.process.pid
    await eventually(lambda: 0 < _read_so_far(pid, path) < size, "the import is reading")
    os.kill(pid, signal.SIGSTOP)  # held mid-import: the file is not yet read to its end
    assert 0 < _read_so_far(pid, path) < size
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await importing
    await first.process.wait()

    second = await spawn(db=db)
    assert (await second.call("session/list", {}))["sessions"] == []
    assert (await second.call("session/list", {"query": "parser"}))["sessions"] == []
    gone = await second.error("session/reopen", {"sessionId": sid})
    assert gone.code == -32010
    imported = await second.call("session/import", {"path": str(path)})
    assert imported["sessionId"] == sid
    assert len((await second.call("session/turns", {"sessionId": sid}))["turns"]) == BIG_TURNS


def _read_so_far(pid: int, path: Path) -> int:
    """How far process ``pid`` has read the file at ``path`` (0: it has not opened it)."""
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd) == str(path):
                info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
                return int(info.split("pos:", 1)[1].split()[0])
    return 0
