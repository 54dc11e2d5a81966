"""The settings a daemon is started with reach its turns: handed to the services, not read
from the process's environment."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.fake_services import Editor, Model
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.config_file import Settings
from trellisd.daemon_settings import DaemonSettings
from trellisd.records import ToolCall
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Outcome


async def test_the_daemons_step_limit_bounds_a_turn_that_names_none(
    tmp_path: Path, root: Path, editor: Editor
) -> None:
    (root / "a.txt").write_text("a\n")
    model = Model()
    for n in range(10):
        model.reply("", ToolCall(f"call-{n}", "read_file", {"path": "a.txt"}))
    settings = Settings(ProviderSettings(name="openai"), daemon=DaemonSettings(max_steps=3))
    app = await services.start(tmp_path / "store.db", settings, editor, lambda s: model)
    try:
        session = (await app.sessions.open(str(root), None, None, None)).session_id
        bounded = await app.turns.turn(TurnRequest(session, "read it", max_steps=5))
        default = await app.turns.turn(TurnRequest(session, "read it again"))
    finally:
        await app.close()

    assert bounded.outcome == default.outcome == Outcome.EXHAUSTED
    assert len(model.requests) == 5 + 3
