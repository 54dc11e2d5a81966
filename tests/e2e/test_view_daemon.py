"""``session/view`` over the wire: the daemon serves the session's page on 127.0.0.1, one
server for every call, each URL letting one browser in once."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import open_session, turn
from tests.fixtures.model_server import ModelServer


async def test_session_view_gives_a_one_time_url_of_the_sessions_page(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    session = await open_session(daemon, workspace, title="viewed <b>here</b>")
    model.reply("Parsing is **lazy**.")
    await turn(daemon, session, "make the parser lazy")
    first = await daemon.call("session/view", {"sessionId": session["sessionId"]})
    second = await daemon.call("session/view", {"sessionId": session["sessionId"]})
    page_url = first["url"].split("?")[0]
    assert page_url == second["url"].split("?")[0] and first["url"] != second["url"]
    assert page_url.endswith(f"/s/{session['sessionId']}")

    async with httpx.AsyncClient(trust_env=False, follow_redirects=True) as browser:
        page = await browser.get(first["url"])  # follows the redirect, with the cookie
        assert page.status_code == 200 and str(page.url) == page_url
        assert "viewed &lt;b&gt;here&lt;/b&gt;" in page.text and "make the parser lazy" in page.text
        assert (await browser.get(first["url"])).status_code == 403  # used once
    async with httpx.AsyncClient(trust_env=False) as stranger:
        assert (await stranger.get(page_url)).status_code == 403

    error = await daemon.error("session/view", {"sessionId": "s-nope"})
    assert error.code == -32010
