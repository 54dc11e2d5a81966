"""Every provider a test makes is closed at its end, with its pooled connections, on the
test's own event loop: nothing is left for the garbage collector to find in a later test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.fixtures.provider_servers import OPENED
from trellisd.providers import close_provider


@pytest_asyncio.fixture(autouse=True)
async def close_providers() -> AsyncIterator[None]:
    yield
    while OPENED:
        await close_provider(OPENED.pop())
