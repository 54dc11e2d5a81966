"""The ledger a budgeted turn's model calls are admitted by: the estimate of the next call,
and the refusal before a call that would pass a budget."""

from __future__ import annotations

import json

import pytest

from trellisd.agent.budget import OUTPUT_ALLOWANCE, BudgetExhausted, Ledger, characters
from trellisd.pricing import price_table
from trellisd.providers.base import Message, ModelRequest, Reasoning, Usage
from trellisd.records import Budget, Spend, ToolCall


def request(*contents: str, max_tokens: int | None = None) -> ModelRequest:
    return ModelRequest([Message("user", c) for c in contents], max_tokens=max_tokens)


def test_the_first_call_is_estimated_from_its_characters_and_the_output_allowance() -> None:
    ledger = Ledger("test-model", Budget(tokens=10_000), None, Spend())
    guess = ledger.estimate(request("x" * 400))
    assert (guess.input, guess.output) == (100, OUTPUT_ALLOWANCE)
    assert ledger.estimate(request("x" * 401, max_tokens=50)).tokens == 101 + 50


def test_a_later_call_is_the_reported_input_plus_what_was_added() -> None:
    ledger = Ledger("test-model", Budget(tokens=10_000), None, Spend())
    first = request("x" * 4000, max_tokens=10)
    ledger.admit(first)
    ledger.charge(Usage(900, 10))
    call = ToolCall("c1", "read_file", {"path": "README.md"})
    later = ModelRequest(
        [
            *first.messages,
            Message("assistant", "", (call,)),
            Message("tool", "y" * 40, tool_call_id="c1"),
        ],
        max_tokens=10,
    )
    added = len("read_file") + len('{"path": "README.md"}') + 40
    assert ledger.estimate(later).input == 900 + -(-added // 4)
    assert ledger.tokens == 910


def test_a_call_that_would_pass_the_turn_budget_is_refused_saying_so() -> None:
    ledger = Ledger("test-model", Budget(tokens=1000), None, Spend())
    ledger.admit(request("x" * 40, max_tokens=100))
    ledger.charge(Usage(800, 50))
    with pytest.raises(BudgetExhausted) as refused:
        ledger.admit(request("x" * 40, max_tokens=100))
    assert "the turn's budget of 1000 tokens (850 spent)" in str(refused.value)


def test_the_session_budget_counts_what_earlier_turns_spent() -> None:
    ledger = Ledger("test-model", None, Budget(tokens=1000), Spend(tokens=950))
    with pytest.raises(BudgetExhausted) as refused:
        ledger.admit(request("hello", max_tokens=100))
    assert "the session's budget of 1000 tokens (950 spent)" in str(refused.value)


def test_a_usd_budget_needs_a_known_price() -> None:
    with pytest.raises(BudgetExhausted) as refused:
        Ledger("no-such-model", None, Budget(usd=1.0), Spend()).admit(request("hi"))
    assert "price of no-such-model is unknown" in str(refused.value)
    priced = Ledger("gpt-4o-mini", Budget(usd=1.0), None, Spend())
    priced.admit(request("hi", max_tokens=100))
    priced.charge(Usage(1_000_000, 0))  # $0.15
    assert priced.usd == pytest.approx(price_table()["gpt-4o-mini"].input)


def test_a_call_without_figures_is_charged_its_estimate() -> None:
    ledger = Ledger("test-model", Budget(tokens=10_000), None, Spend())
    ledger.admit(request("x" * 400, max_tokens=20))
    ledger.unreported()
    assert ledger.tokens == 100 + 20


def test_the_reasoning_sent_back_counts_in_the_estimate() -> None:
    signed = {"type": "thinking", "thinking": "t" * 100, "signature": "s" * 200}
    thought = Reasoning("anthropic", "t" * 100, (signed,))
    plain = Message("assistant", "x" * 400)
    reasoned = Message("assistant", "x" * 400, reasoning=thought)

    assert characters(reasoned) == characters(plain) + 100 + len(json.dumps(signed))
