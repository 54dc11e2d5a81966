"""What every model wire over HTTP shares: its settings, one pooled :class:`Endpoint`, the
window its models endpoint states, and a stream of its decoder's events. A wire says only what
is its own: the path it posts to, its headers, its request body and its decoder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .base import ModelRequest, ProviderEvent
from .http import Endpoint, HttpSettings, StreamDecoder
from .models import stated_window


class HttpProvider:
    """A provider speaking one wire over HTTP (the ``Provider`` seam); subclasses name the
    wire's own parts."""

    def __init__(self, http: HttpSettings, name: str) -> None:
        self.name = name
        self.model = http.model
        self.http = http
        self.endpoint = Endpoint(http)

    async def aclose(self) -> None:
        """Close the pooled connections to the endpoint."""
        await self.endpoint.aclose()

    def path(self) -> str:
        """Where a request is posted, below the base URL."""
        raise NotImplementedError

    def models_path(self) -> str:
        """Where the models endpoint is, below the base URL."""
        return "/models"

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def decoder(self) -> StreamDecoder:
        """A decoder for one response's events."""
        raise NotImplementedError

    async def context_window(self) -> int | None:
        """The window the models endpoint states for the model, if it states one."""
        return await stated_window(self.endpoint, self.models_path(), self.headers())

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        return self.endpoint.stream(self.path(), self.headers(), self.body(request), self.decoder)
