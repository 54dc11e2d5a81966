"""What a call cost: the built-in price table, the user's file laid over it, and None
whenever a figure is unknown."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from trellisd.pricing import Price, cost, price, price_table, prices_path, use_prices
from trellisd.records import Tokens


@pytest.fixture(autouse=True)
def no_user_file() -> Iterator[None]:
    """The process's table is the built-in one here, whatever a test before set."""
    use_prices({})
    yield
    use_prices({})


def test_cached_input_is_billed_at_the_cached_price_and_not_twice() -> None:
    # gpt-4o-mini: 0.15 input, 0.60 output, 0.075 cached, per million tokens
    dollars = cost("gpt-4o-mini", Tokens(input=1_000_000, output=1_000_000, cached=400_000))

    assert dollars == pytest.approx(0.6 * 0.15 + 0.4 * 0.075 + 0.60)


def test_openrouter_and_dated_names_find_the_same_price() -> None:
    sonnet = price("claude-sonnet-4-5")

    assert sonnet == Price(3.0, 15.0, 0.30)
    assert price("anthropic/claude-sonnet-4.5") == sonnet
    assert price("claude-sonnet-4-5-20250929") == sonnet
    assert price("openai/gpt-4o-mini") == price("gpt-4o-mini-2024-07-18") == price("gpt-4o-mini")
    assert price("openai/gpt-4.1") == Price(2.0, 8.0, 0.5)


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("some-local-model", Tokens(10, 10, 0)),
        ("openai/gpt-4o:free", Tokens(10, 10, 0)),
        (None, Tokens(10, 10, 0)),
        ("gpt-4o", Tokens(None, 10, 0)),
        ("gpt-4o", Tokens(10, None, 0)),
        ("gpt-4o", Tokens(10, 10, None)),  # it has a cache discount, so cached is needed
    ],
)
def test_unknown_model_or_figure_costs_none_not_zero(model: str | None, tokens: Tokens) -> None:
    assert cost(model, tokens) is None


def test_a_model_without_a_cache_discount_needs_no_cached_figure() -> None:
    assert cost("gpt-4-turbo", Tokens(1_000_000, 0, None)) == pytest.approx(10.0)


def test_known_model_with_no_tokens_costs_zero() -> None:
    assert cost("gpt-4o", Tokens(0, 0, 0)) == 0.0


def test_the_file_named_by_trellisd_prices_overrides_and_extends(tmp_path: Path) -> None:
    path = tmp_path / "my-prices.json"
    path.write_text(
        json.dumps(
            {
                "gpt-4o": {"input": 1.0, "output": 2.0, "cached": 0.5},
                "qwen2.5-coder:32b": {"input": 0, "output": 0},
            }
        )
    )
    env = {"TRELLISD_PRICES": str(path)}
    table = price_table(env)

    assert prices_path(env) == path
    assert cost("gpt-4o", Tokens(2_000_000, 1_000_000, 1_000_000), table) == pytest.approx(3.5)
    assert cost("qwen2.5-coder:32b", Tokens(500, 500, None), table) == 0.0
    assert price("gpt-4o-mini", table) == Price(0.15, 0.60, 0.075)  # the rest of the table stays


def test_the_file_under_xdg_config_home_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "trellisd"
    folder.mkdir(parents=True)
    (folder / "prices.json").write_text(json.dumps({"house-model": {"input": 4, "output": 8}}))

    table = price_table({"XDG_CONFIG_HOME": str(tmp_path / "config")})

    assert price("house-model", table) == Price(4.0, 8.0, 4.0)


def test_without_xdg_config_home_the_file_is_under_dot_config() -> None:
    assert prices_path({"HOME": "/home/u"}).parts[-3:] == (".config", "trellisd", "prices.json")


def test_a_broken_file_is_logged_and_the_built_in_table_still_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"gpt-4o": {"input": "cheap", "output": 1}, "x": ')

    with caplog.at_level(logging.WARNING):
        assert price("gpt-4o", price_table({"TRELLISD_PRICES": str(path)})) == Price(
            2.5, 10.0, 1.25
        )

    assert str(path) in caplog.text


def test_the_file_is_read_once_not_at_every_price(tmp_path: Path) -> None:
    path = tmp_path / "read-once.json"
    path.write_text(json.dumps({"house-model": {"input": 1, "output": 2}}))
    env = {"TRELLISD_PRICES": str(path)}
    assert price("house-model", price_table(env)) == Price(1.0, 2.0, 1.0)

    path.unlink()  # a history of many turns is priced without going back to the disk

    assert [price("house-model", price_table(env)) for _ in range(3)] == [Price(1.0, 2.0, 1.0)] * 3


def test_the_daemons_file_and_config_prices_make_the_table_every_price_is_read_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"house-model": {"input": 1, "output": 2}}))
    assert price("house-model") is None

    use_prices({"gpt-4o": Price.of(9.0, 9.0)}, path)

    assert price("house-model") == Price(1.0, 2.0, 1.0)
    assert price("gpt-4o") == Price(9.0, 9.0, 9.0)  # the config file's over the built-in
    assert cost("house-model", Tokens(1_000_000, 0, 0)) == pytest.approx(1.0)
