"""A child session's ledger (the ``task`` tool): its calls must stay within its parent
turn's budgets too, and what it spends counts against them."""

from __future__ import annotations

import pytest

from tests.unit.agent.test_budget import request
from trellisd.agent.budget import BudgetExhausted, Ledger
from trellisd.providers.base import Usage
from trellisd.records import Budget, Spend


def test_what_a_child_spends_counts_against_its_parents_turn() -> None:
    parent = Ledger("test-model", Budget(tokens=1000), None, Spend())
    child = Ledger("test-model", None, None, Spend(), parent)
    child.admit(request("x" * 40, max_tokens=10))
    child.charge(Usage(800, 10))

    assert (child.tokens, parent.tokens) == (810, 810)
    with pytest.raises(BudgetExhausted, match=r"turn's budget of 1000 tokens \(810 spent\)"):
        parent.admit(request("x" * 400, max_tokens=100))


def test_a_childs_call_that_would_pass_its_parents_budget_is_refused_saying_so() -> None:
    parent = Ledger("test-model", None, Budget(tokens=1000), Spend(tokens=900))
    child = Ledger("test-model", Budget(tokens=10_000), None, Spend(), parent)

    with pytest.raises(BudgetExhausted, match=r"parent session's budget of 1000 tokens"):
        child.admit(request("x" * 400, max_tokens=100))
    assert parent.tokens == 0 and child.tokens == 0
