"""What a fork and a session file carry besides the conversation: each turn's change sets
(with the file contents they need) and the session's budget; and the log covering change sets,
so a change row edited or deleted by hand is found."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.unit.store.conftest import OpenSession, TakeTurn
from tests.unit.store.test_store_archive import export, import_, lines, refusal, seal
from trellisd.changes import ABSENT, Content
from trellisd.processes import pid_alive
from trellisd.records import Budget, ProviderChoice
from trellisd.store import Store
from trellisd.store import db as store_db
from trellisd.store.migrations import MIGRATIONS, _log_changes

GOLDEN = Path(__file__).parents[2] / "fixtures" / "session-v2.trellisd"
V1, V2, V3 = Content.of(b"one\n"), Content.of(b"one\ntwo\n"), Content.of(b"one\ntwo\nthree\n")
PICTURE = Content.of(b"\x89PNG\0\0")


@pytest.fixture
def changed(store: Store, open_session: OpenSession, take_turn: TakeTurn) -> tuple[str, list[str]]:
    """A session of three turns that wrote files (a text file three times, a binary file, a
    file deleted) and a budget; ``(session_id, turn_ids)``."""
    sid = open_session().session_id
    store.budgets.set(sid, Budget(tokens=5000, usd=1.5), store.leases)
    turns = []
    for files in (
        [("a.txt", ABSENT, V1), ("logo.png", ABSENT, PICTURE)],
        [("a.txt", V1, V2)],
        [("a.txt", V2, V3), ("logo.png", PICTURE, ABSENT)],
    ):
        turn_id, run_id = take_turn(sid, "change")
        store.changes.record(run_id, 1, "tool", files)
        turns.append(turn_id)
    return sid, turns


def change_sets(store: Store, turn_ids: list[str]) -> list[list[tuple[Any, ...]]]:
    """Each turn's changes as a user reads them: path, source, step, and each side's text."""
    out = []
    for turn_id in turn_ids:
        out.append(
            [
                (
                    c.path,
                    c.source,
                    c.step,
                    store.changes.load(c.before).data,
                    store.changes.load(c.after).data,
                    c.after.kind,
                    c.after.sha256,
                )
                for c in store.changes.of_turns([turn_id])
            ]
        )
    return out


def history_ids(store: Store, session_id: str) -> list[str]:
    return [t.turn_id for t in store.sessions.history(session_id)]


def test_a_forks_inherited_turns_have_the_origins_change_sets_and_outlive_it(
    store: Store, changed: tuple[str, list[str]]
) -> None:
    sid, turns = changed
    fork = store.sessions.fork(sid, turns[1], store.leases)
    inherited = history_ids(store, fork.session_id)

    assert change_sets(store, inherited) == change_sets(store, turns[:2])
    assert store.sessions.verify(fork.session_id).ok
    assert store.sessions.verify(sid).ok

    store.sessions.delete(sid, store.leases)
    assert change_sets(store, inherited)[1] == [
        ("a.txt", "tool", 1, V1.data, V2.data, "text", V2.sha256)
    ]


def test_a_fork_starts_with_the_origins_budget_and_keeps_its_own(
    store: Store, changed: tuple[str, list[str]]
) -> None:
    sid, turns = changed
    fork = store.sessions.fork(sid, turns[0], store.leases)
    assert store.budgets.get(fork.session_id) == Budget(tokens=5000, usd=1.5)

    store.budgets.set(sid, Budget(tokens=10), store.leases)
    store.budgets.set(fork.session_id, None, store.leases)
    assert store.budgets.get(fork.session_id) is None
    assert store.budgets.get(sid) == Budget(tokens=10)


@pytest.mark.parametrize("as_new", [False, True])
def test_an_imported_session_has_the_change_sets_contents_and_budget(
    store: Store, other: Store, changed: tuple[str, list[str]], tmp_path: Path, as_new: bool
) -> None:
    sid, turns = changed
    path = tmp_path / "changed.trellisd"
    export(store, sid, path)

    imported = import_(other, path, as_new=as_new)

    assert lines(path)[0]["version"] == 2
    assert change_sets(other, history_ids(other, imported)) == change_sets(store, turns)
    assert other.budgets.get(imported) == Budget(tokens=5000, usd=1.5)
    verdict = other.sessions.verify(imported)
    assert verdict.ok, verdict.reason
    # V1, V2 and V3 each once; the binary file is listed by its digest, not kept
    assert [r["type"] for r in lines(path)].count("blob") == 3


def test_contents_are_stored_once_and_as_deltas_on_import(
    store: Store, other: Store, open_session: OpenSession, take_turn: TakeTurn, tmp_path: Path
) -> None:
    sid = open_session().session_id
    text = [f"line {i} of a long file that a turn rewrites again and again\n" for i in range(3000)]
    previous = ABSENT
    for i in range(10):
        text[i * 100] = f"line {i * 100} changed by turn {i}\n"
        content = Content.of("".join(text).encode())
        _, run_id = take_turn(sid, f"rewrite {i}")
        store.changes.record(run_id, 1, "tool", [("big.txt", previous, content)])
        previous = content
    path = tmp_path / "big.trellisd"
    export(store, sid, path)

    import_(other, path, as_new=True)
    import_(other, path, as_new=True)

    assert other.db.con.execute("SELECT count(*) FROM blob").fetchone() == (10,)
    assert other.changes.stored_bytes() < 2 * store.changes.stored_bytes()


def test_a_session_without_change_sets_is_written_as_version_1(
    store: Store, open_session: OpenSession, take_turn: TakeTurn, tmp_path: Path
) -> None:
    sid = open_session().session_id
    take_turn(sid, "just talk")
    path = tmp_path / "talk.trellisd"
    export(store, sid, path)
    assert lines(path)[0]["version"] == 1
    assert {r["type"] for r in lines(path)}.isdisjoint({"change", "blob"})


def tampered(path: Path, kind: str, edit: Any, which: str = "") -> None:
    """The file with the first record of ``kind`` (of the file at path ``which``) changed by
    ``edit`` (None: removed) and its end line made right again, as someone covering their
    tracks would."""
    records = lines(path)
    at = next(
        i for i, r in enumerate(records) if r["type"] == kind and r.get("path", which) == which
    )
    if edit is None:
        del records[at]
    else:
        edit(records[at])
    seal(path, records)


@pytest.fixture
def exported(store: Store, changed: tuple[str, list[str]], tmp_path: Path) -> Path:
    path = tmp_path / "changed.trellisd"
    export(store, changed[0], path)
    return path


def test_a_damaged_file_with_change_sets_is_refused_by_its_digest(
    other: Store, exported: Path
) -> None:
    """The same records in other bytes: only the end line's digest can tell."""
    raw = exported.read_bytes()
    exported.write_bytes(raw.replace(b'"type":"blob"', b'"type": "blob"', 1))
    assert refusal(other, exported).data["check"] == "digest"


