"""A session's life in the store: forks that own their history, renaming, instructions,
deleting, and the session's feed of commits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from trellisd.errors import Conflict, InvalidParams, LeaseHeld, NotFound
from trellisd.records import ForkedFrom, Session, Step, Tokens
from trellisd.store import Store
from trellisd.store.migrations import MIGRATIONS
from trellisd.vocabulary import FeedKind

OpenStore = Callable[[], Store]
OpenSession = Callable[..., Session]
TakeTurn = Callable[..., tuple[str, str]]


def prompts(store: Store, session_id: str) -> list[str]:
    return [t.prompt for t in store.sessions.history(session_id)]


def rows(db_path: Path, session_id: str) -> dict[str, int]:
    """How many rows of each table belong to the session."""
    runs = "SELECT r.id FROM run r JOIN turn t ON t.id = r.turn_id WHERE t.session_id = ?"
    con = apsw.Connection(str(db_path))
    try:
        counts = {
            "session": "SELECT count(*) FROM session WHERE id = ?",
            "turn": "SELECT count(*) FROM turn WHERE session_id = ?",
            "run": f"SELECT count(*) FROM run WHERE id IN ({runs})",
            "step": f"SELECT count(*) FROM step WHERE run_id IN ({runs})",
            "event": f"SELECT count(*) FROM event WHERE run_id IN ({runs})",
            "feed": "SELECT count(*) FROM feed WHERE session_id = ?",
        }
        return {
            table: int(con.execute(sql, (session_id,)).fetchone()[0])  # type: ignore[index]
            for table, sql in counts.items()
        }
    finally:
        con.close()


def test_a_fork_holds_the_path_to_its_turn_and_names_its_origin(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    origin = open_session(title="origin").session_id
    first, _ = take_turn(origin, "one")
    second, run = take_turn(origin, "two")
    store.runs.add_event(run, "retry", None, {"a": 1})  # a late event of the run's own
    take_turn(origin, "three")
    store.sessions.branch(origin, first, store.leases)
    take_turn(origin, "two again")  # another branch the fork must not see

    fork = store.sessions.fork(origin, second, store.leases)

    assert fork.session_id != origin
    assert fork.forked_from == ForkedFrom(origin, second)
    assert fork.title == "origin"
    assert prompts(store, fork.session_id) == ["one", "two"]
    copied = store.sessions.history(fork.session_id)
    assert all(t.session_id == fork.session_id for t in copied)
    assert [t.reply for t in copied] == ["re: one", "re: two"]
    assert {t.turn_id for t in copied}.isdisjoint({first, second})
    assert [e.detail for e in store.runs.events(copied[1].run_id)] == [{"a": 1}]
    assert store.sessions.get(fork.session_id).forked_from == ForkedFrom(origin, second)
    assert prompts(store, origin) == ["one", "two again"]
    assert len(store.sessions.turns(origin)) == 4


def test_an_empty_fork_has_no_history(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    origin = open_session().session_id
    take_turn(origin, "one")

    fork = store.sessions.fork(origin, None, store.leases)

    assert fork.head is None and fork.forked_from == ForkedFrom(origin, None)
    assert store.sessions.history(fork.session_id) == []


def test_a_fork_stays_whole_when_its_origin_is_deleted(
    store: Store, open_session: OpenSession, take_turn: TakeTurn, db_path: Path
) -> None:
    origin = open_session().session_id
    take_turn(origin, "one")
    last, _ = take_turn(origin, "two")
    fork = store.sessions.fork(origin, last, store.leases)
    before = rows(db_path, fork.session_id)

    store.sessions.delete(origin, store.leases)

    assert rows(db_path, origin) == dict.fromkeys(before, 0)
    assert rows(db_path, fork.session_id) == before
    assert prompts(store, fork.session_id) == ["one", "two"]
    assert store.sessions.get(fork.session_id).forked_from == ForkedFrom(origin, last)
    take_turn(fork.session_id, "three")
    assert prompts(store, fork.session_id) == ["one", "two", "three"]


def test_a_fork_at_a_running_turn_is_refused(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    origin = open_session().session_id
    turn_id, _, _ = store.runs.begin(origin, "still going")

    with pytest.raises(Conflict) as refused:
        store.sessions.fork(origin, turn_id, store.leases)

    assert refused.value.data["turnId"] == turn_id
    assert [s.session.session_id for s in store.sessions.page(None, 10, None)[0]] == [origin]


def test_a_fork_at_a_turn_of_another_session_or_none_is_refused(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    a, b = open_session().session_id, open_session().session_id
    turn_in_b, _ = take_turn(b, "b's")

    with pytest.raises(InvalidParams):
        store.sessions.fork(a, turn_in_b, store.leases)
    with pytest.raises(NotFound):
        store.sessions.fork(a, "t-nope", store.leases)
    with pytest.raises(NotFound):
        store.sessions.fork("s-nope", None, store.leases)


def test_delete_removes_all_the_session_owns_and_nothing_else(
    store: Store, open_session: OpenSession, take_turn: TakeTurn, db_path: Path
) -> None:
    doomed, kept = open_session().session_id, open_session().session_id
    _, run = take_turn(doomed, "one")
    store.runs.add_event(run, "retry", 1, {})
    take_turn(kept, "kept")
    kept_rows = rows(db_path, kept)

    store.sessions.delete(doomed, store.leases)

    assert rows(db_path, doomed) == dict.fromkeys(kept_rows, 0)
    assert rows(db_path, kept) == kept_rows
    with pytest.raises(NotFound):
        store.sessions.get(doomed)
    assert [s.session.session_id for s in store.sessions.page(None, 10, None)[0]] == [kept]


def test_delete_is_refused_while_another_live_daemon_writes_the_session(
    store: Store, open_store: OpenStore, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session_id = open_session().session_id
    take_turn(session_id, "one")
    other = open_store()

    with pytest.raises(LeaseHeld) as refused:
        other.sessions.delete(session_id, other.leases)

    assert refused.value.data["ownerPid"] == store.leases.pid
    assert prompts(other, session_id) == ["one"]
    store.leases.release(session_id)
    other.sessions.delete(session_id, other.leases)
    with pytest.raises(NotFound):
        store.sessions.get(session_id)


def test_rename_and_instructions_are_kept_with_the_session(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session_id = open_session(title="first").session_id

    store.sessions.rename(session_id, "second", store.leases)
    store.sessions.instruct(session_id, "Answer in French.", store.leases)

    got = store.sessions.get(session_id)
    assert (got.title, got.instructions) == ("second", "Answer in French.")


def test_changed_instructions_are_recorded_by_the_next_run_only(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session_id = open_session().session_id
    store.sessions.instruct(session_id, "Be brief.", store.leases)

    _, first = take_turn(session_id, "one")
    _, second = take_turn(session_id, "two")
    store.sessions.instruct(session_id, None, store.leases)
    _, third = take_turn(session_id, "three")

    def recorded(run_id: str) -> list[object]:
        return [e.detail for e in store.runs.events(run_id) if e.kind == "instructions"]

    assert recorded(first) == [{"instructions": "Be brief."}]
    assert recorded(second) == []
    assert recorded(third) == [{"instructions": None}]


def test_the_feed_lists_every_commit_in_order_a_page_at_a_time(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session_id = open_session().session_id
    turn_id, run_id, _ = store.runs.begin(session_id, "one")
    store.runs.add_event(run_id, "model", None, {"model": "m"})
    store.runs.add_step(run_id, Step(1, "reply", "one", "hi", None, None, Tokens(1, 1, 0)))
    store.runs.finish(run_id, "finished")
    take_turn(session_id, "two")

    entries, more = store.sessions.feed(session_id, 0, 100)

    assert more is None
    assert [e.seq for e in entries] == list(range(1, 8))
    assert [e.kind for e in entries[:4]] == [
        FeedKind.TURN_STARTED,
        FeedKind.EVENT,
        FeedKind.STEP,
        FeedKind.TURN_ENDED,
    ]
    assert (entries[0].turn_id, entries[0].prompt, entries[0].parent_turn_id) == (
        turn_id,
        "one",
        None,
    )
    assert entries[1].event is not None and entries[1].event.detail == {"model": "m"}
    assert entries[2].step is not None and entries[2].step.text == "hi"
    assert entries[3].outcome == "finished"
    assert entries[4].parent_turn_id == turn_id
    first, after = store.sessions.feed(session_id, 0, 3)
    rest, end = store.sessions.feed(session_id, 3, 3)
    last, none = store.sessions.feed(session_id, 6, 3)
    assert (after, end, none) == (3, 6, None)
    assert [e.seq for e in first + rest + last] == list(range(1, 8))
    assert store.sessions.feed(session_id, 7, 3) == ([], None)


def test_a_resumed_turn_ends_again_in_the_feed(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session_id = open_session().session_id
    _, run_id, _ = store.runs.begin(session_id, "one")
    store.runs.finish(run_id, "interrupted", "stopped")
    store.runs.resume(run_id)
    store.runs.finish(run_id, "finished")

    ends = [e for e in store.sessions.feed(session_id, 0, 100)[0] if e.kind == "turnEnded"]

    assert [(e.outcome, e.error) for e in ends] == [("interrupted", "stopped"), ("finished", None)]


def test_a_run_s_events_are_read_a_page_at_a_time(store: Store, open_session: OpenSession) -> None:
    session_id = open_session().session_id
    _, run_id, _ = store.runs.begin(session_id, "one")
    for n in range(5):
        store.runs.add_event(run_id, "retry", None, {"n": n})

    page, after = store.runs.events_page(run_id, 0, 2)
    rest, none = store.runs.events_page(run_id, 2, 10)

    assert [e.detail["n"] for e in page] == [0, 1] and after == 2
    assert [e.detail["n"] for e in rest] == [2, 3, 4] and none is None
    assert store.runs.events_page(run_id, 4, -1)[0][0].detail == {"n": 4}


def test_an_older_store_s_feed_is_filled_in_when_it_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    con = apsw.Connection(str(path))
    for number, migration in enumerate(MIGRATIONS[:5], 1):
        con.execute(migration)
        con.pragma("user_version", number)
    con.execute(
        "INSERT INTO session(id, root, title, head, created_at, updated_at)"
        " VALUES ('s-1', '/w', 't', 't-1', '2026-01-01T00:00:00.000', '2026-01-01T00:00:00.000');"
        "INSERT INTO turn VALUES ('t-1', 's-1', NULL, 'hello', '2026-01-01T00:00:01.000');"
        "INSERT INTO run(id, turn_id, outcome, pid, started_at, ended_at) VALUES"
        " ('r-1', 't-1', 'finished', 1, '2026-01-01T00:00:01.000', '2026-01-01T00:00:03.000');"
        "INSERT INTO step(run_id, n, decision, text, created_at) VALUES"
        " ('r-1', 1, 'reply', 'hi', '2026-01-01T00:00:02.500');"
        "INSERT INTO event(run_id, seq, kind, detail, created_at) VALUES"
        " ('r-1', 1, 'model', '{}', '2026-01-01T00:00:02.000')"
    )
    con.close()

    store = Store(path, lambda pid: False)
    try:
        entries, _ = store.sessions.feed("s-1", 0, 10)
        assert [(e.seq, e.kind) for e in entries] == [
            (1, "turnStarted"),
            (2, "event"),
            (3, "step"),
            (4, "turnEnded"),
        ]
        assert entries[3].outcome == "finished"
        assert store.sessions.get("s-1").forked_from is None
    finally:
        store.close()


def test_delete_is_refused_while_a_turn_begun_here_runs(
    store: Store, open_session: OpenSession
) -> None:
    session_id = open_session().session_id
    turn_id, run_id, _ = store.runs.begin(session_id, "still going")

    with pytest.raises(Conflict) as refused:
        store.sessions.delete(session_id, store.leases)

    assert refused.value.data == {"sessionId": session_id, "turnId": turn_id}
    store.runs.finish(run_id, "finished")
    store.sessions.delete(session_id, store.leases)


def test_a_fork_after_a_step_keeps_what_the_turn_committed_before_its_next_step(
    store: Store, open_session: OpenSession
) -> None:
    origin = open_session().session_id
    turn_id, run_id, _ = store.runs.begin(origin, "three steps")
    store.runs.add_event(run_id, "model", None, {"model": "m"})
    for n in (1, 2, 3):
        if n == 3:
            store.runs.add_event(run_id, "steered", 3, {"text": "faster"})
        store.runs.add_step(run_id, Step(n, "reply", None, f"step {n}", None, None, Tokens()))
    store.runs.finish(run_id, "paused")  # paused after its last step, then resumed
    store.runs.resume(run_id)
    store.runs.finish(run_id, "finished")
    store.runs.add_event(run_id, "reverted", None, {"files": []})  # after its end

    def cut(step: int) -> tuple[list[str], list[str], list[tuple[str, str | None]]]:
        fork = store.sessions.fork(origin, turn_id, store.leases, step)
        assert store.sessions.verify(fork.session_id).ok
        copy = store.sessions.history(fork.session_id)[-1]
        assert copy.outcome == "forked" and copy.turn_id == fork.head
        steps = [s.text for s in store.runs.steps(copy.run_id)]
        events = [e.kind for e in store.runs.events(copy.run_id)]
        entries, _ = store.sessions.feed(fork.session_id, 0, 100)
        fed = [(e.kind, e.outcome or (e.event.kind if e.event else None)) for e in entries]
        return steps, events, fed

    steps, events, fed = cut(2)
    assert steps == ["step 1", "step 2"] and events == ["model"]
    assert fed == [
        ("turnStarted", None),
        ("event", "model"),
        ("step", None),
        ("step", None),
        ("turnEnded", "forked"),
    ]
    steps, events, fed = cut(3)  # every step, and what came before its first end
    assert steps == ["step 1", "step 2", "step 3"] and events == ["model", "steered"]
    assert fed[-2:] == [("step", None), ("turnEnded", "forked")]
    steps, events, _ = cut(0)
    assert steps == [] and events == ["model"]
    with pytest.raises(InvalidParams) as past:
        store.sessions.fork(origin, turn_id, store.leases, 4)
    assert past.value.data == {"field": "step", "turnId": turn_id, "steps": 3}
    assert store.sessions.history(origin)[-1].outcome == "finished"
