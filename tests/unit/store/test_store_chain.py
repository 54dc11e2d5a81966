"""Each session's hash-chained log: a sound store verifies, and every kind of hand edit to a
row that holds session content is found, at the entry it concerns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from trellisd.errors import StaleHead
from trellisd.records import ProviderChoice, Session, Step, Tokens, ToolCall
from trellisd.store import Store, chain
from trellisd.store import db as store_db
from trellisd.store.migrations import MIGRATIONS

OpenSession = Callable[..., Session]
TakeTurn = Callable[..., tuple[str, str]]


@pytest.fixture
def kept(store: Store, open_session: OpenSession, take_turn: TakeTurn) -> tuple[str, str, str]:
    """A session with two turns (tool and reply steps, an event), branched back to the first;
    ``(session_id, first_run, second_run)``."""
    session = open_session(title="kept")
    call = ToolCall("c1", "read_file", {"path": "README.md"})
    first_turn, first = take_turn(
        session.session_id,
        "read it",
        Step(1, "tool", "read it", "looking", call, "# demo", Tokens(10, 2, 0)),
        Step(2, "reply", None, "A demo.", None, None, Tokens(12, 3, 4)),
    )
    store.runs.add_event(first, "retry", 1, {"attempt": 2, "delay": 0.5, "reason": "429"})
    _, second = take_turn(session.session_id, "and then?")
    store.sessions.branch(session.session_id, first_turn, store.leases)
    return session.session_id, first, second


def raw(db_path: Path) -> apsw.Connection:
    """The file as someone editing it by hand sees it: no foreign keys."""
    con = apsw.Connection(str(db_path))
    con.pragma("foreign_keys", False)
    return con


def test_a_sound_session_verifies_and_names_its_head_hash(
    store: Store, kept: tuple[str, str, str]
) -> None:
    session_id, _, _ = kept
    verdict = store.sessions.verify(session_id)
    session = store.sessions.get(session_id)
    assert verdict.ok and verdict.first_bad is None
    assert verdict.head_hash == session.head_hash is not None
    # session, title, 2 x (turn, run, steps, end), an event, a branch
    assert verdict.entries == 1 + 1 + (2 + 2 + 1) + (2 + 1 + 1) + 1 + 1


def test_the_chain_is_sha256_of_the_previous_hash_and_the_canonical_bytes(
    store: Store, open_session: OpenSession
) -> None:
    """What another program does to check it, from the documented encoding alone."""
    session = open_session(root="/w/ünïcode")
    row = {
        "kind": "session",
        "sessionId": session.session_id,
        "root": "/w/ünïcode",
        "createdAt": session.created_at,
        "provider": "{}",
        "policy": None,
        "forkedFrom": None,
        "forkedTurnId": None,
    }
    body = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert session.head_hash == hashlib.sha256(bytes(32) + body.encode()).hexdigest()


EDITS = {
    "edit a step's text": (
        "UPDATE step SET text = 'A lie.' WHERE run_id = :first AND n = 2",
        "step",
        "{first}/2",
    ),
    "change a token count": (
        "UPDATE step SET input_tokens = 1 WHERE run_id = :first AND n = 1",
        "step",
        "{first}/1",
    ),
    "delete a step": ("DELETE FROM step WHERE run_id = :first AND n = 2", "step", "{first}/2"),
    "swap two steps' contents": (
        "UPDATE step SET text = CASE n WHEN 1 THEN 'A demo.' ELSE 'looking' END"
        " WHERE run_id = :first",
        "step",
        "{first}/1",
    ),
    "swap two log entries": (
        "UPDATE chain SET seq = -1 WHERE session_id = :session AND seq = 4;"
        "UPDATE chain SET seq = 4 WHERE session_id = :session AND seq = 5;"
        "UPDATE chain SET seq = 5 WHERE session_id = :session AND seq = -1",
        "step",
        "{first}/1",
    ),
    "edit an event's detail": (
        "UPDATE event SET detail = '{}' WHERE run_id = :first",
        "event",
        "{first}/1",
    ),
    "edit a prompt": ("UPDATE turn SET prompt = 'other' WHERE id = :turn", "turn", "{turn}"),
    "edit a run's outcome": (
        "UPDATE run SET outcome = 'cancelled' WHERE id = :second",
        "end",
        "{second}",
    ),
    "delete a log entry": (
        "DELETE FROM chain WHERE session_id = :session AND seq = 3",
        "run",
        "{first}",
    ),
    "move the head": ("UPDATE session SET head = NULL WHERE id = :session", "branch", "{session}"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_every_hand_edit_is_found_at_its_entry(
    store: Store, db_path: Path, kept: tuple[str, str, str], edit: str
) -> None:
    session_id, first, second = kept
    turn = store.runs.summary(first).turn_id
    sql, kind, ref = EDITS[edit]
    names = {"session": session_id, "first": first, "second": second, "turn": turn}
    con = raw(db_path)
    con.execute(sql, {k: v for k, v in names.items() if f":{k}" in sql})
    con.close()

    verdict = store.sessions.verify(session_id)

    assert not verdict.ok and verdict.reason
    assert verdict.first_bad is not None
    assert (verdict.first_bad.kind, verdict.first_bad.id) == (kind, ref.format(**names))


def test_a_row_inserted_by_hand_is_found(
    store: Store, db_path: Path, kept: tuple[str, str, str]
) -> None:
    session_id, first, _ = kept
    con = raw(db_path)
    con.execute(
        "INSERT INTO step(run_id, n, decision, text, created_at) VALUES (?, 3, 'reply', 'x', '')",
        (first,),
    )
    con.close()
    verdict = store.sessions.verify(session_id)
    assert not verdict.ok and verdict.first_bad == chain.BadEntry(None, "step", f"{first}/3")
    assert verdict.reason == "its step row is in no log entry"


def test_a_reopen_checks_the_tail(store: Store, db_path: Path, kept: tuple[str, str, str]) -> None:
    session_id, _, second = kept
    assert store.sessions.reopen(session_id, store.leases, None)[3] == "ok"
    con = raw(db_path)
    con.execute("UPDATE step SET text = 'A lie.' WHERE run_id = ?", (second,))
    con.close()
    assert store.sessions.reopen(session_id, store.leases, None)[3] == "broken"


def test_a_reopen_finds_a_row_deleted_before_the_tail(
    store: Store, db_path: Path, kept: tuple[str, str, str]
) -> None:
    session_id, first, _ = kept
    con = raw(db_path)
    con.execute("DELETE FROM event WHERE run_id = ?", (first,))
    con.close()
    assert store.sessions.reopen(session_id, store.leases, None)[3] == "broken"


def test_a_reopen_leaves_a_running_turn_unchecked(store: Store, open_session: OpenSession) -> None:
    session = open_session()
    store.runs.begin(session.session_id, "still going")
    assert store.sessions.reopen(session.session_id, store.leases, None)[3] == "unchecked"


def test_an_existing_store_gets_its_log_in_the_migration(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before the log: every session's log is computed once, and verifies."""
    before = MIGRATIONS.index(next(m for m in MIGRATIONS if callable(m)))
    monkeypatch.setattr(store_db, "MIGRATIONS", MIGRATIONS[:before])
    old = store_db.Database(db_path)
    con = old.con
    with old.write():
        con.execute(
            "INSERT INTO session(id, root, title, head, settings, created_at, updated_at)"
            " VALUES ('s-1', '/w', 'old', 't-1', '{}', 'a', 'a')"
        )
        for turn, parent in (("t-1", None), ("t-2", "t-1")):
            con.execute("INSERT INTO turn VALUES (?, 's-1', ?, 'p', 'b')", (turn, parent))
            con.execute(
                "INSERT INTO run(id, turn_id, outcome, pid, started_at, ended_at)"
                " VALUES (?, ?, 'finished', 1, 'b', 'c')",
                ("r" + turn, turn),
            )
            con.execute(
                "INSERT INTO step(run_id, n, decision, text, created_at)"
                " VALUES (?, 1, 'reply', 'r', 'b2')",
                ("r" + turn,),
            )
            con.execute("INSERT INTO event VALUES (?, 1, 'model', NULL, '{}', 'b1')", ("r" + turn,))
    old.close()
    monkeypatch.undo()

    store = Store(db_path, lambda pid: True)
    try:
        verdict = store.sessions.verify("s-1")
        assert verdict.ok, verdict.reason
        # session, title, 2 x (turn, run, event, step, end), the head moved back
        assert verdict.entries == 2 + 2 * 5 + 1
        assert store.sessions.reopen("s-1", store.leases, None)[3] == "ok"
    finally:
        store.close()


