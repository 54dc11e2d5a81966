"""The daemon's configuration: where the store lives and which model answers turns.

Read from the user's config file (``config_file``), the environment over it (and the command
line), then overridden by the editor's ``initializationOptions``, per session by
``session/open``'s ``provider`` and per turn by ``session/turn``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import attrs

from .convert import camel
from .errors import InvalidParams
from .records import Effort, ProviderChoice
from .rendezvous import PROVIDER_KEY_VARIABLES

PROVIDERS = ("openai", "anthropic", "openrouter", "openai-responses", "scripted")

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "anthropic": "https://api.anthropic.com",
    "openai-responses": "https://api.openai.com/v1",
}
DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "openrouter": "openai/gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "openai-responses": "gpt-5-mini",
    "scripted": "scripted",
}
KEY_VARIABLES = {
    **dict(zip(("openai", "anthropic", "openrouter"), PROVIDER_KEY_VARIABLES, strict=True)),
    "openai-responses": "OPENAI_API_KEY",  # the same account as ``openai``, another API
}

DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BUDGET = 60.0
DEFAULT_READ_TIMEOUT = 120.0
DEFAULT_COMPACT_AT = 0.8

NO_PROVIDER = (
    "no model provider is configured: set TRELLISD_PROVIDER (openai, anthropic, openrouter,"
    " openai-responses or scripted) with TRELLISD_MODEL, TRELLISD_BASE_URL and TRELLISD_API_KEY,"
    " or set one of OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY"
)


@attrs.frozen
class InitializationOptions(ProviderChoice):
    """``initialize``'s ``initializationOptions``: a choice of model that may also carry the
    key and the scripted model's replies. ``provider`` is a synonym of ``name``."""

    provider: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    script: str | None = None


@dataclass(frozen=True)
class ProviderSettings:
    """Which model answers, and how to reach it. ``name`` is None when nothing is set.

    ``max_retries`` is how many times a failed call is sent again, ``retry_budget`` the
    seconds after the first attempt past which no retry starts, and ``read_timeout`` the
    seconds the provider may stay silent before the call is abandoned.
    """

    name: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    key_source: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    script: str | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_budget: float = DEFAULT_RETRY_BUDGET
    read_timeout: float = DEFAULT_READ_TIMEOUT
    context_window: int | None = None  # None: the model's known window
    compact_at: float = DEFAULT_COMPACT_AT
    effort: Effort | None = None  # how hard a reasoning model thinks; None: its own default
    # The provider keys of the environment these settings were read from (a window's, in the
    # shared daemon): a session that picks another provider takes its key from there.
    keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def effective_model(self) -> str | None:
        return self.model or (DEFAULT_MODELS.get(self.name) if self.name else None)

    @property
    def effective_base_url(self) -> str | None:
        return self.base_url or (DEFAULT_BASE_URLS.get(self.name) if self.name else None)

    def describe(self) -> dict[str, Any]:
        """What a client may see: never the key itself."""
        return {
            "name": self.name,
            "model": self.effective_model,
            "baseUrl": self.effective_base_url,
            "keyFrom": self.key_source,
            "temperature": self.temperature,
            "maxTokens": self.max_tokens,
            "effort": self.effort,
        }

    def merged(self, choice: ProviderChoice, where: str) -> ProviderSettings:
        """These settings with a client's choice laid over them; ``where`` names the choice
        (``provider``, ``initializationOptions``, ``turn``) in the errors."""
        changes: dict[str, Any] = {}
        for attr, value in attrs.asdict(choice).items():
            if value is None:
                continue
            least = _LIMITS.get(attr)
            if least is not None and value < least:
                key = camel(attr)
                raise InvalidParams(
                    f"{where}.{key} must be {_LIMIT_WORDS[least]}", field=f"{where}.{key}"
                )
            if attr == "compact_at" and value > 1:
                raise InvalidParams(
                    f"{where}.compactAt must be a share of the window, at most 1",
                    field=f"{where}.compactAt",
                )
            changes["name" if attr == "provider" else attr] = value
        name = changes.get("name")
        if name is not None and name not in PROVIDERS:
            raise InvalidParams(
                f"{where}.name must be one of {', '.join(PROVIDERS)}", field=f"{where}.name"
            )
        if name is not None and name != self.name:
            # A different provider does not inherit the other one's endpoint, model or key.
            base = ProviderSettings(
                name=name,
                script=self.script,
                max_retries=self.max_retries,
                retry_budget=self.retry_budget,
                read_timeout=self.read_timeout,
                context_window=self.context_window,
                compact_at=self.compact_at,
                keys=self.keys,
            )
            if name in KEY_VARIABLES and "api_key" not in changes:
                var = KEY_VARIABLES[name]
                found = dict(self.keys).get(var)
                base = dataclasses.replace(base, api_key=found, key_source=var if found else None)
            changes = {k: v for k, v in changes.items() if k != "name"}
        if "api_key" in changes:
            changes["key_source"] = f"{where}.apiKey"
        if name is not None and name != self.name:
            return dataclasses.replace(base, **changes)
        return dataclasses.replace(self, **changes)


