"""The settings a daemon is started with reach its turns: handed to the services, not read
from the process's environment."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.fixtures.fake_services import Editor, Model
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.config_file import Settings, load_settings
from trellisd.daemon_settings import DaemonSettings
from trellisd.records import ToolCall
from trellisd.services.settings import WindowSettings, use_window
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Decision, Outcome, StepKind


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


async def test_each_window_turns_with_its_own_provider_and_its_programs_see_its_environment(
    tmp_path: Path, root: Path, editor: Editor
) -> None:
    """Two windows of one daemon, each with the settings its environment was read into: a
    turn uses its window's model, and a program it runs sees its window's variables only."""
    model = Model()
    made: list[str | None] = []

    def providers(settings: ProviderSettings) -> Model:
        made.append(settings.model)
        return model

    daemon = Settings(ProviderSettings(name="openai", model="the-daemons"))
    app = await services.start(tmp_path / "store.db", daemon, editor, providers)
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    printed: dict[str, str] = {}

    async def in_window(name: str) -> None:
        environment = {"XDG_CONFIG_HOME": str(tmp_path), "TRELLISD_MODEL": name, "WHO": name}
        read = load_settings({"TRELLISD_PROVIDER": "openai", **environment})
        use_window(WindowSettings(read.provider, read))
        editor.decisions = [Decision.ALLOW]
        printer = [sys.executable, "-c", "import os; print(os.environ.get('WHO'))"]
        model.reply("", ToolCall(f"call-{name}", "run_command", {"argv": printer}))
        model.reply("Done.")
        await app.turns.turn(TurnRequest(session, "who?"))
        steps = await app.runs.steps((await app.sessions.history(session))[-1].run_id)
        printed[name] = next(s.result or "" for s in steps if s.decision == StepKind.TOOL)

    try:
        await asyncio.create_task(in_window("first"))
        await asyncio.create_task(in_window("second"))
        model.reply("Mine.")
        await app.turns.turn(TurnRequest(session, "and you?"))  # no window: the daemon's
    finally:
        await app.close()

    assert made == ["first", "second", "the-daemons"]
    assert printed["first"].splitlines()[-1] == "first"
    assert printed["second"].splitlines()[-1] == "second"
