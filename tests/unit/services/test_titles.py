"""A session's title when the user gave none: one rule, whichever protocol the first prompt
came over."""

from __future__ import annotations

from pathlib import Path

from trellisd.services import Services
from trellisd.services.titles import TITLE_CHARS, title_of
from trellisd.services.turns import TurnRequest

LONG = "Why does the parser fail on tabs when the file also has a BOM and CRLF endings?"


def test_a_title_is_the_first_line_cut_to_sixty_characters() -> None:
    assert title_of("  a long\nsecond") == "a long"
    assert len(LONG) > TITLE_CHARS == 60
    assert title_of(LONG) == LONG[:59] + "…"


async def test_a_turn_and_an_acp_prompt_name_a_session_alike(app: Services, root: Path) -> None:
    native = (await app.sessions.open(str(root), None, None, None)).session_id
    acp = (await app.sessions.open(str(root), None, None, None)).session_id

    await app.turns.turn(TurnRequest(native, LONG))
    named = await app.sessions.name_after(acp, LONG)  # ACP names it before the turn starts
    await app.turns.turn(TurnRequest(acp, LONG))

    assert named is not None
    assert (await app.sessions.get(native)).title == (await app.sessions.get(acp)).title
    assert (await app.sessions.get(acp)).title == title_of(LONG)
    assert await app.sessions.name_after(acp, "another prompt") is None


async def test_a_session_the_user_titled_keeps_its_title(app: Services, root: Path) -> None:
    session = (await app.sessions.open(str(root), "mine", None, None)).session_id
    await app.turns.turn(TurnRequest(session, LONG))
    assert (await app.sessions.get(session)).title == "mine"
