"""Sessions: creating, finding and listing them, newest first, a page at a time."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from trellisd.errors import InvalidParams, NotFound
from trellisd.policy import GrantSpec, LayerSpec, PolicySpec
from trellisd.records import ProviderChoice, Session
from trellisd.store import Store
from trellisd.store.db import now

OpenSession = Callable[..., Session]


def later() -> None:
    """Wait for the store's millisecond clock to tick, so the next write sorts after the
    last one (at most a millisecond, on any machine)."""
    last = now()
    while now() == last:
        pass


def listed(store: Store, root: str | None = None, limit: int = 100) -> list[str]:
    page, cursor = store.sessions.page(root, limit, None)
    assert cursor is None
    return [summary.session.session_id for summary in page]


def all_pages(store: Store, root: str | None, limit: int) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page, cursor = store.sessions.page(root, limit, cursor)
        pages.append([summary.session.session_id for summary in page])
        if cursor is None:
            return pages


def test_a_created_session_can_be_got_back(store: Store) -> None:
    created = store.sessions.create(
        "/work/a", "refactor", ProviderChoice(model="m1"), store.leases.daemon_id
    )

    got = store.sessions.get(created.session_id)

    assert got.session_id == created.session_id
    assert (got.root, got.title, got.head, got.provider) == (
        "/work/a",
        "refactor",
        None,
        ProviderChoice(model="m1"),
    )
    assert got.created_at == got.updated_at == created.created_at


def test_a_sessions_policy_is_kept_as_its_wire_shape(store: Store) -> None:
    policy = PolicySpec(
        (LayerSpec("editor", allow_read=("**",), deny_write=("*.lock",)),),
        "never",
        (GrantSpec("exec", "make test"),),
    )
    created = store.sessions.create("/work/a", "", ProviderChoice(), store.leases.daemon_id, policy)

    assert store.sessions.get(created.session_id).policy == policy
    with store.db.read() as con:
        (column,) = con.execute("SELECT policy FROM session").fetchone()
    assert json.loads(column) == {
        "layers": [{"name": "editor", "allowRead": ["**"], "denyWrite": ["*.lock"]}],
        "approval": "never",
        "grants": [{"kind": "exec", "target": "make test"}],
    }


def test_a_policy_stored_as_the_client_sent_it_reads_back(store: Store) -> None:
    """Stores written before the policy was typed hold the client's JSON as it came."""
    created = store.sessions.create("/work/a", "", ProviderChoice(), store.leases.daemon_id)
    sent = {"approval": None, "layers": [{"name": "editor", "denyExec": ["git push*"]}]}
    with store.db.write() as con:
        con.execute("UPDATE session SET policy = ?", (json.dumps(sent),))

    assert store.sessions.get(created.session_id).policy == PolicySpec(
        (LayerSpec("editor", deny_exec=("git push*",)),)
    )


def test_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound) as missing:
        store.sessions.get("s-nope")
    assert missing.value.message == "unknown session s-nope"
    assert missing.value.data == {"sessionId": "s-nope"}


def test_sessions_are_listed_newest_first_by_last_use(
    store: Store, open_session: OpenSession
) -> None:
    a = open_session()
    later()
    b = open_session()
    later()
    c = open_session()
    assert listed(store) == [c.session_id, b.session_id, a.session_id]

    later()
    store.sessions.reopen(a.session_id, store.leases, None)

    assert listed(store) == [a.session_id, c.session_id, b.session_id]


def test_a_session_summary_counts_its_turns(
    store: Store, open_session: OpenSession, take_turn: Callable[..., tuple[str, str]]
) -> None:
    session = open_session()
    take_turn(session.session_id, "one")
    take_turn(session.session_id, "two")
    page, _ = store.sessions.page(None, 10, None)
    assert [(s.session.session_id, s.turns) for s in page] == [(session.session_id, 2)]


def test_pages_follow_each_other_without_gaps_or_repeats(
    store: Store, open_session: OpenSession
) -> None:
    ids = []
    for _ in range(7):
        ids.append(open_session().session_id)
        later()

    pages = all_pages(store, None, 3)

    assert [len(page) for page in pages] == [3, 3, 1]
    assert [i for page in pages for i in page] == ids[::-1]


def test_paging_holds_when_sessions_share_a_timestamp(
    store: Store, open_session: OpenSession
) -> None:
    ids = {open_session().session_id for _ in range(25)}
    with store.db.write() as con:
        con.execute("UPDATE session SET updated_at = '2025-01-01T00:00:00.000+00:00'")

    pages = all_pages(store, None, 2)

    flat = [i for page in pages for i in page]
    assert len(flat) == len(ids) and set(flat) == ids
    assert flat == listed(store)


def test_a_full_last_page_has_no_cursor(store: Store, open_session: OpenSession) -> None:
    for _ in range(4):
        open_session()
    page, cursor = store.sessions.page(None, 4, None)
    assert len(page) == 4 and cursor is None


def test_a_cursor_not_made_by_the_store_is_refused(store: Store) -> None:
    with pytest.raises(InvalidParams) as refused:
        store.sessions.page(None, 10, "not-a-cursor")
    assert refused.value.data == {"field": "cursor"}


def test_listing_by_root_shows_only_that_folders_sessions(
    store: Store, open_session: OpenSession
) -> None:
    mine = []
    for n in range(5):
        mine.append(open_session(root="/work/mine").session_id)
        open_session(root=f"/work/other{n}")
        open_session(root="/work/mine/sub")
        later()

    assert listed(store, "/work/mine") == mine[::-1]
    assert [i for page in all_pages(store, "/work/mine", 2) for i in page] == mine[::-1]
    assert listed(store, "/work/none") == []
    assert len(listed(store)) == 15
