"""A long session over the wire a page at a time: reopen answers with its newest turns and a
cursor, and the pages put together are the whole history and the whole tree."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.driver import DaemonFactory
from trellisd.processes import pid_alive
from trellisd.records import ProviderChoice, Step, Tokens
from trellisd.store import Store


def fill(db: Path, root: Path, turns: int) -> tuple[str, list[str]]:
    """A session of ``turns`` finished turns, written by a store that has since let go."""
    db.parent.mkdir(parents=True, exist_ok=True)
    store = Store(db, pid_alive)
    store.leases.register()
    session = store.sessions.create(str(root), "long", ProviderChoice(), store.leases.daemon_id)
    ids = []
    for i in range(turns):
        turn_id, run_id, _ = store.runs.begin(session.session_id, f"p{i}")
        store.runs.add_step(run_id, Step(1, "reply", None, f"r{i}", None, None, Tokens(1, 1, 0)))
        store.runs.finish(run_id, "finished")
        ids.append(turn_id)
    store.leases.unregister()
    store.close()
    return session.session_id, ids


async def test_a_long_session_reopens_with_its_newest_page_and_pages_back(
    spawn: DaemonFactory, tmp_path: Path, workspace: Path
) -> None:
    db = tmp_path / "paged" / "trellisd.db"
    session_id, _ = fill(db, workspace, 120)
    daemon = await spawn(db=db)

    reopened = await daemon.call("session/reopen", {"sessionId": session_id, "limit": 50})
    assert [t["prompt"] for t in reopened["history"]] == [f"p{i}" for i in range(70, 120)]
    assert reopened["history"][-1]["reply"] == "r119"

    pages, cursor = [], reopened["historyCursor"]
    while cursor:
        page = await daemon.call(
            "session/history", {"sessionId": session_id, "limit": 50, "cursor": cursor}
        )
        pages.append([t["prompt"] for t in page["turns"]])
        cursor = page.get("nextCursor")
    assert pages == [[f"p{i}" for i in range(20, 70)], [f"p{i}" for i in range(20)]]

    whole = await daemon.call("session/history", {"sessionId": session_id})
    assert len(whole["turns"]) == 120 and "nextCursor" not in whole
    everything = await daemon.call("session/reopen", {"sessionId": session_id})
    assert len(everything["history"]) == 120 and "historyCursor" not in everything


async def test_the_turn_tree_pages_forward_and_a_foreign_cursor_is_refused(
    spawn: DaemonFactory, tmp_path: Path, workspace: Path
) -> None:
    db = tmp_path / "paged" / "trellisd.db"
    session_id, ids = fill(db, workspace, 7)
    daemon = await spawn(db=db)

    first = await daemon.call("session/turns", {"sessionId": session_id, "limit": 4})
    rest = await daemon.call(
        "session/turns", {"sessionId": session_id, "cursor": first["nextCursor"]}
    )
    assert [t["turnId"] for t in first["turns"] + rest["turns"]] == ids
    assert "nextCursor" not in rest

    error = await daemon.error(
        "session/history", {"sessionId": session_id, "cursor": first["nextCursor"]}
    )
    assert error.code == -32602 and error.data == {"field": "cursor"}
    error = await daemon.error("session/turns", {"sessionId": session_id, "limit": 0})
    assert error.code == -32602 and error.data["field"] == "limit"
