"""session/export, session/import and search: a session handed from one store to another
reads the same there, and search finds sessions by what was said in them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.fixtures.driver import Daemon, DaemonFactory, open_session, turn
from tests.fixtures.model_server import ModelServer

BIG_TURNS, BIG_RESULT = 1_000, 50_000  # a 50 MB file: an export or import takes a while


async def everything(daemon: Daemon, session_id: str) -> dict[str, Any]:
    """What an editor can read of a session: its history, its tree, each run's steps and
    events."""
    ref = {"sessionId": session_id}
    turns = (await daemon.call("session/turns", ref))["turns"]
    runs = [t["runId"] for t in turns]
    return {
        "history": await daemon.call("session/history", ref),
        "turns": turns,
        "steps": [await daemon.call("run/steps", {"runId": r}) for r in runs],
        "events": [await daemon.call("run/events", {"runId": r}) for r in runs],
    }


async def test_a_session_exported_from_one_store_reads_the_same_in_another(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    first = await spawn()
    session = await open_session(first, workspace, title="handed over")
    sid = session["sessionId"]
    hello = await turn(first, session, "hello")
    model.reply("Looking. ", tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}])
    model.reply("There is a README.")
    await turn(first, session, "what files are here?")
    await first.call("session/branch", {"sessionId": sid, "turnId": hello["turnId"]})
    await turn(first, session, "another way")
    path = tmp_path / "backups" / "handed-over.trellisd"
    path.parent.mkdir()

    done = await first.call("session/export", {"sessionId": sid, "path": str(path)})
    assert done == {"path": str(path), "bytes": path.stat().st_size, "turns": 3}
    exported = await first.call("session/verify", {"sessionId": sid})
    header = json.loads(path.read_bytes().splitlines()[0])

    second = await spawn(db=tmp_path / "elsewhere" / "trellisd.db")
    imported = await second.call("session/import", {"path": str(path)})
    assert imported["sessionId"] == sid
    assert (imported["title"], imported["root"]) == ("handed over", str(workspace))
    origin = imported["importedFrom"]
    assert origin == {
        "sessionId": sid,
        "headHash": exported["headHash"],
        "exportedAt": header["exportedAt"],
        "importedAt": origin["importedAt"],
    }
    assert origin["importedAt"] >= origin["exportedAt"]
    listed = (await second.call("session/list", {}))["sessions"]
    assert [s["importedFrom"] for s in listed] == [origin]
    # Its feed lists its turns' commits as the sender's did.
    feed = await second.call("session/events", {"sessionId": sid})
    assert feed == await first.call("session/events", {"sessionId": sid})
    assert [e["kind"] for e in feed["events"]].count("turnEnded") == 3
    assert await everything(second, sid) == await everything(first, sid)
    verdict = await second.call("session/verify", {"sessionId": sid})
    assert verdict["ok"] and verdict["headHash"] == imported["headHash"]

    # A file whose records no longer match its log (a reply changed, the digest made again
    # by hand) is refused with the reason, and nothing of it is imported.
    records = path.read_bytes().splitlines(keepends=True)[:-1]
    body = b"".join(records).replace(b"There is a README.", b"There is nothing.")
    digest = hashlib.sha256(body).hexdigest()
    end = json.dumps({"type": "end", "records": len(records), "sha256": digest})
    path.write_bytes(body + end.encode() + b"\n")
    forged = await second.error("session/import", {"path": str(path), "asNew": True})
    assert (forged.code, forged.data["check"]) == (-32602, "log")
    assert "the session's log does not verify at entry" in forged.message
    assert "its step does not match its hash" in forged.message
    assert len((await second.call("session/list", {}))["sessions"]) == 1
    assert (await second.call("session/history", {"sessionId": sid}))["turns"][-1][
        "prompt"
    ] == "another way"

    # The imported session goes on in its new store, the model seeing its whole history.
    await turn(second, imported, "and now?")
    assert model.user_messages()[-2:] == ["another way", "and now?"]


async def test_import_refuses_a_copy_the_store_has_unless_as_new_and_rebinds_its_root(
    daemon: Daemon, workspace: Path, tmp_path: Path
) -> None:
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    await turn(daemon, session, "hello")
    path = tmp_path / "s.trellisd"
    await daemon.call("session/export", {"sessionId": sid, "path": str(path)})

    refused = await daemon.error("session/import", {"path": str(path)})
    assert refused.code == -32020
    assert refused.data["sessionId"] == sid and sid in refused.message

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    copy = await daemon.call(
        "session/import", {"path": str(path), "asNew": True, "root": str(checkout)}
    )
    assert copy["sessionId"] != sid
    exported = await daemon.call("session/verify", {"sessionId": sid})
    assert copy["importedFrom"]["sessionId"] == sid
    assert copy["importedFrom"]["headHash"] == exported["headHash"]
    assert copy["importedFrom"]["headHash"] != copy["headHash"]  # a log of its own
    assert copy["root"] == str(checkout)
    listed = (await daemon.call("session/list", {}))["sessions"]
    assert [s["sessionId"] for s in listed] == [copy["sessionId"], sid]
    assert listed[0]["importedFrom"] == copy["importedFrom"]
    copied = (await daemon.call("session/history", {"sessionId": copy["sessionId"]}))["turns"]
    original = (await daemon.call("session/history", {"sessionId": sid}))["turns"]
    assert [t["reply"] for t in copied] == [t["reply"] for t in original]
    assert copied[0]["turnId"] != original[0]["turnId"]
    feed = (await daemon.call("session/events", {"sessionId": copy["sessionId"]}))["events"]
    was = (await daemon.call("session/events", {"sessionId": sid}))["events"]
    assert [(e["seq"], e["kind"]) for e in feed] == [(e["seq"], e["kind"]) for e in was]
    assert {e["turnId"] for e in feed} == {t["turnId"] for t in copied}


async def test_export_and_import_refuse_bad_paths_and_files_with_the_reason(
    daemon: Daemon, workspace: Path, tmp_path: Path
) -> None:
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    await turn(daemon, session, "hello")

    relative = await daemon.error("session/export", {"sessionId": sid, "path": "s.trellisd"})
    assert (relative.code, relative.data["field"]) == (-32602, "path")
    no_folder = tmp_path / "missing" / "s.trellisd"
    missing = await daemon.error("session/export", {"sessionId": sid, "path": str(no_folder)})
    assert (missing.code, missing.data["path"]) == (-32010, str(no_folder))
    unknown = await daemon.error(
        "session/export", {"sessionId": "s-unknown", "path": str(tmp_path / "x")}
    )
    assert unknown.code == -32010
    assert not (tmp_path / "x").exists()

    absent = await daemon.error("session/import", {"path": str(tmp_path / "absent")})
    assert absent.code == -32010
    path = tmp_path / "s.trellisd"
    await daemon.call("session/export", {"sessionId": sid, "path": str(path)})
    bad_root = await daemon.error(
        "session/import", {"path": str(path), "asNew": True, "root": "relative/dir"}
    )
    assert (bad_root.code, bad_root.data["field"]) == (-32602, "root")
    bad_flag = await daemon.error("session/import", {"path": str(path), "asNew": "yes"})
    assert (bad_flag.code, bad_flag.data["field"]) == (-32602, "asNew")

    path.write_bytes(path.read_bytes().replace(b"hello", b"jello"))
    damaged = await daemon.error("session/import", {"path": str(path), "asNew": True})
    assert damaged.code == -32602
    assert damaged.data["check"] == "digest" and damaged.data["line"] > 2
    assert f"{path} cannot be imported: line" in damaged.message
    assert len((await daemon.call("session/list", {}))["sessions"]) == 1


async def test_session_list_finds_sessions_by_what_was_said_in_them(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    wanted = await open_session(daemon, workspace, title="parser work")
    other = await open_session(daemon, workspace, title="other")
    model.reply("The tokenizer drops the BOM.")
    answered = await turn(daemon, wanted, "why does the lexer fail?")
    await turn(daemon, other, "hello")

    found = await daemon.call("session/list", {"query": "tokenizer"})
    (hit,) = found["sessions"]
    assert hit["sessionId"] == wanted["sessionId"]
    assert hit["match"] == {
        "turnId": answered["turnId"],
        "snippet": "The «tokenizer» drops the BOM.",
    }
    assert (await daemon.call("session/list", {"query": 'lexer" OR ('}))["sessions"] == []
    empty = await daemon.error("session/list", {"query": "   "})
    assert (empty.code, empty.data["field"]) == (-32602, "query")
    assert "match" not in (await daemon.call("session/list", {}))["sessions"][0]
