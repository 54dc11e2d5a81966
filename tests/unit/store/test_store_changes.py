"""Change sets in the store: texts once each, compressed, as deltas; read back in order."""

from __future__ import annotations

from tests.unit.store.conftest import OpenSession, TakeTurn
from trellisd.changes import ABSENT, Content
from trellisd.store import Store


def _text(n: int, changed: int) -> bytes:
    lines = [f"line {i:05d} of a file that a turn rewrites, with some words\n" for i in range(n)]
    lines[changed] = f"line {changed:05d} was changed here\n"
    return "".join(lines).encode()


def test_changes_read_back_in_order_with_their_text(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    turn_id, run_id = take_turn(session.session_id, "write")
    one, two = Content.of(b"one\n"), Content.of(b"two\n")
    store.changes.record(run_id, 1, "tool", [("a.txt", ABSENT, one)])
    store.changes.record(
        run_id, 2, "command", [("a.txt", one, two), ("b.bin", ABSENT, Content.of(b"\0"))]
    )
    found = store.changes.of_turns([turn_id])
    assert [(c.path, c.step, c.source) for c in found] == [
        ("a.txt", 1, "tool"),
        ("a.txt", 2, "command"),
        ("b.bin", 2, "command"),
    ]
    assert found[1].before.data is None  # not read until asked for
    assert store.changes.load(found[1].before).data == b"one\n"
    assert store.changes.load(found[1].after).data == b"two\n"
    assert store.changes.load(found[2].after).data is None  # binary: listed, not kept


def test_rewrites_of_a_file_cost_their_deltas_not_whole_copies(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    versions = [Content.of(_text(1500, i)) for i in range(40)]
    for i in range(1, len(versions)):
        _, run_id = take_turn(session.session_id, f"rewrite {i}")
        store.changes.record(run_id, 1, "tool", [("big.txt", versions[i - 1], versions[i])])
    whole = len(versions[0].data or b"")
    assert store.changes.stored_bytes() < whole  # 40 versions of ~100 KiB in less than one
    for version in (versions[0], versions[17], versions[-1]):
        assert store.changes.load(Content(version.kind, version.sha256, version.size)).data == (
            version.data
        )


def test_a_text_is_stored_once_across_turns_and_sessions(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    same = Content.of(_text(500, 3))
    for title in ("first", "second"):
        session = open_session(title=title)
        _, run_id = take_turn(session.session_id, "write")
        store.changes.record(run_id, 1, "tool", [("x.txt", ABSENT, same)])
    with store.db.read() as con:
        assert con.execute("SELECT count(*) FROM blob").fetchone() == (1,)