@pytest.mark.parametrize(
    ("kind", "which", "edit", "check", "says"),
    [
        ("change", "a.txt", lambda r: r.update(path="b.txt"), "log", "does not match its hash"),
        ("change", "a.txt", lambda r: r.update(step=2), "log", "does not match its hash"),
        ("change", "logo.png", lambda r: r.update(afterSize=1), "log", "does not match its hash"),
        ("change", "logo.png", None, "log", "its change row is missing"),
        (
            "change",
            "a.txt",
            lambda r: r.update(afterSha256="0" * 64),
            "reference",
            "is named by no change before it",
        ),
        (
            "blob",
            "",
            lambda r: r.update(data="eJwrycgsVgAi5ZLU4hIAIEwFAw=="),  # zlib of "this is fine"
            "content",
            "does not match its SHA-256 and size",
        ),
        ("blob", "", lambda r: r.update(data="not base64!"), "content", "changed or damaged"),
        ("blob", "", None, "reference", "which the file does not hold"),
        ("change", "a.txt", lambda r: r.update(path="../.bashrc"), "record", "change.path must"),
        ("change", "a.txt", lambda r: r.update(source="magic"), "record", "change.source must"),
        (
            "change",
            "a.txt",
            lambda r: r.update(beforeKind="weird"),
            "record",
            "change.beforeKind must be one of absent, text, binary, tooLarge",
        ),
    ],
)
def test_a_tampered_change_set_is_refused_and_nothing_is_imported(
    other: Store, exported: Path, kind: str, which: str, edit: Any, check: str, says: str
) -> None:
    tampered(exported, kind, edit, which)
    refused = refusal(other, exported)
    assert refused.data["check"] == check, refused.message
    assert says in refused.message


def test_a_change_twice_is_refused(other: Store, exported: Path) -> None:
    """The log names each change once: a copy of a change would pass it unnoticed."""
    records = lines(exported)
    at = next(i for i, r in enumerate(records) if r["type"] == "change")
    seal(exported, [*records[: at + 1], records[at], *records[at + 1 :]])
    refused = refusal(other, exported)
    assert refused.data["check"] == "reference" and "appears twice" in refused.message


