"""The retry and timeout settings: from the environment, from a client's overrides, and on
to the provider that make_provider builds."""

from __future__ import annotations

import pytest

from trellisd.config import (
    InitializationOptions,
    ProviderSettings,
    provider_from_env,
)
from trellisd.convert import structure
from trellisd.errors import InvalidParams
from trellisd.providers import make_provider
from trellisd.providers.openai import OpenAIProvider
from trellisd.records import ProviderChoice


def test_the_environment_sets_retries_budget_and_read_timeout() -> None:
    settings = provider_from_env(
        {
            "OPENAI_API_KEY": "sk-1",
            "TRELLISD_MAX_RETRIES": "5",
            "TRELLISD_RETRY_BUDGET": "12.5",
            "TRELLISD_READ_TIMEOUT": "30",
        }
    )

    assert (settings.max_retries, settings.retry_budget, settings.read_timeout) == (5, 12.5, 30.0)


def test_unset_variables_leave_the_defaults() -> None:
    settings = provider_from_env({"OPENAI_API_KEY": "sk-1"})

    assert settings.max_retries == ProviderSettings().max_retries
    assert settings.read_timeout == ProviderSettings().read_timeout


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TRELLISD_MAX_RETRIES", "-1"),
        ("TRELLISD_READ_TIMEOUT", "0"),
        ("TRELLISD_RETRY_BUDGET", "x"),
    ],
)
def test_a_bad_value_in_the_environment_is_named(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        provider_from_env({"OPENAI_API_KEY": "sk-1", variable: value})


def test_overrides_change_them_and_survive_a_change_of_provider() -> None:
    base = provider_from_env({"OPENAI_API_KEY": "sk-1", "TRELLISD_READ_TIMEOUT": "30"})

    merged = base.merged(ProviderChoice(max_retries=1, retry_budget=5), "turn")
    switched = merged.merged(ProviderChoice(name="anthropic"), "turn")

    assert (merged.max_retries, merged.retry_budget, merged.read_timeout) == (1, 5.0, 30.0)
    assert (switched.max_retries, switched.retry_budget, switched.read_timeout) == (1, 5.0, 30.0)


@pytest.mark.parametrize(
    "overrides", [{"maxRetries": -2}, {"readTimeout": 0}, {"retryBudget": "long"}]
)
def test_bad_overrides_are_refused_with_the_field_named(overrides: dict[str, object]) -> None:
    with pytest.raises(InvalidParams, match=next(iter(overrides))):
        choice = structure(overrides, ProviderChoice, "turn")
        ProviderSettings(name="openai").merged(choice, "turn")


def test_make_provider_carries_them_to_the_http_settings() -> None:
    settings = ProviderSettings(
        name="openai", api_key="sk-1", max_retries=2, retry_budget=9.0, read_timeout=4.0
    )

    provider = make_provider(settings)

    assert isinstance(provider, OpenAIProvider)
    http = provider.http
    assert (http.max_retries, http.retry_budget, http.read_timeout) == (2, 9.0, 4.0)
    assert http.base_url == "https://api.openai.com/v1"


def test_a_key_given_with_another_provider_names_where_it_came_from() -> None:
    from trellisd.config import ProviderSettings

    base = ProviderSettings(name="openai", api_key="env-key", key_source="OPENAI_API_KEY")
    options = InitializationOptions(provider="anthropic", api_key="given")
    merged = base.merged(options, "initializationOptions")
    assert merged.name == "anthropic" and merged.api_key == "given"
    assert merged.key_source == "initializationOptions.apiKey"