def test_a_fork_logs_its_copies_and_both_logs_verify(
    store: Store, kept: tuple[str, str, str]
) -> None:
    session_id, first, _ = kept
    at = store.runs.summary(first).turn_id
    fork = store.sessions.fork(session_id, at, store.leases)
    assert fork.forked_from is not None and fork.forked_from.turn_id == at
    assert [t.prompt for t in store.sessions.history(fork.session_id)] == ["read it"]
    verdict = store.sessions.verify(fork.session_id)
    # session, title, then the copied turn whole: turn, run, 2 steps, an event, its end
    assert verdict.ok and verdict.entries == 2 + 6
    assert verdict.head_hash == store.sessions.get(fork.session_id).head_hash
    assert store.sessions.verify(session_id).ok


def test_a_forks_lineage_is_in_its_log(
    store: Store, kept: tuple[str, str, str], db_path: Path
) -> None:
    session_id, first, _ = kept
    fork = store.sessions.fork(session_id, store.runs.summary(first).turn_id, store.leases)
    with raw(db_path) as con:
        con.execute("UPDATE session SET forked_turn = NULL WHERE id = ?", (fork.session_id,))
    verdict = store.sessions.verify(fork.session_id)
    assert not verdict.ok and verdict.first_bad == chain.BadEntry(1, "session", fork.session_id)