def test_a_blob_too_large_for_what_it_says_is_not_inflated(other: Store, exported: Path) -> None:
    bomb = base64.b64encode(zlib.compress(b"x" * (64 * 1024 * 1024))).decode()
    tampered(exported, "blob", lambda r: r.update(data=bomb))
    assert refusal(other, exported).data["check"] == "content"


def test_a_budget_is_checked_on_import_and_an_early_string_form_is_read(
    other: Store, exported: Path
) -> None:
    budget = lines(exported)[1]["budget"]
    assert budget == {"tokens": 5000, "usd": 1.5}
    tampered(exported, "session", lambda r: r.update(budget={"tokens": 0}))
    assert refusal(other, exported).data["check"] == "record"

    tampered(exported, "session", lambda r: r.update(budget=json.dumps(budget)))
    sid = import_(other, exported, as_new=True)
    assert other.budgets.get(sid) == Budget(tokens=5000, usd=1.5)


def test_the_log_covers_each_change_row(
    store: Store, changed: tuple[str, list[str]], db_path: Path
) -> None:
    sid, _ = changed
    assert store.sessions.reopen(sid, store.leases, None)[3] == "ok"
    con = apsw.Connection(str(db_path))
    try:
        (first,) = con.execute("SELECT min(id) FROM change").fetchone()
        con.execute("UPDATE change SET after_sha256 = before_sha256 WHERE id = ?", (first,))
        verdict = store.sessions.verify(sid)
        assert not verdict.ok and verdict.first_bad is not None
        assert (verdict.first_bad.kind, verdict.first_bad.id) == ("change", str(first))
        assert "its change does not match its hash" in (verdict.reason or "")

        (last,) = con.execute("SELECT max(id) FROM change").fetchone()
        con.execute("UPDATE change SET after_sha256 = ? WHERE id = ?", (V1.sha256, first))
        assert store.sessions.verify(sid).ok
        con.execute("DELETE FROM change WHERE id = ?", (last,))
        verdict = store.sessions.verify(sid)
        assert not verdict.ok and verdict.reason == "its change row is missing"
        assert store.sessions.reopen(sid, store.leases, None)[3] == "broken"
    finally:
        con.close()


def test_an_existing_stores_change_sets_join_their_logs_in_the_migration(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose logs were computed before change sets were logged: the migration appends
    each change to its session's log, and every log verifies."""
    monkeypatch.setattr(store_db, "MIGRATIONS", MIGRATIONS[: MIGRATIONS.index(_log_changes)])
    old = Store(db_path, pid_alive)
    old.leases.register()
    sid = old.sessions.create("/w", "old", ProviderChoice(), old.leases.daemon_id).session_id
    turn_id, run_id, _ = old.runs.begin(sid, "write")
    old.runs.finish(run_id, "finished")
    with old.db.write() as con:  # as the store recorded changes before they were logged
        for path in ("a.txt", "b.txt"):
            con.execute(
                "INSERT INTO change(run_id, step, path, source, before_kind, before_size,"
                " after_kind, after_sha256, after_size, created_at)"
                " VALUES (?, 1, ?, 'tool', 'absent', 0, 'binary', ?, 6, 'x')",
                (run_id, path, PICTURE.sha256),
            )
    entries = old.sessions.verify(sid).entries
    old.close()
    monkeypatch.undo()

    store = Store(db_path, pid_alive)
    try:
        verdict = store.sessions.verify(sid)
        assert verdict.ok, verdict.reason
        assert verdict.entries == entries + 2
        assert [c.path for c in store.changes.of_turns([turn_id])] == ["a.txt", "b.txt"]
    finally:
        store.close()


def test_the_version_2_golden_file_keeps_importing(other: Store) -> None:
    """A file with change sets, as this version wrote it: every later trellisd imports it."""
    sid = import_(other, GOLDEN)
    first, second = history_ids(other, sid)
    assert change_sets(other, [first, second]) == [
        [
            ("a.txt", "tool", 1, None, V1.data, "text", V1.sha256),
            ("logo.png", "tool", 1, None, None, "binary", PICTURE.sha256),
        ],
        [("a.txt", "command", 1, V1.data, V2.data, "text", V2.sha256)],
    ]
    assert other.budgets.get(sid) == Budget(tokens=50000, usd=2.0)
    assert other.sessions.verify(sid).ok
