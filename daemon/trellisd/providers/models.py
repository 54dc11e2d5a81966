"""A model's context window as its provider's models endpoint states it.

OpenAI-style servers answer ``GET {base}/models`` with ``{"data": [{"id": ..., ...}]}``; the
servers that state a window name it differently: ``context_length`` (OpenRouter, LM Studio),
``context_window`` (Groq, Together), ``max_model_len`` (vLLM), ``max_input_tokens``
(Anthropic's ``GET /v1/models``). OpenAI's own endpoint states none: the built-in table
answers then. A failure of any kind reads as "not stated" and is logged, once per endpoint.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from .http import Endpoint

log = logging.getLogger(__name__)

WINDOW_KEYS = ("context_length", "context_window", "max_model_len", "max_input_tokens")
MODELS_TIMEOUT = 10.0
MAX_MODELS_BYTES = 4 * 1024 * 1024


async def stated_window(endpoint: Endpoint, path: str, headers: dict[str, str]) -> int | None:
    """The window the models endpoint at ``path`` states for the endpoint's model."""
    http = endpoint.http
    try:
        client = endpoint.client()
        async with client.stream(
            "GET", http.url(path), headers=headers, timeout=MODELS_TIMEOUT
        ) as response:
            if response.status_code != 200:
                log.info("%s%s answered HTTP %d", http.base_url, path, response.status_code)
                return None
            body = b""
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) > MAX_MODELS_BYTES:
                    log.info("%s%s answered more than %d bytes", http.base_url, path, len(body))
                    return None
        listing = json.loads(body)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        log.info("could not read the models of %s: %s", http.base_url, http.redact(str(exc)))
        return None
    return window_of(listing, http.model)


def window_of(listing: Any, model: str) -> int | None:
    """The window stated for ``model`` in a models listing; None when it states none."""
    entries = listing.get("data") if isinstance(listing, dict) else listing
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            for key in WINDOW_KEYS:
                value = entry.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
            top = entry.get("top_provider")  # OpenRouter
            if isinstance(top, dict):
                value = top.get("context_length")
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
    return None