def test_rename_and_instructions_are_logged_and_hand_edits_to_them_are_found(
    store: Store, kept: tuple[str, str, str], db_path: Path
) -> None:
    session_id, _, _ = kept
    before = store.sessions.verify(session_id).entries
    store.sessions.rename(session_id, "renamed", store.leases)
    store.sessions.instruct(session_id, "Answer in French.", store.leases)
    verdict = store.sessions.verify(session_id)
    assert verdict.ok and verdict.entries == before + 2
    entries = store.sessions.verify(session_id).entries
    with raw(db_path) as con:
        con.execute(
            "UPDATE session SET instructions = 'Answer in Latin.' WHERE id = ?", (session_id,)
        )
    verdict = store.sessions.verify(session_id)
    assert not verdict.ok
    assert verdict.first_bad == chain.BadEntry(entries, "instructions", session_id)
    with raw(db_path) as con:
        con.execute(
            "UPDATE session SET instructions = 'Answer in French.', title = 'x' WHERE id = ?",
            (session_id,),
        )
    verdict = store.sessions.verify(session_id)
    assert not verdict.ok and verdict.first_bad == chain.BadEntry(entries - 1, "title", session_id)


def test_a_session_opened_with_instructions_logs_them(
    store: Store, open_session: OpenSession
) -> None:
    session = store.sessions.create(
        "/w", "", ProviderChoice(), store.leases.daemon_id, None, "Be brief."
    )
    verdict = store.sessions.verify(session.session_id)
    assert verdict.ok and verdict.entries == 2  # the session, its instructions


def test_delete_removes_the_sessions_log(
    store: Store, kept: tuple[str, str, str], db_path: Path
) -> None:
    session_id, _, _ = kept
    store.sessions.delete(session_id, store.leases)
    with raw(db_path) as con:
        left = con.execute("SELECT count(*) FROM chain WHERE session_id = ?", (session_id,))
        assert left.fetchone() == (0,)


def test_a_write_expecting_another_head_does_nothing(
    store: Store, kept: tuple[str, str, str]
) -> None:
    session_id, _, _ = kept
    before = store.sessions.get(session_id)
    with pytest.raises(StaleHead) as caught:
        store.runs.begin(session_id, "late", expect_head=None)
    with pytest.raises(StaleHead):
        store.sessions.branch(session_id, None, store.leases, "t-other")
    assert caught.value.data["head"] == before.head
    assert store.sessions.get(session_id) == before


async def test_a_log_rewritten_whole_is_found_by_its_anchor_and_not_without_the_key(
    tmp_path: Path, db_path: Path
) -> None:
    from trellisd.processes import pid_alive
    from trellisd.store.facade import AsyncStore

    config = tmp_path / "config" / "trellisd"
    store = await AsyncStore.open(db_path, pid_alive, config)
    await store.leases.register()
    session_id = (
        await store.sessions.create("/work/project", "t", ProviderChoice(), None)
    ).session_id
    _, run_id, _ = await store.runs.begin(session_id, "what is true?", None)
    truth = Step(1, "reply", "what is true?", "the truth", None, None, Tokens(1, 1, 0))
    await store.runs.add_step(run_id, truth)
    await store.runs.finish(run_id, "finished", None)
    sound = await store.sessions.verify(session_id)
    assert sound.ok and sound.verified and sound.anchored
    key = config / "anchor.key"
    assert (
        oct(key.stat().st_mode & 0o777) == "0o600" and oct(config.stat().st_mode & 0o777) == "0o700"
    )
    assert not list(db_path.parent.glob("anchor*"))  # never beside the store

    # Someone who can write the store edits the step and recomputes the whole log with
    # trellisd's own code: every hash matches its row again.
    con = raw(db_path)
    with con:
        con.execute("UPDATE step SET text = 'a lie' WHERE run_id = ?", (run_id,))
        con.execute("DELETE FROM chain WHERE session_id = ?", (session_id,))
        chain.build_session(con, session_id)
    con.close()

    rewritten = await store.sessions.verify(session_id)
    assert not rewritten.ok and not rewritten.verified and rewritten.check == "anchor"
    assert rewritten.anchored and rewritten.first_bad is not None
    assert rewritten.first_bad.seq == sound.entries and "rewritten" in (rewritten.reason or "")
    elsewhere = Store(db_path, pid_alive, tmp_path / "another machine")
    try:  # without the key, the rewrite is not found: it is only not anchored
        unanchored = elsewhere.verify(session_id)
        assert unanchored.ok and unanchored.verified and not unanchored.anchored
    finally:
        elsewhere.close()
    await store.close()


