"""A real store in a temporary SQLite file, and short ways to fill it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from trellisd.processes import pid_alive
from trellisd.records import ProviderChoice, Session, Step, Tokens
from trellisd.store import Store

OpenStore = Callable[[], Store]
OpenSession = Callable[..., Session]
TakeTurn = Callable[..., tuple[str, str]]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "trellisd.db"


@pytest.fixture
def open_store(db_path: Path) -> Iterator[OpenStore]:
    """Open the store file as a daemon does (registered as one of the daemons using it);
    every store opened is closed at the end."""
    opened: list[Store] = []

    def open_() -> Store:
        store = Store(db_path, pid_alive)
        opened.append(store)
        store.leases.register()
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: OpenStore) -> Store:
    return open_store()


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Store]:
    """A second store, on another machine as far as a session is concerned."""
    store = Store(tmp_path / "other" / "trellisd.db", pid_alive)
    store.leases.register()
    yield store
    store.close()


@pytest.fixture
def open_session(store: Store) -> OpenSession:
    """A new session that ``store`` is the writer of."""

    def open_(root: str = "/work/project", title: str = "") -> Session:
        return store.sessions.create(root, title, ProviderChoice(), store.leases.daemon_id)

    return open_


@pytest.fixture
def take_turn(store: Store) -> TakeTurn:
    """A finished turn at the session's head with the given steps (by default one reply);
    returns ``(turn_id, run_id)``."""

    def take(
        session_id: str, prompt: str, *steps: Step, outcome: str = "finished"
    ) -> tuple[str, str]:
        turn_id, run_id, _ = store.runs.begin(session_id, prompt)
        for step in steps or (
            Step(1, "reply", prompt, f"re: {prompt}", None, None, Tokens(1, 1, 0)),
        ):
            store.runs.add_step(run_id, step)
        store.runs.finish(run_id, outcome)
        return turn_id, run_id

    return take
