"""Model providers: the one place that speaks HTTP.

``make_provider`` turns ``ProviderSettings`` into a ``Provider``; the wire it speaks
(OpenAI Chat Completions, OpenAI Responses or Anthropic Messages) is its own business. An
HTTP provider keeps its connections open between calls: ``close_provider`` releases them, for
each provider made, when the daemon exits.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..config import KEY_VARIABLES, NO_PROVIDER, ProviderSettings
from .anthropic import AnthropicProvider
from .base import Provider, ProviderError
from .http import HttpSettings
from .openai import OpenAIProvider
from .responses import ResponsesProvider
from .scripted import ScriptedProvider

OPENROUTER_HEADERS = {"HTTP-Referer": "https://github.com/trellisd/trellisd", "X-Title": "trellisd"}


def make_provider(settings: ProviderSettings) -> Provider:
    """The provider these settings name; a ``ProviderError`` when none is configured."""
    if settings.name is None:
        raise ProviderError(NO_PROVIDER)
    if settings.name == "scripted":
        return ScriptedProvider(settings.script, settings.effective_model or "scripted")
    http = http_settings(settings)
    if settings.name == "openai":
        return OpenAIProvider(http)
    if settings.name == "openrouter":
        return OpenAIProvider(http, name="openrouter", extra_headers=OPENROUTER_HEADERS)
    if settings.name == "anthropic":
        return AnthropicProvider(http)
    if settings.name == "openai-responses":
        return ResponsesProvider(http)
    raise ProviderError(f"the {settings.name} provider is not supported by this trellisd")


@runtime_checkable
class Closable(Protocol):
    async def aclose(self) -> None: ...


async def close_provider(provider: Provider) -> None:
    """Release what ``provider`` holds open (its pooled connections), if anything."""
    if isinstance(provider, Closable):
        await provider.aclose()


def http_settings(settings: ProviderSettings) -> HttpSettings:
    base_url, model = settings.effective_base_url, settings.effective_model
    if base_url is None or model is None:
        raise ProviderError(
            f"the {settings.name} provider needs a base URL and a model: set TRELLISD_BASE_URL"
            " and TRELLISD_MODEL"
        )
    variable = KEY_VARIABLES.get(settings.name or "")
    return HttpSettings(
        base_url=base_url,
        model=model,
        api_key=settings.api_key,
        key_source=settings.key_source,
        key_hint=f"TRELLISD_API_KEY or {variable}" if variable else "TRELLISD_API_KEY",
        read_timeout=settings.read_timeout,
        max_retries=settings.max_retries,
        retry_budget=settings.retry_budget,
    )


__all__ = ["Provider", "ProviderError", "close_provider", "make_provider"]