async def test_the_anchor_follows_the_log_as_it_grows_and_branches(
    tmp_path: Path, db_path: Path
) -> None:
    from trellisd.processes import pid_alive
    from trellisd.store.facade import AsyncStore

    store = await AsyncStore.open(db_path, pid_alive, tmp_path / "config" / "trellisd")
    await store.leases.register()
    session = await store.sessions.create("/work/project", "t", ProviderChoice(), None)
    turns = []
    for prompt in ("one", "two"):
        turn_id, run_id, _ = await store.runs.begin(session.session_id, prompt, None)
        await store.runs.add_event(run_id, "retry", None, {"attempt": 2})
        await store.runs.finish(run_id, "finished", None)
        turns.append(turn_id)
        verdict = await store.sessions.verify(session.session_id)
        assert verdict.ok and verdict.anchored
    await store.sessions.branch(session.session_id, turns[0])
    await store.sessions.rename(session.session_id, "renamed")
    verdict = await store.sessions.verify(session.session_id)
    assert verdict.ok and verdict.anchored and verdict.entries == 12
    con = raw(db_path)  # the last entry taken back: the log ends before the signed head
    with con:
        con.execute("DELETE FROM chain WHERE session_id = ? AND seq = ?", (session.session_id, 12))
        con.execute(
            "UPDATE session SET title = 't', head_hash = (SELECT hash FROM chain WHERE"
            " session_id = ?1 AND seq = 11) WHERE id = ?1",
            (session.session_id,),
        )
    con.close()
    verdict = await store.sessions.verify(session.session_id)
    assert (
        not verdict.ok
        and verdict.check == "anchor"
        and "ends before entry 12" in str(verdict.reason)
    )
    await store.sessions.delete(session.session_id)
    anchors = apsw.Connection(str(tmp_path / "config" / "trellisd" / "anchors.db"))
    assert anchors.execute("SELECT count(*) FROM anchor").fetchone() == (0,)
    anchors.close()
    await store.close()


def test_a_key_others_can_read_anchors_nothing(tmp_path: Path, db_path: Path) -> None:
    from trellisd.processes import pid_alive

    config = tmp_path / "config" / "trellisd"
    store = Store(db_path, pid_alive, config)
    try:
        session = store.sessions.create("/work/project", "t", ProviderChoice(), "d-1")
        store.anchor()
        assert store.verify(session.session_id).anchored
        (config / "anchor.key").chmod(0o644)
    finally:
        store.close()
    again = Store(db_path, pid_alive, config)
    try:
        assert not again.verify(session.session_id).anchored
    finally:
        again.close()


def test_an_entry_of_a_kind_a_later_build_writes_is_checked_by_its_hash_alone(
    store: Store, db_path: Path, kept: tuple[str, str, str]
) -> None:
    """What a newer build adds to a log keeps this build verifying it, and an edit to such an
    entry is still found."""
    session_id, _, _ = kept
    con = raw(db_path)
    with con:
        chain.record_state(con, session_id, "later_kind", session_id, {"what": "new"})
    assert store.sessions.verify(session_id).ok

    with con:
        con.execute(
            "UPDATE chain SET body = ? WHERE session_id = ? AND kind = 'later_kind'",
            (b'{"what":"edited"}', session_id),
        )
    verdict = store.sessions.verify(session_id)
    assert not verdict.ok and verdict.first_bad is not None
    assert verdict.first_bad.kind == "later_kind"
    con.close()


def test_the_numbers_a_reopen_compares_are_the_rows_and_entries_counted(
    store: Store, db_path: Path, kept: tuple[str, str, str]
) -> None:
    """The counts the triggers keep follow turns, forks (whole and cut after a step) and
    deletes, so a reopen's cheap check needs no count of a long session's rows."""
    session_id, first, second = kept
    at = store.runs.summary(first).turn_id
    whole = store.sessions.fork(session_id, at, store.leases).session_id
    cut = store.sessions.fork(session_id, at, store.leases, step=1).session_id
    gone = store.sessions.fork(session_id, at, store.leases).session_id
    store.sessions.delete(gone, store.leases)
    con = raw(db_path)
    kept_counts = dict(
        (row[0], (row[1], row[2]))
        for row in con.execute("SELECT session_id, held, logged FROM log_rows")
    )
    con.execute("DROP TABLE log_rows")  # what a store before them is: counted
    for sid in (session_id, whole, cut):
        assert chain._rows_logged(con, sid)
        held = sum(chain._count(con, spec.source, sid) for spec in chain.ROW_KINDS.values())
        assert kept_counts[sid] == (held, held)
    assert gone not in kept_counts
    con.close()
