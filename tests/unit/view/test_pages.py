"""The view's pages: the tree's rows, escaping, and the report's own policy."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.fixtures.fake_services import Editor, Model
from tests.fixtures.view_sessions import HOSTILE_PROMPT, fill_view_session
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.records import Session, Tokens, Turn
from trellisd.view import pages
from trellisd.view.reader import Reader


def _turn(turn_id: str, parent: str | None) -> Turn:
    return Turn(turn_id, "s-1", parent, f"r-{turn_id}", turn_id, "", "finished", None, Tokens(), "")


def test_a_branch_is_indented_under_the_turn_it_leaves_and_the_head_path_goes_on() -> None:
    # a - b - c (head), and d branching from a, e from d
    turns = [_turn("a", None), _turn("b", "a"), _turn("d", "a"), _turn("c", "b"), _turn("e", "d")]
    rows = pages.tree_rows(turns, "c")
    assert [(r.turn.turn_id, r.number, r.depth, r.on_head) for r in rows] == [
        ("a", 1, 0, True),
        ("d", 3, 1, False),
        ("e", 5, 1, False),
        ("b", 2, 0, True),
        ("c", 4, 0, True),
    ]


def test_a_long_path_stays_flat() -> None:
    turns = [_turn("t0", None)] + [_turn(f"t{n}", f"t{n - 1}") for n in range(1, 3000)]
    rows = pages.tree_rows(turns, "t2999")
    assert {r.depth for r in rows} == {0} and len(rows) == 3000


@pytest_asyncio.fixture
async def reader(tmp_path: Path) -> AsyncIterator[tuple[Reader, Session, list[Turn]]]:
    root = tmp_path / "root"
    root.mkdir()
    session_id = fill_view_session(tmp_path / "s.db", root, 6)
    app = await services.start(
        tmp_path / "s.db", ProviderSettings(name="openai"), Editor(), lambda s: Model()
    )
    read = Reader(app)
    yield read, await read.session(session_id), await read.turns(session_id)
    await app.close()


def _inline(html: str, tag: str) -> str:
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", html, re.S)
    assert len(found) == 1
    return found[0]


async def test_the_report_holds_every_turn_and_allows_only_its_own_script_and_style(
    reader: tuple[Reader, Session, list[Turn]],
) -> None:
    read, session, turns = reader
    session_id = session.session_id
    details = {t.turn_id: await read.detail_of(t) for t in turns}
    html = pages.session_page(session, turns, details, await read.verify(session_id))

    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    assert policy.group(1).replace("&#39;", "'") == pages.REPORT_POLICY
    assert pages.source_hash(_inline(html, "script")) in pages.REPORT_POLICY
    assert pages.source_hash(_inline(html, "style")) in pages.REPORT_POLICY
    assert "default-src 'none'" in pages.REPORT_POLICY
    assert not re.search(r"<[a-z]+[^<>]*\ssrc=", html) and "<link" not in html  # nothing loaded
    assert html.count('<details class="turn"') == 6 and " data-src=" not in html
    assert HOSTILE_PROMPT not in html and "&lt;script&gt;window.__pwned" in html
    assert "table" in html and "diff_add" in html  # the change set's diff
    assert "never remove everything" in html and "keep the old name too" in html
    assert "The log verifies" in html and (session.head_hash or "none") in html


async def test_the_served_page_fetches_turns_and_the_verdict_when_shown(
    reader: tuple[Reader, Session, list[Turn]],
) -> None:
    read, session, turns = reader
    session_id = session.session_id
    html = pages.session_page(session, turns)
    assert html.count(" data-src=") == len(turns) and "http-equiv" not in html
    assert f'data-load="/s/{session_id}/verify"' in html
    assert "make parsing lazy" in html  # the plan, on the page itself
    assert "<svg" in html  # the chart
    fragment = pages.turn_fragment(await read.detail(session_id, turns[1].turn_id))
    assert "Refused" in fragment and "Steer" in fragment and "diff_add" in fragment
