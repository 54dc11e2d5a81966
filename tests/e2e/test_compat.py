"""A store written by a newer trellisd, opened by this daemon over real pipes: within the
store's compatibility level every read is served and every write is refused, naming the
version that wrote the store; outside it the store is refused and left untouched."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import apsw
import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.model_server import ModelServer
from tests.fixtures.newer_store import written_by_newer
from trellisd.build import build
from trellisd.store import migrations


async def test_a_newer_store_within_the_level_is_read_and_not_written(
    spawn: DaemonFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    session_id = written_by_newer(db, monkeypatch, None)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    daemon = await spawn(db=db)

    listed = await daemon.call("session/list", {})
    reopened = await daemon.call("session/reopen", {"sessionId": session_id})
    verdict = await daemon.call("session/verify", {"sessionId": session_id})
    turn = await daemon.error("session/turn", {"sessionId": session_id, "prompt": "more"})
    branch = await daemon.error("session/branch", {"sessionId": session_id, "turnId": None})

    assert [s["title"] for s in listed["sessions"]] == ["kept"]
    assert [t["reply"] for t in reopened["history"]] == ["Hi."]
    assert reopened["integrity"] == "ok" and verdict["ok"] is True
    for error in (turn, branch):
        assert error.code == -32040
        assert "written by trellisd 9.0.0" in error.message
        assert f"this trellisd {build()} (schema" in error.message
        assert error.data["writtenBy"] == "9.0.0" and error.data["readOnly"] is True
    await daemon.client.shutdown_session()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


async def test_a_newer_store_outside_the_level_is_refused_untouched(
    spawn: DaemonFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    written_by_newer(db, monkeypatch, len(migrations.MIGRATIONS) + 1)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    daemon = await spawn(db=db)
    error = await daemon.error("session/list", {})
    assert error.code == -32040 and "newer trellisd (9.0.0, schema" in error.message
    assert f"this trellisd {build()} reads schemas up to" in error.message
    await daemon.client.shutdown_session()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


async def test_a_newer_store_is_left_byte_for_byte_as_it_was(
    spawn: DaemonFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer trellisd that keeps no query statistics: serving its store adds none."""
    db = tmp_path / "store" / "trellisd.db"
    session_id = written_by_newer(db, monkeypatch, None)
    con = apsw.Connection(str(db))
    con.execute("DROP TABLE IF EXISTS sqlite_stat1; DROP TABLE IF EXISTS sqlite_stat4")
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    daemon = await spawn(db=db)

    await daemon.call("session/list", {})
    await daemon.call("session/history", {"sessionId": session_id})
    await daemon.call("session/list", {"query": "hello"})
    await daemon.client.shutdown_session()

    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["trellisd.db"]


REPOSITORY = Path(__file__).resolve().parents[2]
OLDER_READERS = {
    "one schema older": "fbe2741f9f617fde4b5df62f213d4b1bddf81e74",  # schema 22
    "two schemas older": "5f82a3d1e624f8977b03ab3ca6d16dd172a8900f",  # schema 21
    "three schemas older": "b2bd4f89836304f0d02587d12c9712041131e1bf",  # schema 20
    "seven schemas older": "55a308136fa274c4fe5a18c921597f071d65e5ec",  # schema 16
    "eight schemas older": "c0bcbd4b274f07febe68b7c5787b78beb0e1bd5c",  # schema 15
}
"""Builds from git history within this store's level: each reads what this build writes."""
BEFORE_THE_LEVEL = "145a379ff48ca9dcd76b69dcbd0bae401819c2ec"  # schema 14: change entries unknown


