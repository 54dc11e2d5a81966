"""What an ACP client chose for a session goes with it in its session file: its mode, its
model and the requests rejected for good; a file that would bring them wrong is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.store.conftest import OpenSession, TakeTurn
from tests.unit.store.test_store_archive import export, import_, lines, refusal, seal, tree
from trellisd.acp import agent
from trellisd.changes import ABSENT, Content
from trellisd.errors import ErrorCode
from trellisd.services.policies import KEPT
from trellisd.store import Store, archive
from trellisd.store.acp_choices import MODES, AcpChoice

GOLDEN = Path(__file__).parents[2] / "fixtures" / "session-v3.trellisd"
TEXT = Content.of(b"one\n")
REJECTED = frozenset({"Write secrets.txt", "Run: rm -rf build"})


@pytest.fixture
def chosen(store: Store, open_session: OpenSession, take_turn: TakeTurn) -> str:
    """A session whose ACP client chose read-only and a model, and rejected two requests."""
    sid = open_session().session_id
    take_turn(sid, "look around")
    store.acp_choices.choose_mode(sid, "read-only")
    store.acp_choices.choose_model(sid, "m-2")
    for summary in sorted(REJECTED):
        store.acp_choices.reject(sid, summary)
    return sid


@pytest.fixture
def exported(store: Store, chosen: str, tmp_path: Path) -> Path:
    path = tmp_path / "chosen.trellisd"
    export(store, chosen, path)
    return path


@pytest.mark.parametrize("as_new", [False, True])
def test_an_imported_session_keeps_its_mode_model_and_rejections(
    store: Store, other: Store, chosen: str, exported: Path, as_new: bool
) -> None:
    imported = import_(other, exported, as_new=as_new)

    assert (imported == chosen) is not as_new
    assert other.acp_choices.of(imported) == AcpChoice("read-only", "m-2", REJECTED)
    assert lines(exported)[0]["version"] == 3
    assert [r["type"] for r in lines(exported)[1:5]] == [
        "session",
        "acpChoice",
        "acpRejection",
        "acpRejection",
    ]
    assert other.sessions.verify(imported).ok


def test_a_session_with_change_sets_and_only_a_rejection_is_version_3(
    store: Store, open_session: OpenSession, take_turn: TakeTurn, other: Store, tmp_path: Path
) -> None:
    sid = open_session().session_id
    _, run_id = take_turn(sid, "write it")
    store.changes.record(run_id, 1, "tool", [("a.txt", ABSENT, TEXT)])
    store.acp_choices.reject(sid, "Run: make deploy")
    path = tmp_path / "rejected.trellisd"
    export(store, sid, path)

    imported = import_(other, path)

    assert lines(path)[0]["version"] == 3
    assert "acpChoice" not in {r["type"] for r in lines(path)}
    assert other.acp_choices.of(imported) == AcpChoice(rejected=frozenset({"Run: make deploy"}))
    (change,) = other.changes.of_turns([t.turn_id for t in other.sessions.history(imported)])
    assert other.changes.load(change.after).data == TEXT.data
    assert other.sessions.verify(imported).ok


@pytest.mark.parametrize("changed", [False, True])
def test_a_session_without_choices_writes_no_such_records(
    store: Store, take_turn: TakeTurn, other: Store, tmp_path: Path, changed: bool
) -> None:
    """As an older trellisd wrote it: version 1, or 2 with change sets."""
    sid = tree(store, take_turn)
    if changed:
        run_id = store.sessions.turns(sid)[-1].run_id
        store.changes.record(run_id, 1, "tool", [("a.txt", ABSENT, TEXT)])
    path = tmp_path / "plain.trellisd"
    export(store, sid, path)

    records = lines(path)
    assert records[0]["version"] == (2 if changed else 1)
    assert {r["type"] for r in records}.isdisjoint({"acpChoice", "acpRejection"})
    assert other.acp_choices.of(import_(other, path, as_new=True)) == AcpChoice()


def test_a_files_auto_mode_is_not_taken(other: Store, exported: Path) -> None:
    """Auto runs writes and commands unasked: the user of this store has not chosen it."""
    records = lines(exported)
    records[2]["mode"] = "auto"
    seal(exported, records)

    sid = import_(other, exported, as_new=True)

    assert other.acp_choices.of(sid) == AcpChoice(None, "m-2", REJECTED)


def test_an_older_reader_refuses_the_file_rather_than_drop_its_rejections(
    other: Store, exported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive, "READS", (1, 2))
    refused = refusal(other, exported)
    assert refused.data["check"] == "version"


@pytest.mark.parametrize(
    ("edit", "check", "says"),
    [
        (
            lambda rs: rs[2].update(mode="sudo"),
            "record",
            "acpChoice.mode must be one of all, auto, acceptEdits, ask, plan, read-only",
        ),
        (lambda rs: rs[2].update(model=7), "record", "acpChoice.model"),
        (lambda rs: rs[2].update(model=""), "record", "acpChoice.model must be"),
        (lambda rs: rs[3].pop("summary"), "record", "acpRejection.summary"),
        (lambda rs: rs[3].update(summary=["a"]), "record", "acpRejection.summary"),
        (lambda rs: rs.insert(3, dict(rs[3])), "reference", "appears twice"),
        (lambda rs: rs.insert(3, dict(rs[2])), "order", "a second acpChoice record"),
    ],
)
def test_a_malformed_choice_is_refused_and_nothing_is_imported(
    other: Store, exported: Path, edit: Any, check: str, says: str
) -> None:
    records = lines(exported)
    edit(records)
    seal(exported, records)

    refused = refusal(other, exported)

    assert refused.CODE == ErrorCode.INVALID_PARAMS == -32602
    assert refused.data["check"] == check, refused.message
    assert says in refused.message


def test_a_rejection_changed_by_hand_is_refused_by_the_digest(other: Store, exported: Path) -> None:
    raw = exported.read_bytes()
    exported.write_bytes(raw.replace(b"Write secrets.txt", b"Write public.txt", 1))
    assert refusal(other, exported).data["check"] == "digest"


def test_the_store_names_every_mode_it_keeps_and_acp_offers() -> None:
    assert set(MODES) == set(KEPT) and set(agent.MODES) <= set(MODES)


def test_the_version_3_golden_file_keeps_importing(other: Store) -> None:
    """A file with ACP choices, as this version wrote it: every later trellisd imports it."""
    sid = import_(other, GOLDEN)
    assert other.acp_choices.of(sid) == AcpChoice("read-only", "m-2", REJECTED)
    assert other.sessions.verify(sid).ok
