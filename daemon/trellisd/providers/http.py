"""What every HTTP provider shares: endpoint settings, timeouts, and turning HTTP failures
into messages a person can act on (never containing the key)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from .base import ProviderError


@dataclass(frozen=True)
class HttpSettings:
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    key_source: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 120.0

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.read_timeout, connect=self.connect_timeout)


def explain_status(response: httpx.Response, http: HttpSettings) -> str:
    status = response.status_code
    detail = _detail(response)
    where = f"{http.base_url} (model {http.model})"
    if status == 401:
        source = http.key_source or "no variable: no key was set"
        return (
            f"the provider at {http.base_url} refused the API key (HTTP 401); the key came"
            f" from {source}{detail}"
        )
    if status == 403:
        return f"the provider at {where} denied access (HTTP 403){detail}"
    if status == 404:
        return (
            f"the provider at {where} answered 404: check the base URL and the model name{detail}"
        )
    if status == 400:
        return f"the provider at {where} rejected the request (HTTP 400){detail}"
    if status == 429:
        return f"the provider at {where} is rate-limiting (HTTP 429){detail}"
    return f"the provider at {where} failed with HTTP {status}{detail}"


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()[:300]
        return f": {text}" if text else ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return f": {str(error['message'])[:300]}"
    if isinstance(error, str):
        return f": {error[:300]}"
    return ""


def transport_error(exc: httpx.HTTPError, http: HttpSettings) -> ProviderError:
    if isinstance(exc, httpx.ConnectError):
        return ProviderError(f"cannot connect to the provider at {http.base_url}: {exc}")
    if isinstance(exc, httpx.ConnectTimeout):
        return ProviderError(f"connecting to the provider at {http.base_url} timed out")
    if isinstance(exc, httpx.ReadTimeout):
        return ProviderError(
            f"the provider at {http.base_url} stopped sending for"
            f" {http.read_timeout:g} s; the stream was abandoned"
        )
    if isinstance(exc, httpx.RemoteProtocolError):
        return ProviderError(f"the provider at {http.base_url} closed the stream mid-way")
    return ProviderError(f"the request to the provider at {http.base_url} failed: {exc}")
