"""What a turn cost is the store's: each step priced once, as it commits, with its run's
model; read back as the sum of its steps' costs, whatever the price table says later. The
steps of a store written before steps carried their cost are priced once, when the store is
migrated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from trellisd import pricing
from trellisd.processes import pid_alive
from trellisd.records import ProviderChoice, Spend, Step, Tokens
from trellisd.store import Store, migrations

# gpt-4o-mini's built-in prices, USD a million tokens: 0.15 input, 0.075 cached, 0.60 output.
PRICED = Tokens(1_000_000, 500_000, 400_000)
PRICED_COST = 0.6 * 0.15 + 0.4 * 0.075 + 0.5 * 0.60


@pytest.fixture(autouse=True)
def built_in_prices() -> Iterator[None]:
    pricing.use_prices({})
    yield
    pricing.use_prices({})


def turn_with_steps(store: Store, model: str | None, *tokens: Tokens) -> tuple[str, str]:
    session = store.sessions.create("/w", "", ProviderChoice(), store.leases.daemon_id)
    turn_id, run_id, _ = store.runs.begin(session.session_id, "hi", model)
    for n, used in enumerate(tokens, 1):
        store.runs.add_step(run_id, Step(n, "reply", None, "ok", None, None, used))
    store.runs.finish(run_id, "finished")
    return session.session_id, turn_id


def cost_of(store: Store, turn: tuple[str, str]) -> float | None:
    history = store.sessions.history(turn[0])
    assert store.sessions.turn(*turn).cost == history[-1].cost
    return history[-1].cost


def test_a_turn_costs_what_its_steps_cost_as_they_committed(store: Store) -> None:
    priced = turn_with_steps(store, "gpt-4o-mini", PRICED, Tokens(0, 0, 0))
    unknown = turn_with_steps(store, "some-local-model", PRICED)
    one_unknown_figure = turn_with_steps(store, "gpt-4o-mini", PRICED, Tokens(10, None, 0))
    assert cost_of(store, priced) == pytest.approx(PRICED_COST, rel=1e-9)
    assert cost_of(store, unknown) is None
    assert cost_of(store, one_unknown_figure) is None
    # Prices that change later do not change what was spent.
    pricing.use_prices({"gpt-4o-mini": pricing.Price.of(100.0, 100.0)})
    assert cost_of(store, priced) == pytest.approx(PRICED_COST, rel=1e-9)


def test_the_steps_of_a_store_from_before_costs_are_priced_when_it_is_migrated(
    db_path: Path,
) -> None:
    store = Store(db_path, pid_alive)
    store.leases.register()
    turn_id = turn_with_steps(store, "gpt-4o-mini", PRICED)
    store.close()
    con = apsw.Connection(str(db_path))  # the store as schema 19 wrote it
    con.execute("ALTER TABLE step DROP COLUMN cost")  # step 20
    con.execute(  # and what the steps after it added
        "DROP TABLE change_share; DROP TABLE worktree; DROP TABLE session_parent"
    )
    con.pragma("user_version", migrations.COSTED - 1)
    con.close()
    store = Store(db_path, pid_alive)
    try:
        assert cost_of(store, turn_id) == pytest.approx(PRICED_COST, rel=1e-9)
    finally:
        store.close()


def test_a_sessions_spend_is_summed_by_the_store_from_its_steps(store: Store) -> None:
    """What a reopen and a turn's start read of a session's spend: its steps' tokens and
    costs summed in the store, whole turns not read; USD unknown only when no step that spent
    tokens has a price."""
    sid, _ = turn_with_steps(store, "gpt-4o-mini", PRICED, Tokens(10, None, 0))
    begun = store.runs.begin(sid, "again", "some-local-model")
    store.runs.add_step(begun[1], Step(1, "reply", None, "ok", None, None, Tokens(7, 3, 0)))
    spent = store.budgets.spent(sid)
    assert spent.tokens == 1_000_000 + 500_000 + 10 + 7 + 3
    assert spent.usd == pytest.approx(PRICED_COST, rel=1e-9) and spent.priced

    unpriced, _ = turn_with_steps(store, "some-local-model", PRICED)
    assert store.budgets.spent(unpriced) == Spend(1_500_000, 0.0, priced=False)
    nothing = store.sessions.create("/w", "", ProviderChoice(), store.leases.daemon_id)
    assert store.budgets.spent(nothing.session_id) == Spend(0, 0.0, priced=True)
