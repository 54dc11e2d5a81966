"""Finding sessions by their title, prompts and replies."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from tests.unit.store.conftest import OpenSession, OpenStore, TakeTurn
from trellisd.errors import InvalidParams
from trellisd.processes import pid_alive
from trellisd.records import SessionSummary, Step, Tokens
from trellisd.store import Store
from trellisd.store.migrations import MIGRATIONS
from trellisd.store.search import SessionSearch


def found(store: Store, query: str, root: str | None = None) -> list[str]:
    return [s.session.title for s in store.search.page(query, root, 100, None)[0]]


def test_a_search_finds_sessions_by_title_prompt_and_reply_with_the_turn_that_matched(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    open_session(title="Flaky websocket tests")
    prompted = open_session(title="prompted")
    take_turn(prompted.session_id, "hello")
    asked, _ = take_turn(prompted.session_id, "why does the websocket drop?")
    replied = open_session(title="replied")
    answered, _ = take_turn(
        replied.session_id,
        "what broke",
        Step(1, "reply", None, "The Websocket closed after 30 s idle.", None, None, Tokens()),
    )
    open_session(title="unrelated")

    hits = {s.session.title: s for s in store.search.page("websocket", None, 10, None)[0]}
    assert set(hits) == {"Flaky websocket tests", "prompted", "replied"}
    assert hits["Flaky websocket tests"].match is not None
    assert hits["Flaky websocket tests"].match.turn_id is None
    assert hits["Flaky websocket tests"].match.snippet == "Flaky «websocket» tests"
    assert hits["prompted"].match is not None and hits["prompted"].match.turn_id == asked
    assert hits["replied"].match is not None and hits["replied"].match.turn_id == answered
    assert "«Websocket»" in hits["replied"].match.snippet
    assert hits["prompted"].turns == 2


def test_every_word_must_match_and_the_last_matches_as_a_prefix(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    open_session(title="refactor the parser")
    open_session(title="parser crash")
    assert found(store, "parser refact") == ["refactor the parser"]
    assert found(store, "refact parser") == []  # only the last word is a prefix
    assert sorted(found(store, "PARSER")) == ["parser crash", "refactor the parser"]


def test_a_title_ranks_before_a_passing_mention(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    mention = open_session(title="misc")
    take_turn(mention.session_id, "a long prompt that mentions migrations once among many words")
    open_session(title="migrations")
    assert found(store, "migrations") == ["migrations", "misc"]


def test_the_index_follows_titles_turns_and_replies_as_they_are_committed(
    store: Store, open_session: OpenSession
) -> None:
    session = open_session()
    assert found(store, "zeppelin") == []
    turn_id, run_id, _ = store.runs.begin(
        session.session_id, "zeppelin facts", title="zeppelin facts"
    )
    assert found(store, "zeppelin") == ["zeppelin facts"]  # the title, from the first turn
    store.runs.add_step(run_id, Step(1, "reply", None, "Hindenburg ", None, None, Tokens()))
    assert found(store, "hindenburg") == ["zeppelin facts"]
    store.runs.add_step(run_id, Step(2, "reply", None, "burned in 1937", None, None, Tokens()))
    hit = store.search.page("1937", None, 10, None)[0][0]
    assert hit.match is not None and hit.match.turn_id == turn_id
    assert hit.match.snippet == "Hindenburg burned in «1937»"


@pytest.mark.parametrize(
    "query",
    ['"', "*", "a AND (", "NEAR(a b)", "title:x", "^x", "-x", "x\x00y", '"unterminated', "{a b}"],
)
def test_any_text_is_a_query_never_a_syntax_error(
    store: Store, open_session: OpenSession, query: str
) -> None:
    open_session(title='a AND ( "unterminated x')
    store.search.page(query, None, 10, None)  # no error


def test_a_query_of_no_words_is_refused_naming_the_field(store: Store) -> None:
    with pytest.raises(InvalidParams) as caught:
        store.search.page("  \t ", None, 10, None)
    assert caught.value.data == {"field": "query"}


def test_hits_come_a_page_at_a_time_each_once(store: Store, open_session: OpenSession) -> None:
    for n in range(7):
        open_session(title=f"release {n}" + " notes" * n)
    seen: list[SessionSummary] = []
    page, cursor = store.search.page("release", None, 3, None)
    seen += page
    while cursor:
        page, cursor = store.search.page("release", None, 3, cursor)
        seen += page
    assert len(seen) == 7 == len({s.session.session_id for s in seen})
    with pytest.raises(InvalidParams):
        store.sessions.page(None, 3, store.search.page("release", None, 3, None)[1])


def test_root_narrows_a_search(store: Store, open_session: OpenSession) -> None:
    open_session(root="/a", title="deploy")
    open_session(root="/b", title="deploy")
    assert [s.session.root for s in store.search.page("deploy", "/b", 10, None)[0]] == ["/b"]


def test_the_migration_indexes_what_the_store_had_before(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    con = apsw.Connection(str(path))
    for number, migration in enumerate(MIGRATIONS[:5]):
        con.execute(migration)
        con.pragma("user_version", number + 1)
    con.execute(
        "INSERT INTO session(id, root, title, created_at, updated_at) VALUES"
        " ('s-old', '/w', 'old title', 'x', 'x');"
        "INSERT INTO turn(id, session_id, prompt, created_at) VALUES"
        " ('t-old', 's-old', 'an old prompt', 'x');"
        "INSERT INTO run(id, turn_id, outcome, pid, started_at) VALUES"
        " ('r-old', 't-old', 'finished', 1, 'x');"
        "INSERT INTO step(run_id, n, decision, text, created_at) VALUES"
        " ('r-old', 1, 'reply', 'an old answer', 'x');"
    )
    con.close()
    store = Store(path, pid_alive)
    try:
        assert found(store, "title") == ["old title"]
        (hit,) = store.search.page("answer", None, 10, None)[0]
        assert hit.match is not None and hit.match.turn_id == "t-old"
    finally:
        store.close()


def test_a_search_over_a_store_opened_again_finds_the_same(
    open_store: OpenStore, open_session: OpenSession
) -> None:
    open_session(title="persisted")
    assert found(open_store(), "persisted") == ["persisted"]


def test_of_a_word_found_everywhere_the_newest_turns_are_ranked(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    for n in range(4):
        take_turn(open_session(title=f"session {n}").session_id, "the build again")
    assert sorted(found(store, "build")) == [f"session {n}" for n in range(4)]
    newest = store.search.page("build", None, 10, None, depth=2)[0]
    assert sorted(s.session.title for s in newest) == ["session 2", "session 3"]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        (" ".join(["word"] * 65), "query must be at most 64 words and 4 KiB, not 65 words"),
        ("w" * 4097, "query must be at most 64 words and 4 KiB, not 4,097 bytes"),
        ("é" * 2049, "query must be at most 64 words and 4 KiB, not 4,098 bytes"),
        ("a\ud800b", "query is not valid Unicode text: it holds a lone surrogate"),
    ],
)
def test_a_query_past_the_limits_is_refused_before_it_is_searched(
    store: Store, query: str, says: str
) -> None:
    with pytest.raises(InvalidParams) as caught:
        store.search.page(query, None, 10, None)
    assert caught.value.message == says
    assert caught.value.data == {"field": "query"}


def test_a_query_at_the_limits_is_searched(store: Store, open_session: OpenSession) -> None:
    open_session(title="word")
    assert found(store, " ".join(["word"] * 64)) == ["word"]
    assert found(store, "word " + "w" * (4096 - 5)) == []


def test_a_search_past_its_time_budget_is_stopped_and_the_store_serves_on(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    for n in range(40):
        session = open_session(title=f"session {n} about parsers")
        take_turn(session.session_id, f"parse the parser of module {n}")
    ticks = iter(range(0, 10**9, 10))  # each look at the clock finds 10 s gone by
    slow = SessionSearch(store.db, budget=5.0, clock=lambda: float(next(ticks)))

    with pytest.raises(InvalidParams) as caught:
        slow.page("parser", None, 10, None)

    assert caught.value.message == (
        "the search took longer than 5 s and was stopped, so that the store stays free for other"
        " requests: search for fewer or rarer words"
    )
    assert caught.value.data == {"field": "query"}
    # The connection is left as it was: the next search (with time to spare) answers.
    assert len(store.search.page("parser", None, 100, None)[0]) == 40
