"""History and the turn tree a page at a time: the newest page of the path first, stable
while the head moves."""

from __future__ import annotations

import pytest

from tests.unit.store.conftest import OpenSession, TakeTurn
from trellisd.errors import InvalidParams
from trellisd.records import Turn
from trellisd.store import Store


def prompts(turns: list[Turn]) -> list[str]:
    return [t.prompt for t in turns]


def test_history_pages_from_the_head_back_to_the_first_turn(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    for i in range(7):
        take_turn(session.session_id, f"p{i}")

    pages, cursor = [], None
    while True:
        page, cursor = store.sessions.history_page(session.session_id, 3, cursor)
        pages.append(prompts(page))
        if cursor is None:
            break

    assert pages == [["p4", "p5", "p6"], ["p1", "p2", "p3"], ["p0"]]
    assert [t.prompt for t in store.sessions.history(session.session_id)] == [
        f"p{i}" for i in range(7)
    ]


def test_a_history_cursor_stays_valid_when_the_head_moves(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    ids = [take_turn(session.session_id, f"p{i}")[0] for i in range(5)]
    _, cursor = store.sessions.history_page(session.session_id, 2, None)
    store.sessions.branch(session.session_id, ids[1], store.leases)
    take_turn(session.session_id, "other line")

    older, _ = store.sessions.history_page(session.session_id, 10, cursor)

    assert prompts(older) == ["p0", "p1", "p2"]


def test_an_empty_session_has_one_empty_page(store: Store, open_session: OpenSession) -> None:
    session = open_session()
    assert store.sessions.history_page(session.session_id, 5, None) == ([], None)
    assert store.sessions.turns_page(session.session_id, 5, None) == ([], None)


def test_the_turn_tree_pages_oldest_first(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    ids = [take_turn(session.session_id, f"p{i}")[0] for i in range(3)]
    store.sessions.branch(session.session_id, ids[0], store.leases)
    take_turn(session.session_id, "b1")
    take_turn(session.session_id, "b2")

    pages, cursor = [], None
    while True:
        page, cursor = store.sessions.turns_page(session.session_id, 2, cursor)
        pages.append(prompts(page))
        if cursor is None:
            break

    assert pages == [["p0", "p1"], ["p2", "b1"], ["b2"]]


def test_a_cursor_from_elsewhere_is_refused(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    for i in range(3):
        take_turn(session.session_id, f"p{i}")
    _, turns_cursor = store.sessions.turns_page(session.session_id, 1, None)
    assert turns_cursor is not None
    for bad in ("not a cursor", turns_cursor):
        with pytest.raises(InvalidParams) as refused:
            store.sessions.history_page(session.session_id, 1, bad)
        assert refused.value.data == {"field": "cursor"}
    other = open_session()
    _, history_cursor = store.sessions.history_page(session.session_id, 1, None)
    assert history_cursor is not None
    with pytest.raises(InvalidParams, match="belongs to another session"):
        store.sessions.history_page(other.session_id, 1, history_cursor)
