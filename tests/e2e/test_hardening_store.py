"""The store under stress from outside: a full disk, a stopped daemon, many daemons at once,
and a store the daemon cannot write."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import DaemonFactory
from tests.e2e.test_sessions import open_session, turn
from tests.e2e.test_steer_cancel import wait_for
from tests.fixtures.model_server import ModelServer

FAST = {"TRELLISD_HEARTBEAT": "0.05"}


async def eventually(read: Callable[[], Awaitable[object]], while_: object) -> None:
    """Wait until ``read()`` no longer answers ``while_``; a stuck daemon fails the test."""
    async with asyncio.timeout(30):
        while (await read()) == while_:
            await asyncio.sleep(0.02)


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
    await wait_for(lambda: len(model.requests) == 2)
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

    await eventually(lambda: outcome(), "running")  # its end is written at the next heartbeat
    assert await outcome() == "error"

    model.reply("Written this time.")
    resumed = await daemon.call(
        "session/resume", {"sessionId": session["sessionId"], "turnId": failed["turnId"]}
    )
    assert resumed["outcome"] == "finished"
    assert resumed["reply"] == "Written this time."
    assert (await turn(daemon, session, "after"))["outcome"] == "finished"
