"""What a model call cost, in US dollars, from its token figures and a price table.

Prices are USD per million tokens: ``input``, ``output`` and ``cached`` (input tokens read
from the provider's prompt cache). A built-in table covers common OpenAI and Anthropic models;
a JSON file overrides and extends it, read from ``$TRELLISD_PRICES`` or else
``$XDG_CONFIG_HOME/trellisd/prices.json`` (``~/.config/trellisd/prices.json``) of the daemon's
environment (``DaemonSettings.prices_file``)::

    {"my-model": {"input": 0.5, "output": 1.5, "cached": 0.05},
     "gpt-4o": {"input": 2.0, "output": 8.0}}

``cached`` may be left out when the model has no cache discount. An entry in the file
replaces the built-in entry of the same name. The file is read once, the first time a price
is needed (restart the daemon after changing it): pricing the turns of a long history costs
neither a file system call nor a look at the environment.

Token convention: ``Tokens.input`` counts ALL input tokens, cached ones included, and
``Tokens.cached`` is the part of them read from the cache. That is what OpenAI reports
(``prompt_tokens`` includes ``cached_tokens``); the Anthropic provider adds the cache reads
and writes to Anthropic's ``input_tokens`` to match. So the cost is

    (input - cached) * input price + cached * cached price + output * output price

Cache writes (which Anthropic bills at a premium) are priced as ordinary input.

A model name is found as given, then in a normal form: lower case, without an OpenRouter
vendor prefix (``anthropic/``), with dots in versions as dashes (``claude-sonnet-4.5``) and
without a date or ``-latest`` suffix (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``).
Variants such as ``openai/gpt-4o:free`` are not guessed at: they are unknown.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import MappingProxyType

from .daemon_settings import prices_path
from .records import Tokens

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached: float

    @staticmethod
    def of(input: float, output: float, cached: float | None = None) -> Price:
        return Price(input, output, input if cached is None else cached)


_P = Price.of

BUILT_IN: dict[str, Price] = {
    # OpenAI
    "gpt-5": _P(1.25, 10.00, 0.125),
    "gpt-5-mini": _P(0.25, 2.00, 0.025),
    "gpt-5-nano": _P(0.05, 0.40, 0.005),
    "gpt-4.1": _P(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _P(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _P(0.10, 0.40, 0.025),
    "gpt-4o": _P(2.50, 10.00, 1.25),
    "gpt-4o-mini": _P(0.15, 0.60, 0.075),
    "gpt-4-turbo": _P(10.00, 30.00),
    "gpt-3.5-turbo": _P(0.50, 1.50),
    "o1": _P(15.00, 60.00, 7.50),
    "o3": _P(2.00, 8.00, 0.50),
    "o3-mini": _P(1.10, 4.40, 0.55),
    "o4-mini": _P(1.10, 4.40, 0.275),
    # Anthropic (cached = cache reads)
    "claude-opus-4-5": _P(5.00, 25.00, 0.50),
    "claude-opus-4-1": _P(15.00, 75.00, 1.50),
    "claude-opus-4": _P(15.00, 75.00, 1.50),
    "claude-sonnet-4-5": _P(3.00, 15.00, 0.30),
    "claude-sonnet-4": _P(3.00, 15.00, 0.30),
    "claude-3-7-sonnet": _P(3.00, 15.00, 0.30),
    "claude-3-5-sonnet": _P(3.00, 15.00, 0.30),
    "claude-haiku-4-5": _P(1.00, 5.00, 0.10),
    "claude-3-5-haiku": _P(0.80, 4.00, 0.08),
    "claude-3-haiku": _P(0.25, 1.25, 0.03),
    "claude-3-opus": _P(15.00, 75.00, 1.50),
}

_VENDOR = re.compile(r"^[a-z0-9][a-z0-9_.-]*/")
_VERSION_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def normal_name(model: str) -> str:
    """The form a model name is matched in: ``anthropic/claude-sonnet-4.5`` and
    ``claude-sonnet-4-5-20250929`` both become ``claude-sonnet-4-5``."""
    name = _VENDOR.sub("", model.strip().lower(), count=1)
    name = _VERSION_DOT.sub("-", name)
    return _SUFFIX.sub("", name)


def price_table(env: Mapping[str, str] | None = None) -> Mapping[str, Price]:
    """The built-in table with the user's file laid over it, keyed by normal name: the file
    ``env`` names, else the daemon's (``use_prices``), built at the first call and kept."""
    if env is None:
        return _process_table()
    return _table(prices_path(env))


_configured: dict[str, Price] = {}
_file: Path | None = None


def use_prices(prices: Mapping[str, Price], file: Path | None = None) -> None:
    """The daemon's prices: the config file's ``[prices]``, laid over the built-in table and
    ``file`` (its ``prices.json``, from ``DaemonSettings.prices_file``; None: none).

    The table is the process's, set once at start-up by the daemon: a price is needed in the
    store, the loop and both protocols, and every daemon of a process prices alike."""
    global _file
    _configured.clear()
    _configured.update({normal_name(n): p for n, p in prices.items()})
    _file = file
    _process_table.cache_clear()


@cache
def _process_table() -> Mapping[str, Price]:
    table = _table(_file)
    if not _configured:
        return table
    return MappingProxyType({**table, **_configured})


@lru_cache(maxsize=8)
def _table(path: Path | None) -> Mapping[str, Price]:
    table = {normal_name(name): price for name, price in BUILT_IN.items()}
    if path is not None and path.exists():
        table.update({normal_name(n): p for n, p in load_prices(path).items()})
    return MappingProxyType(table)


def load_prices(path: Path) -> dict[str, Price]:
    """The prices in a user's file; a file that cannot be used is logged and ignored."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("ignoring the price file %s: %s", path, exc)
        return {}
    if not isinstance(raw, dict):
        log.warning("ignoring the price file %s: it is not a JSON object", path)
        return {}
    prices: dict[str, Price] = {}
    for name, entry in raw.items():
        price = _price(entry)
        if price is None:
            log.warning(
                "ignoring the price of %r in %s: it needs numbers for input and output"
                " (and optionally cached), in USD per million tokens",
                name,
                path,
            )
            continue
        prices[name] = price
    return prices


def _price(entry: object) -> Price | None:
    if not isinstance(entry, dict):
        return None
    figures = [entry.get("input"), entry.get("output"), entry.get("cached")]
    if any(f is not None and not _is_number(f) for f in figures):
        return None
    if figures[0] is None or figures[1] is None:
        return None
    return Price.of(float(figures[0]), float(figures[1]), _float(figures[2]))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def price(model: str | None, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``, or None when the table does not know it."""
    if not model:
        return None
    table = price_table() if table is None else table
    return table.get(model) or table.get(_normal(model))


@lru_cache(maxsize=256)
def _normal(model: str) -> str:
    return normal_name(model)


def cost(
    model: str | None, tokens: Tokens, table: Mapping[str, Price] | None = None
) -> float | None:
    """What ``tokens`` of ``model`` cost in USD; None (never 0) when the model is unknown or a
    figure the price depends on is unknown. The cached figure is needed only when the model's
    cached price differs from its input price. See the module docstring for the convention."""
    known = price(model, table)
    if known is None or tokens.input is None or tokens.output is None:
        return None
    cached = tokens.cached
    if cached is None:
        if known.cached != known.input:
            return None
        cached = 0
    cached = min(cached, tokens.input)
    dollars = (
        (tokens.input - cached) * known.input + cached * known.cached + tokens.output * known.output
    )
    return dollars / 1_000_000
