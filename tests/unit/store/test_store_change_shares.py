"""A command's shared marks in the store: written with the change or later, taken back, read
with the change, and gone with it."""

from __future__ import annotations

from tests.unit.store.conftest import OpenSession, TakeTurn
from trellisd.changes import ABSENT, Content
from trellisd.records import Sharer
from trellisd.store import Store

B1, C1 = Sharer("s-b", "t-b1"), Sharer("s-c", "t-c1")


def marks(store: Store, turn_id: str) -> dict[str, set[Sharer]]:
    return {c.path: set(c.shared) for c in store.changes.of_turns([turn_id])}


def test_marks_come_with_a_change_or_later_and_are_taken_back_by_path(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    turn_id, run_id = take_turn(session.session_id, "run")
    one = Content.of(b"one\n")
    files = [("a.txt", ABSENT, one), ("b.txt", ABSENT, one), ("c.txt", ABSENT, one)]
    store.changes.record(run_id, 2, "command", files, {"b.txt": [B1], "c.txt": [B1]})
    store.changes.record(run_id, 3, "tool", [("b.txt", one, ABSENT)])
    assert marks(store, turn_id) == {"a.txt": set(), "b.txt": set(), "c.txt": {B1}}
    assert [set(c.shared) for c in store.changes.of_turns([turn_id])][1] == {B1}

    store.changes.share(run_id, 2, {"a.txt": [C1], "b.txt": [C1]})
    store.changes.unshare(run_id, 2, {"c.txt": [B1], "b.txt": [B1]})
    found = store.changes.of_turns([turn_id])
    assert [(c.path, c.step, set(c.shared)) for c in found] == [
        ("a.txt", 2, {C1}),
        ("b.txt", 2, {C1}),  # the command's; the tool's change of b.txt has none
        ("c.txt", 2, set()),
        ("b.txt", 3, set()),
    ]
    store.changes.share(run_id, 3, {"b.txt": [C1]})  # a tool's change is never marked
    assert set(store.changes.of_turns([turn_id])[3].shared) == set()


def test_marks_go_with_their_session(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    _, run_id = take_turn(session.session_id, "run")
    store.changes.record(run_id, 1, "command", [("a.txt", ABSENT, ABSENT)], {"a.txt": [B1]})
    store.sessions.delete(session.session_id, store.leases)
    with store.db.read() as con:
        assert con.execute("SELECT count(*) FROM change_share").fetchone() == (0,)
