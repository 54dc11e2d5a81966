"""How many tokens each model's context window holds: a built-in table for the models the
daemon picks by default and their common neighbours, found like a price (``pricing``): as
given, then in the normal form (no vendor prefix, no date suffix).

Where a model's context window comes from, first that names one wins: the session's ``provider``
``contextWindow``, the editor window's ``initializationOptions`` ``contextWindow``,
``TRELLISD_CONTEXT_WINDOW``, the provider's models endpoint, this table. A model none of them
knows is given ``FALLBACK_CONTEXT_WINDOW``.
"""

from __future__ import annotations

from .pricing import normal_name

FALLBACK_CONTEXT_WINDOW = 128_000

BUILT_IN: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-opus-4-5": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-haiku": 200_000,
    "claude-3-opus": 200_000,
}
_NORMAL = {normal_name(name): size for name, size in BUILT_IN.items()}


def known_context_window(model: str | None) -> int | None:
    """The built-in table's context window for ``model``; None when it does not know the model."""
    if not model:
        return None
    return BUILT_IN.get(model) or _NORMAL.get(normal_name(model))
