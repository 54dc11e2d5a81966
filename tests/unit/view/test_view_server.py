"""The view server in this process: who it lets in, the headers it sends, what it serves,
and ``session/view``'s one server per daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.fixtures.fake_services import Editor, Model
from tests.fixtures.view_sessions import fill_view_session
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.errors import NotFound
from trellisd.services import Services
from trellisd.view import shared
from trellisd.view.pages import PAGE_POLICY
from trellisd.view.reader import Reader
from trellisd.view.server import COOKIE, ViewServer


@pytest_asyncio.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[Services, str]]:
    root = tmp_path / "root"
    root.mkdir()
    session_id = fill_view_session(tmp_path / "s.db", root, 5, title="lazy parser")
    started = await services.start(
        tmp_path / "s.db", ProviderSettings(name="openai"), Editor(), lambda s: Model()
    )
    yield started, session_id
    await started.close()


@pytest_asyncio.fixture
async def server(app: tuple[Services, str]) -> AsyncIterator[ViewServer]:
    view = ViewServer(Reader(app[0]))
    await view.start()
    yield view
    await view.close()


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(follow_redirects=False, trust_env=False)


async def _let_in(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """Open a one-time URL, as a browser does: the redirect, then the page, with the cookie."""
    first = await client.get(url)
    assert first.status_code == 303 and "token" not in first.headers["location"]
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return await client.get(url.split("?")[0])


async def test_the_token_opens_the_page_once_and_the_cookie_keeps_it_open(
    server: ViewServer, app: tuple[Services, str]
) -> None:
    _, session_id = app
    url = server.url(f"/s/{session_id}")
    async with _client() as client:
        page = await _let_in(client, url)
        assert page.status_code == 200 and "lazy parser" in page.text
        assert page.headers["content-security-policy"] == PAGE_POLICY
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        assert (await client.get(f"{url.split('?')[0]}/verify")).text.count("verifies") == 1
    async with _client() as stranger:  # the same link again, from another browser
        again = await stranger.get(url)
        assert again.status_code == 403 and COOKIE not in again.headers.get("set-cookie", "")


async def test_a_request_without_token_or_cookie_is_refused(server: ViewServer) -> None:
    base = f"http://127.0.0.1:{server.port}"
    async with _client() as client:
        for path in ("/", "/s/x", "/?token=made-up", "/static/view.js"):
            answer = await client.get(base + path)
            assert answer.status_code == 403, path
            assert answer.headers["content-security-policy"] == PAGE_POLICY
    async with httpx.AsyncClient(cookies={server.cookie: "made-up"}, trust_env=False) as forger:
        assert (await forger.get(base + "/")).status_code == 403


async def test_a_host_not_this_server_is_refused_even_with_a_good_cookie(
    server: ViewServer,
) -> None:
    async with _client() as client:
        assert (await _let_in(client, server.url("/"))).status_code == 200
        rebound = await client.get(
            f"http://127.0.0.1:{server.port}/", headers={"Host": f"evil.example:{server.port}"}
        )
        assert rebound.status_code == 403
        other_port = await client.get(
            f"http://127.0.0.1:{server.port}/", headers={"Host": "127.0.0.1:1"}
        )
        assert other_port.status_code == 403
        by_name = await client.get(
            f"http://127.0.0.1:{server.port}/", headers={"Host": f"localhost:{server.port}"}
        )
        assert by_name.status_code == 200


async def test_the_list_finds_sessions_and_a_turn_opens_with_its_diff(
    server: ViewServer, app: tuple[Services, str]
) -> None:
    app_, session_id = app
    base = f"http://127.0.0.1:{server.port}"
    async with _client() as client:
        listed = await _let_in(client, server.url("/"))
        assert "lazy parser" in listed.text
        found = await client.get(base + "/", params={"q": "streaming"})
        assert session_id in found.text
        missing = await client.get(base + "/", params={"q": "nothing like this"})
        assert session_id not in missing.text and "No session matches" in missing.text
        second = (await app_.sessions.turns(session_id))[1]
        fragment = await client.get(f"{base}/s/{session_id}/t/{second.turn_id}")
        assert fragment.status_code == 200 and "diff_add" in fragment.text
        unknown = await client.get(f"{base}/s/s-nope")
        assert unknown.status_code == 404 and "s-nope" in unknown.text
        elsewhere = await client.get(f"{base}/s/s-nope/t/{second.turn_id}")
        assert elsewhere.status_code == 404


async def test_session_view_starts_one_server_and_gives_a_fresh_token_each_time(
    app: tuple[Services, str],
) -> None:
    app_, session_id = app
    first = await shared.session_url(app_, session_id)
    second = await shared.session_url(app_, session_id)
    assert first.split("?")[0] == second.split("?")[0]
    assert first.startswith("http://127.0.0.1:") and f"/s/{session_id}?token=" in first
    assert first != second
    async with _client() as client:
        assert (await _let_in(client, second)).status_code == 200
    with pytest.raises(NotFound):
        await shared.session_url(app_, "s-nope")


async def test_the_daemons_clean_exit_stops_its_view_server(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    session_id = fill_view_session(tmp_path / "s.db", root, 2, title="lazy parser")
    app_ = await services.start(
        tmp_path / "s.db", ProviderSettings(name="openai"), Editor(), lambda s: Model()
    )
    url = await shared.session_url(app_, session_id)
    await app_.close()
    async with _client() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(url)
