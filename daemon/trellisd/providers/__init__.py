"""Model providers: the one place that speaks HTTP."""

from __future__ import annotations

from ..config import NO_PROVIDER, ProviderSettings
from .base import Provider, ProviderError
from .http import HttpSettings
from .openai import OpenAIProvider
from .scripted import ScriptedProvider

OPENROUTER_HEADERS = {"HTTP-Referer": "https://github.com/trellisd/trellisd", "X-Title": "trellisd"}


def make_provider(settings: ProviderSettings) -> Provider:
    """The provider these settings name; a ``ProviderError`` when none is configured."""
    if settings.name is None:
        raise ProviderError(NO_PROVIDER)
    if settings.name == "scripted":
        return ScriptedProvider(settings.script, settings.effective_model or "scripted")
    base_url, model = settings.effective_base_url, settings.effective_model
    assert base_url is not None and model is not None
    http = HttpSettings(
        base_url=base_url, model=model, api_key=settings.api_key, key_source=settings.key_source
    )
    if settings.name == "openai":
        return OpenAIProvider(http)
    if settings.name == "openrouter":
        return OpenAIProvider(http, name="openrouter", extra_headers=OPENROUTER_HEADERS)
    raise ProviderError(f"the {settings.name} provider is not supported by this trellisd")


__all__ = ["Provider", "ProviderError", "make_provider"]