def older_build(commit: str, into: Path) -> dict[str, str]:
    """The environment that runs trellisd as it was at ``commit`` (its ``daemon/`` folder
    taken from git history), with the dependencies installed here."""
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", "--format=tar", commit, "daemon"],
        capture_output=True,
    )
    if archive.returncode != 0:
        pytest.skip(f"no git history of trellisd here: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return {"PYTHONPATH": str(into / "daemon")}


async def written_with_a_change(spawn: DaemonFactory, model: ModelServer, root: Path) -> str:
    """A store this build wrote: a session whose turn changed a file (so its log holds a
    change entry), the daemon gone."""
    writer = await spawn()
    model.reply(
        "Writing. ",
        tool_calls=[{"name": "write_file", "arguments": {"path": "notes.md", "content": "hi\n"}}],
    )
    model.reply("Done.")
    policy = {"layers": [{"name": "editor", "allowWrite": ["**"]}], "approval": "all"}
    opened = await writer.call(
        "session/open", {"root": str(root), "title": "kept", "policy": policy}
    )
    ended = await writer.call(
        "session/turn", {"sessionId": opened["sessionId"], "prompt": "write notes"}
    )
    assert ended["outcome"] == "finished" and (root / "notes.md").exists()
    await writer.client.shutdown_session()
    return str(opened["sessionId"])


@pytest.mark.parametrize("older_reader", list(OLDER_READERS))
async def test_an_older_build_reads_this_builds_store_and_names_it_refusing_writes(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path, older_reader: str
) -> None:
    session_id = await written_with_a_change(spawn, model, workspace)
    older = await spawn(env=older_build(OLDER_READERS[older_reader], tmp_path / "older"))
    ask = older.protocol.send_request_async  # the older build answers its own schema

    info = await ask("session/list", {})
    history = await ask("session/history", {"sessionId": session_id})
    verdict = await ask("session/verify", {"sessionId": session_id})
    with pytest.raises(JsonRpcException) as refused:
        await ask("session/turn", {"sessionId": session_id, "prompt": "more"})
    await older.client.shutdown_session()

    assert [s["title"] for s in info["sessions"]] == ["kept"]
    assert [t["prompt"] for t in history["turns"]] == ["write notes"]
    assert verdict["ok"] is True
    assert refused.value.code == -32040
    assert f"was written by trellisd {build()} (schema {len(migrations.MIGRATIONS)})" in (
        refused.value.message
    )
    assert refused.value.data["writtenBy"] == build() != "0.1.0"


async def test_a_build_before_the_stores_level_is_refused_the_store_untouched(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    await written_with_a_change(spawn, model, workspace)
    db = tmp_path / "store" / "trellisd.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    older = await spawn(env=older_build(BEFORE_THE_LEVEL, tmp_path / "older"))

    with pytest.raises(JsonRpcException) as refused:
        await older.protocol.send_request_async("session/list", {})
    await older.client.shutdown_session()

    assert refused.value.code == -32040
    assert "was written by a newer trellisd" in refused.value.message
    assert f"(schema {len(migrations.MIGRATIONS)}; this one knows up to 14)" in (
        refused.value.message
    )
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.mark.parametrize("older_reader", ["one schema older", "eight schemas older"])
async def test_an_older_build_reads_and_verifies_a_store_with_images(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path, older_reader: str
) -> None:
    writer = await spawn()
    opened = await writer.call("session/open", {"root": str(workspace), "title": "pictured"})
    image = {"data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    await writer.call(
        "session/turn", {"sessionId": opened["sessionId"], "prompt": "look", "images": [image]}
    )
    await writer.client.shutdown_session()
    older = await spawn(env=older_build(OLDER_READERS[older_reader], tmp_path / "older"))
    ask = older.protocol.send_request_async

    history = await ask("session/history", {"sessionId": opened["sessionId"]})
    verdict = await ask("session/verify", {"sessionId": opened["sessionId"]})
    await older.client.shutdown_session()

    assert [t["prompt"] for t in history["turns"]] == ["look"]
    assert verdict["ok"] is True


async def written_with_a_thought(spawn: DaemonFactory, root: Path, tmp_path: Path) -> str:
    """A store this build wrote: a session of a reasoning model, opened with an effort, whose
    turn's step keeps a thought (a ``thought`` event with the provider's records), the daemon
    gone."""
    script = tmp_path / "script.jsonl"
    line = {"thought": "Check first.", "reasoningItems": [{"type": "reasoning"}], "text": "Ok."}
    script.write_text(json.dumps(line) + "\n", encoding="utf-8")
    writer = await spawn(env={"TRELLISD_PROVIDER": "scripted", "TRELLISD_SCRIPT": str(script)})
    opened = await writer.call(
        "session/open", {"root": str(root), "title": "thought", "provider": {"effort": "high"}}
    )
    ended = await writer.call(
        "session/turn", {"sessionId": opened["sessionId"], "prompt": "think", "effort": "low"}
    )
    steps = await writer.call("run/steps", {"runId": ended["runId"]})
    assert steps["steps"][0]["thought"] == "Check first."
    await writer.client.shutdown_session()
    return str(opened["sessionId"])


@pytest.mark.parametrize("older_reader", ["one schema older", "eight schemas older"])
async def test_an_older_build_reads_and_verifies_a_store_with_thoughts_and_effort(
    spawn: DaemonFactory, workspace: Path, tmp_path: Path, older_reader: str
) -> None:
    session_id = await written_with_a_thought(spawn, workspace, tmp_path)
    older = await spawn(env=older_build(OLDER_READERS[older_reader], tmp_path / "older"))
    ask = older.protocol.send_request_async  # the older build answers its own schema

    reopened = await ask("session/reopen", {"sessionId": session_id})
    (turn,) = reopened["history"]
    steps = await ask("run/steps", {"runId": turn["runId"]})
    events = await ask("run/events", {"runId": turn["runId"]})
    verdict = await ask("session/verify", {"sessionId": session_id})
    await older.client.shutdown_session()

    assert turn["reply"] == "Ok." and [s["text"] for s in steps["steps"]] == ["Ok."]
    assert "thought" in [e["kind"] for e in events["events"]]
    assert verdict["ok"] is True
