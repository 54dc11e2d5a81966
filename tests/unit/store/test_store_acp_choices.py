"""What an ACP client chose for a session, kept in the store: read back by the next daemon,
copied to a fork, and gone with the session."""

from __future__ import annotations

from tests.unit.store.conftest import OpenSession, OpenStore
from trellisd.store import Store
from trellisd.store.acp_choices import AcpChoice


def test_the_choices_read_back_in_the_next_daemon(
    store: Store, open_store: OpenStore, open_session: OpenSession
) -> None:
    session = open_session().session_id
    assert store.acp_choices.of(session) == AcpChoice()
    store.acp_choices.choose_mode(session, "read-only")
    store.acp_choices.choose_model(session, "other-model")
    store.acp_choices.choose_mode(session, "auto")  # the last choice counts
    store.acp_choices.reject(session, "run `touch x`")
    store.acp_choices.reject(session, "run `touch x`")

    assert open_store().acp_choices.of(session) == AcpChoice(
        "auto", "other-model", frozenset({"run `touch x`"})
    )


def test_a_fork_starts_with_its_origins_choices_and_they_go_with_the_session(
    store: Store, open_session: OpenSession
) -> None:
    origin, fork = open_session().session_id, open_session().session_id
    store.acp_choices.choose_model(origin, "other-model")
    store.acp_choices.reject(origin, "write b")
    store.acp_choices.copy(origin, fork)
    assert store.acp_choices.of(fork) == AcpChoice(None, "other-model", frozenset({"write b"}))

    store.sessions.delete(origin, store.leases)
    assert store.acp_choices.of(origin) == AcpChoice()
    assert store.acp_choices.of(fork).model == "other-model"
