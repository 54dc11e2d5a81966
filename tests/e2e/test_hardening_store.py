"""The store under stress from outside: a full disk, a stopped daemon, many daemons at once,
and a store the daemon cannot write."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import errno
import os
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import apsw
import pytest

from tests.e2e.conftest import without_override
from tests.fixtures.driver import DaemonFactory, open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.read_only import read_only
from tests.fixtures.waits import eventually

FAST = {"TRELLISD_HEARTBEAT": "0.05"}


async def no_longer(read: Callable[[], Awaitable[object]], value: object, what: str) -> None:
    """Wait until ``read()`` no longer answers ``value``."""

    async def changed() -> bool:
        return (await read()) != value

    await eventually(changed, what)


def iso_after(stamp: str, seconds: float) -> str:
    """The store's timestamp ``seconds`` after ``stamp``."""
    later = datetime.datetime.fromisoformat(stamp) + datetime.timedelta(seconds=seconds)
    return later.isoformat(timespec="milliseconds")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real filesystem of 4 MiB (tmpfs), for a store that can run out of room."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Write a file until the filesystem holding ``folder`` has no room left."""
    filler = folder / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                chunk = chunk[: len(chunk) // 2]
                if not chunk:
                    return filler


async def test_a_full_disk_ends_the_turn_in_error_and_it_resumes_once_there_is_room(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, small_disk: Path
) -> None:
    daemon = await spawn(db=small_disk / "store" / "trellisd.db", env=FAST)
    session = await open_session(daemon, workspace)
    await turn(daemon, session, "before")
    gate = threading.Event()
    model.reply("This reply finds no room on the disk.", hold=gate)
    running = asyncio.ensure_future(turn(daemon, session, "while the disk fills"))
    await eventually(lambda: len(model.requests) == 2, "the second model call arrives")
    filler = fill(small_disk)
    gate.set()

    with contextlib.suppress(Exception):
        await running
    error = await daemon.error(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "still full"}
    )
    assert error.code == -32040, error.message
    assert "full" in error.message and str(small_disk) in error.message

    filler.unlink()
    turns = (await daemon.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    failed = turns[-1]
    assert failed["prompt"] == "while the disk fills"

    async def outcome() -> str:
        summary = await daemon.call("run/summary", {"runId": failed["runId"]})
        return str(summary["outcome"])

    # Its end is written at the next heartbeat.
    await no_longer(outcome, "running", "the turn's end is written once there is room")
    assert await outcome() == "error"

    model.reply("Written this time.")
    resumed = await daemon.call(
        "session/resume", {"sessionId": session["sessionId"], "turnId": failed["turnId"]}
    )
    assert resumed["outcome"] == "finished"
    assert resumed["reply"] == "Written this time."
    assert (await turn(daemon, session, "after"))["outcome"] == "finished"


def heartbeats(db: Path) -> dict[int, str]:
    """Each registered daemon's last heartbeat, by pid, as the store has it."""
    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            int(pid): str(beat) for pid, beat in con.execute("SELECT pid, heartbeat_at FROM daemon")
        }
    finally:
        con.close()


