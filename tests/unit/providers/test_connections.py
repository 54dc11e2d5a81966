"""A provider keeps its connection to the endpoint between calls, and lets it go when closed.
Real servers on 127.0.0.1 throughout."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.fixtures.provider_servers import (
    Response,
    ScriptServer,
    anthropic_reply,
    collect,
    openai_reply,
)
from trellisd.config import ProviderSettings
from trellisd.providers import close_provider, make_provider
from trellisd.providers.base import Message, ModelRequest, Provider, TextDelta

REQUEST = ModelRequest([Message("user", "hi")])
REPLIES = {"openai": openai_reply, "anthropic": anthropic_reply}


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def provider(name: str, server: ScriptServer) -> Provider:
    base = server.url + ("/v1" if name == "openai" else "")
    return make_provider(ProviderSettings(name=name, base_url=base, model="m", api_key="k"))


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("name", ["openai", "anthropic"])
async def test_a_second_call_reuses_the_kept_alive_connection(
    name: str, server: ScriptServer
) -> None:
    reply = REPLIES[name]
    server.queue(
        Response(chunks=reply(["one"]), keep_alive=True),
        Response(chunks=reply(["two"]), keep_alive=True),
    )
    made = provider(name, server)

    first = await collect(made.stream(REQUEST))
    second = await collect(made.stream(REQUEST))
    await close_provider(made)

    assert (text_of(first), text_of(second)) == ("one", "two")
    assert [r.connection for r in server.requests] == [1, 1]


@pytest.mark.parametrize("name", ["openai", "anthropic"])
async def test_closing_the_provider_closes_its_connection_and_a_later_call_reconnects(
    name: str, server: ScriptServer
) -> None:
    reply = REPLIES[name]
    server.queue(
        Response(chunks=reply(["before"]), keep_alive=True),
        Response(chunks=reply(["after"]), keep_alive=True),
    )
    made = provider(name, server)
    await collect(made.stream(REQUEST))

    await close_provider(made)
    assert await asyncio.to_thread(server.connection_closed.wait, 10)
    again = await collect(made.stream(REQUEST))
    await close_provider(made)

    assert server.closed >= {1}
    assert text_of(again) == "after"
    assert [r.connection for r in server.requests] == [1, 2]


async def test_closing_a_provider_that_holds_nothing_is_harmless() -> None:
    scripted = make_provider(ProviderSettings(name="scripted"))

    await close_provider(scripted)

    assert "hi" in text_of(await collect(scripted.stream(REQUEST)))
