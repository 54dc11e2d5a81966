""":TrellisView in real headless Neovims (0.7 and 0.11) against the real daemon: it asks for
the conversation's page (session/view), opens it with the `open_url` of setup(), else with
vim.ui.open (0.10 on) or xdg-open, and always says its URL, whose page (fetched here as a
browser would, trading the one-time token for a cookie) shows the conversation's prompt."""

from __future__ import annotations

import html
import http.cookiejar
import stat
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

try:
    from . import nvim_fixtures as fx
    from .test_nvim import Start, nvim_bin, start
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]
    from test_nvim import Start, nvim_bin, start  # type: ignore[no-redef]

__all__ = ["nvim_bin", "start"]  # the fixtures the tests below use

PROMPT = "explain how the parser reads a <frame>"


def page(url: str) -> tuple[str, str]:
    """The page at `url` as a browser gets it: the token answered with a cookie and a
    redirect, followed with the cookie. Returns the final URL and the page's text."""
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),  # 127.0.0.1 is never reached through a proxy
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
    )
    with opener.open(url, timeout=30) as answer:
        return answer.geturl(), answer.read().decode("utf-8")


def said_url(ed: fx.Editor) -> str:
    """The URL :TrellisView said (it is always said, opened or not)."""
    note = ed.wait_note("http://127.0.0.1:")
    return next(word for word in note.split() if word.startswith("http://127.0.0.1:"))


def with_a_conversation(start: Start, **options: object) -> fx.Editor:
    ed = start(script=[{"text": "It reads one frame at a time."}], **options)
    ed.command(f"Trellis {PROMPT}")
    ed.wait_text("It reads one frame at a time.")
    ed.wait_idle()
    return ed


def assert_shows_the_conversation(ed: fx.Editor, url: str) -> None:
    session_id = ed.current()["sessionId"]  # type: ignore[index]
    assert url.startswith("http://127.0.0.1:"), url
    assert f"/s/{session_id}?token=" in url, url
    final, text = page(url)
    assert "token=" not in final, "the token is traded for a cookie"
    assert html.escape(PROMPT, quote=False) in text, text[:2000]


def test_trellis_view_opens_the_page_with_open_url_and_the_page_shows_the_prompt(
    start: Start,
) -> None:
    ed = with_a_conversation(start)
    ed.lua(
        """
        T.opened = {}
        local options = vim.deepcopy(require("trellisd.config").options)
        options.open_url = function(url) table.insert(T.opened, url) end
        require("trellisd").setup(options)
        """
    )
    ed.command("TrellisView")
    opened = ed.wait_for(lambda: ed.lua("return T.opened"), "open_url to be called")
    assert len(opened) == 1
    assert said_url(ed) == opened[0], "the URL opened is said too"
    assert any("opened the conversation in the browser" in n for n in ed.notes())
    assert_shows_the_conversation(ed, opened[0])

    # each call a fresh token: the page opened once lets in no second browser
    ed.command("TrellisView")
    again = ed.wait_for(lambda: (o := ed.lua("return T.opened")) and len(o) == 2 and o, "again")
    assert again[1] != again[0]
    with pytest.raises(urllib.error.HTTPError) as refused:
        page(again[0])
    with refused.value:
        assert refused.value.code == 403


def test_with_nothing_to_open_it_the_url_is_said_and_leads_to_the_page(
    start: Start, tmp_path: Path
) -> None:
    ed = with_a_conversation(start)
    # no browser here: no program on PATH opens a URL (the daemon runs on, started before)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    ed.lua("vim.env.PATH = ...", str(empty))
    ed.command("TrellisView")
    url = said_url(ed)
    note = next(n for n in ed.notes() if url in n)
    assert "open it in a browser" in note, note
    assert_shows_the_conversation(ed, url)


def test_the_desktop_opener_is_given_the_url(start: Start, tmp_path: Path) -> None:
    """0.10 on: vim.ui.open; before it: xdg-open when it is on PATH."""
    ed = with_a_conversation(start)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    got = tmp_path / "opened.txt"
    opener = bin_dir / "xdg-open"
    opener.write_text(f'#!/bin/sh\nprintf %s "$1" > "{got}.part" && mv "{got}.part" "{got}"\n')
    opener.chmod(opener.stat().st_mode | stat.S_IXUSR)
    ed.lua("vim.env.PATH = ... .. ':' .. vim.env.PATH", str(bin_dir))
    ed.command("TrellisView")
    url = said_url(ed)
    ed.wait_for(got.exists, "xdg-open to be run")
    assert got.read_text() == url
    assert any("opened the conversation in the browser" in n for n in ed.notes())
    assert_shows_the_conversation(ed, url)


def test_without_a_conversation_trellis_view_says_how_to_have_one(start: Start) -> None:
    ed = start()
    ed.command("TrellisView")
    note = ed.wait_note("no conversation")
    assert "open in the browser" in note and ":TrellisSessions" in note, note