async def test_a_stopped_daemon_keeps_its_session_and_its_running_turn(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    # The first daemon beats at the default pace, so it is almost never stopped mid-write
    # (a stopped process holding the write lock would stall every daemon's writes).
    first = await spawn()
    session = await open_session(first, workspace)
    gate = threading.Event()
    model.reply("Still mine after the pause.", hold=gate)
    running = asyncio.ensure_future(turn(first, session, "a turn that spans a pause"))
    await eventually(lambda: len(model.requests) == 1, "the model call arrives")
    first_pid = first.process.pid
    os.kill(first_pid, signal.SIGSTOP)  # a laptop asleep, a stopped editor, a debugger
    try:
        stopped_at = heartbeats(first.db)[first_pid]
        second = await spawn(env=FAST)
        second_pid = second.process.pid

        # The second daemon beats on well past the point where, to it, the first is stale (7.5
        # heartbeats), then once more: everything it does on a heartbeat has been done.
        def stale_for_long() -> bool:
            beat = heartbeats(first.db).get(second_pid, "")
            return beat > iso_after(stopped_at, 20 * 0.05)

        await eventually(stale_for_long, "the first daemon's heartbeat is long stale")
        last = heartbeats(first.db)[second_pid]
        await eventually(
            lambda: heartbeats(first.db)[second_pid] > last, "the second daemon beats once more"
        )

        turns = (await second.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
        assert turns[-1]["outcome"] == "running"
        taken = await second.error(
            "session/turn", {"sessionId": session["sessionId"], "prompt": "mine?"}
        )
        assert taken.code == -32030 and f"pid {first_pid}" in taken.message
        resumed = await second.error(
            "session/resume", {"sessionId": session["sessionId"], "turnId": turns[-1]["turnId"]}
        )
        assert resumed.code == -32020
        assert first_pid in heartbeats(first.db)
    finally:
        os.kill(first_pid, signal.SIGCONT)
    gate.set()

    result = await running
    assert result["outcome"] == "finished"
    assert result["reply"] == "Still mine after the pause."
    assert (await turn(first, session, "and on"))["outcome"] == "finished"
    history = (await first.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert [t["outcome"] for t in history] == ["finished", "finished"]


async def test_a_read_only_store_serves_reads_and_refuses_writes(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "kept" / "trellisd.db"
    writer = await spawn(db=db)
    session = await open_session(writer, workspace, title="kept")
    done = await turn(writer, session, "what is here?")
    await writer.client.shutdown_session()

    with read_only(db.parent):
        reader = await spawn(db=db)
        listed = (await reader.call("session/list", {}))["sessions"]
        assert [s["title"] for s in listed] == ["kept"]
        reopened = await reader.call("session/reopen", {"sessionId": session["sessionId"]})
        assert [t["reply"] for t in reopened["history"]] == [done["reply"]]
        turns = await reader.call("session/turns", {"sessionId": session["sessionId"]})
        assert [t["outcome"] for t in turns["turns"]] == ["finished"]
        summary = await reader.call("run/summary", {"runId": done["runId"]})
        assert summary["outcome"] == "finished"
        assert (await reader.call("run/steps", {"runId": done["runId"]}))["steps"]

        for method, params in [
            ("session/turn", {"sessionId": session["sessionId"], "prompt": "more"}),
            ("session/open", {"root": str(workspace)}),
            ("session/takeover", {"sessionId": session["sessionId"]}),
        ]:
            refused = await reader.error(method, params)
            assert refused.code == -32040, (method, refused.message)
            assert "read-only" in refused.message and refused.data["readOnly"] is True
        assert len(model.requests) == 1


@pytest.mark.parametrize("mode", [0o600, 0o400], ids=["file-writable", "file-read-only"])
async def test_a_store_in_a_folder_it_cannot_write_serves_reads(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path, mode: int
) -> None:
    db = tmp_path / "kept" / "trellisd.db"
    writer = await spawn(db=db)
    session = await open_session(writer, workspace, title="kept")
    done = await turn(writer, session, "what is here?")
    await writer.client.shutdown_session()
    assert sorted(p.name for p in db.parent.iterdir()) == ["trellisd.db"]

    db.chmod(mode)
    db.parent.chmod(0o555)  # no -wal or -shm can be made beside the store
    try:
        reader = await spawn(db=db, wrapper=without_override())
        listed = (await reader.call("session/list", {}))["sessions"]
        history = await reader.call("session/history", {"sessionId": session["sessionId"]})
        refused = await reader.error(
            "session/turn", {"sessionId": session["sessionId"], "prompt": "more"}
        )
        await reader.client.shutdown_session()
    finally:
        db.parent.chmod(0o700)
    assert [s["title"] for s in listed] == ["kept"]
    assert [t["reply"] for t in history["turns"]] == [done["reply"]]
    assert refused.code == -32040 and refused.data["readOnly"] is True
    assert "read-only" in refused.message
    assert sorted(p.name for p in db.parent.iterdir()) == ["trellisd.db"]
