"""Rules kept in the store beside exact grants: kind ``rule`` and the rule as compact JSON in
the one table, read back as rules, revoked one at a time, for a session or for its root."""

from __future__ import annotations

from tests.unit.store.conftest import OpenSession
from trellisd.store import Store
from trellisd.tools.base import Action


def test_a_rule_is_kept_as_kind_rule_and_read_back_beside_the_exact_grants(
    store: Store, open_session: OpenSession
) -> None:
    session = open_session().session_id
    root = "/work/project"
    store.grants.add(session, root, ("pytest", "**"), project=False)
    store.grants.add(session, root, Action("exec", "make test"), project=False)
    store.grants.add(session, root, ("npm", "run", "test", "**"), project=True)
    with store.db.read() as con:
        rows = con.execute(
            "SELECT scope, kind, target FROM approval_grant ORDER BY scope, kind"
        ).fetchall()
    assert [tuple(r) for r in rows] == [
        ("project", "rule", '["npm","run","test","**"]'),
        ("session", "exec", "make test"),
        ("session", "rule", '["pytest","**"]'),
    ]
    own, project = store.grants.of(session, root)
    assert own == {("pytest", "**"), Action("exec", "make test")}
    assert project == {("npm", "run", "test", "**")}
    assert store.grants.of(open_session().session_id, "/elsewhere") == (frozenset(), frozenset())

    assert store.grants.remove(session, root, ("pytest", "**"), None) == 1
    assert store.grants.remove(session, root, ("pytest", "**"), None) == 0
    assert store.grants.remove(session, root, ("npm", "run", "test", "**"), "session") == 0
    assert store.grants.of(session, root)[0] == {Action("exec", "make test")}


def test_a_rule_row_that_holds_no_rule_is_passed_over(
    store: Store, open_session: OpenSession
) -> None:
    session = open_session().session_id
    with store.db.write() as con:
        con.execute(
            "INSERT INTO approval_grant(scope, owner, kind, target, created_at)"
            " VALUES ('session', ?, 'rule', 'not json', '2026-01-01T00:00:00Z')",
            (session,),
        )
    assert store.grants.of(session, "/work/project") == (frozenset(), frozenset())