# The least value each setting may take; a read timeout of 0 would fail every call.
_LIMITS: dict[str, float] = {
    "max_retries": 0,
    "retry_budget": 0,
    "read_timeout": 0.001,
    "max_tokens": 1,
    "temperature": 0,
    "context_window": 1,
    "compact_at": 0.01,
}
_LIMIT_WORDS = {
    0: "zero or more",
    0.001: "a positive number of seconds",
    1: "1 or more",
    0.01: "a share of the window between 0.01 and 1",
}


def provider_from_env(
    env: Mapping[str, str], base: ProviderSettings | None = None
) -> ProviderSettings:
    """``TRELLISD_*`` variables laid over ``base`` (the config file's settings). With no
    provider named by either, one is picked from a known API key. The key comes from
    ``TRELLISD_API_KEY``, else from ``base`` (the variable the file names, or its ``apiKey``),
    else from the provider's usual variable (``OPENAI_API_KEY``, ...)."""
    base = ProviderSettings() if base is None else base
    named = env.get("TRELLISD_PROVIDER") or None
    if named is not None and named not in PROVIDERS:
        raise ValueError(f"TRELLISD_PROVIDER must be one of {', '.join(PROVIDERS)}, not {named!r}")
    name = named or base.name
    # A provider named here that is not the file's does not take the file's endpoint,
    # model or key.
    own = base if name == base.name else ProviderSettings()
    script = env.get("TRELLISD_SCRIPT") or base.script
    model = env.get("TRELLISD_MODEL") or own.model
    base_url = env.get("TRELLISD_BASE_URL") or own.base_url
    key, key_source = own.api_key, own.key_source
    if env.get("TRELLISD_API_KEY"):
        key, key_source = env["TRELLISD_API_KEY"], "TRELLISD_API_KEY"
    transport = {
        attr: _limit(env, var, kind, attr, getattr(base, attr))
        for attr, var, kind in (
            ("max_retries", "TRELLISD_MAX_RETRIES", int),
            ("retry_budget", "TRELLISD_RETRY_BUDGET", float),
            ("read_timeout", "TRELLISD_READ_TIMEOUT", float),
            ("compact_at", "TRELLISD_COMPACT_AT", float),
        )
    }
    transport["context_window"] = _number(env, "TRELLISD_CONTEXT_WINDOW", int)
    if transport["context_window"] is None:
        transport["context_window"] = base.context_window
    if transport["context_window"] is not None and transport["context_window"] < 1:
        raise ValueError("TRELLISD_CONTEXT_WINDOW must be a number of tokens, 1 or more")
    if transport["compact_at"] > 1:
        raise ValueError("TRELLISD_COMPACT_AT must be a share of the window, at most 1")
    if name is None:
        for candidate in ("openrouter", "openai", "anthropic"):
            if env.get(KEY_VARIABLES[candidate]):
                name = candidate
                break
        else:
            if script:
                name = "scripted"
    keys = tuple((var, env[var]) for var in PROVIDER_KEY_VARIABLES if env.get(var))
    if name is None:
        return ProviderSettings(script=script, keys=keys, **transport)
    if key is None and name in KEY_VARIABLES and env.get(KEY_VARIABLES[name]):
        key, key_source = env[KEY_VARIABLES[name]], KEY_VARIABLES[name]
    if name == "openrouter" and model is None:
        model = env.get("OPENROUTER_MODEL") or None
    temperature = _number(env, "TRELLISD_TEMPERATURE", float)
    max_tokens = _number(env, "TRELLISD_MAX_TOKENS", int)
    return ProviderSettings(
        name=name,
        model=model,
        base_url=base_url,
        api_key=key,
        key_source=key_source,
        script=script,
        temperature=own.temperature if temperature is None else temperature,
        max_tokens=own.max_tokens if max_tokens is None else max_tokens,
        effort=own.effort,
        keys=keys,
        **transport,
    )


def _number(env: Mapping[str, str], var: str, kind: type[Any]) -> Any:
    raw = env.get(var)
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError as exc:
        raise ValueError(f"{var} must be a number, not {raw!r}") from exc


def _limit(env: Mapping[str, str], var: str, kind: type[Any], attr: str, default: Any) -> Any:
    value = _number(env, var, kind)
    if value is None:
        return default
    if value < _LIMITS[attr]:
        raise ValueError(f"{var} must be {_LIMIT_WORDS[_LIMITS[attr]]}, not {env[var]!r}")
    return value


__all__ = ["ProviderSettings", "provider_from_env"]
