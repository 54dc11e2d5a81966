"""The tree of turns: each turn starts at the session's head, and a branch moves the head."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from trellisd.errors import InvalidParams, NotFound
from trellisd.records import Session, Step, Tokens, ToolCall
from trellisd.store import Store

OpenSession = Callable[..., Session]
TakeTurn = Callable[..., tuple[str, str]]


def branch(store: Store, session_id: str, turn_id: str | None) -> Session:
    return store.sessions.branch(session_id, turn_id, store.leases)


def test_a_turn_starts_at_the_head_and_becomes_the_head(
    store: Store, open_session: OpenSession
) -> None:
    session = open_session()

    first, _, first_parent = store.runs.begin(session.session_id, "one")
    assert first_parent is None
    assert store.sessions.get(session.session_id).head == first

    second, _, second_parent = store.runs.begin(session.session_id, "two")
    assert second_parent == first
    assert store.sessions.get(session.session_id).head == second
    assert store.sessions.turn(session.session_id, second).parent_turn_id == first


def test_an_untitled_session_takes_the_title_its_first_turn_gives(
    store: Store, open_session: OpenSession
) -> None:
    untitled, titled = open_session(), open_session(title="mine")
    store.runs.begin(untitled.session_id, "Why does the parser\nfail?", title="Why does the parser")
    store.runs.begin(untitled.session_id, "second prompt", title="second prompt")
    store.runs.begin(titled.session_id, "some prompt", title="some prompt")

    assert store.sessions.get(untitled.session_id).title == "Why does the parser"
    assert store.sessions.get(titled.session_id).title == "mine"


def test_history_follows_parent_links_and_leaves_out_an_abandoned_branch(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    session = open_session()
    sid = session.session_id
    t1, _ = take_turn(sid, "one")
    t2, _ = take_turn(sid, "two")
    t3, _ = take_turn(sid, "three")

    branch(store, sid, t1)
    t4, _ = take_turn(sid, "two, again")
    t5, _ = take_turn(sid, "three, again")

    history = store.sessions.history(sid)
    assert [t.turn_id for t in history] == [t1, t4, t5]
    assert [t.parent_turn_id for t in history] == [None, t1, t4]
    assert [t.prompt for t in history] == ["one", "two, again", "three, again"]

    branch(store, sid, t3)
    assert [t.turn_id for t in store.sessions.history(sid)] == [t1, t2, t3]


def test_turns_lists_the_whole_tree_oldest_first(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid = open_session().session_id
    other = open_session().session_id
    t1, _ = take_turn(sid, "one")
    t2, _ = take_turn(sid, "two")
    take_turn(other, "elsewhere")
    branch(store, sid, t1)
    t3, _ = take_turn(sid, "two, again")

    turns = store.sessions.turns(sid)

    assert [t.turn_id for t in turns] == [t1, t2, t3]
    assert [t.parent_turn_id for t in turns] == [None, t1, t1]


def test_a_branch_to_no_turn_starts_a_new_root(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid = open_session().session_id
    take_turn(sid, "one")

    assert branch(store, sid, None).head is None
    assert store.sessions.history(sid) == []
    t2, _ = take_turn(sid, "fresh start")
    assert [(t.turn_id, t.parent_turn_id) for t in store.sessions.history(sid)] == [(t2, None)]


def test_a_branch_to_a_turn_of_another_session_is_refused(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid, other = open_session().session_id, open_session().session_id
    head, _ = take_turn(sid, "mine")
    foreign, _ = take_turn(other, "theirs")

    with pytest.raises(InvalidParams) as refused:
        branch(store, sid, foreign)

    assert refused.value.message == f"turn {foreign} belongs to another session"
    assert store.sessions.get(sid).head == head
    with pytest.raises(InvalidParams):
        store.sessions.turn(sid, foreign)


def test_a_branch_to_an_unknown_turn_is_not_found(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid = open_session().session_id
    head, _ = take_turn(sid, "mine")

    with pytest.raises(NotFound) as missing:
        branch(store, sid, "t-nope")

    assert missing.value.message == "unknown turn t-nope"
    assert store.sessions.get(sid).head == head


def test_a_branch_of_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        branch(store, "s-nope", None)


def test_a_turn_replies_with_what_it_said_last_and_sums_its_tokens(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid = open_session().session_id
    call = ToolCall("c1", "read_file", {"path": "a.txt"})
    turn_id, _ = take_turn(
        sid,
        "read a.txt",
        Step(1, "tool", "read a.txt", "Reading. ", call, "hello", Tokens(100, 10, 50)),
        Step(2, "reply", None, "It says hello.", None, None, Tokens(120, 5, 100)),
    )

    turn = store.sessions.turn(sid, turn_id)

    assert turn.reply == "It says hello."  # the first step's text stays in its step
    assert turn.tokens == Tokens(220, 15, 150)
    assert turn.outcome == "finished" and turn.error is None
    assert store.sessions.history(sid) == [turn]


def test_a_token_sum_is_unknown_when_any_steps_figure_is_unknown(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid = open_session().session_id
    turn_id, _ = take_turn(
        sid,
        "go",
        Step(1, "reply", "go", "partial", None, None, Tokens(100, None, 7)),
        Step(2, "reply", None, " rest", None, None, Tokens(10, 5, None)),
    )
    assert store.sessions.turn(sid, turn_id).tokens == Tokens(110, None, None)
