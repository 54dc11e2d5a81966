"""Hooks over ACP: a prompt a ``userPromptSubmit`` hook blocks ends ``session/prompt`` with
the stop reason ``refusal``, the hook's reason shown as the agent's message; the model is
never called."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fixtures.fake_services import Model
from tests.fixtures.reachable import reachable
from tests.unit.acp.test_acp_dispatch import answer
from tests.unit.acp.test_acp_thoughts import Client
from trellisd import services
from trellisd.acp.agent import TrellisAgent
from trellisd.acp.notifier import AcpNotifier
from trellisd.config import ProviderSettings
from trellisd.config_file import Settings
from trellisd.hooks import HookSpec

BLOCK = 'import sys\nsys.stderr.write("no deploys on Fridays")\nsys.exit(2)\n'


async def test_a_blocked_prompt_ends_with_refusal_saying_why(tmp_path: Path, root: str) -> None:
    script = tmp_path / "friday.py"
    script.write_text(BLOCK)
    hook = HookSpec("userPromptSubmit", (sys.executable, str(reachable(script))))
    settings = Settings(ProviderSettings(name="openai"), hooks=(hook,))
    model = Model()
    holder: list[services.Services] = []
    notifier = AcpNotifier(lambda: holder[0].changes)
    app = await services.start(tmp_path / "store.db", settings, notifier, lambda s: model)
    holder.append(app)
    try:
        client = Client()
        notifier.connect(client)
        agent = TrellisAgent(app, notifier)
        await answer(agent, 0, "initialize", {"protocolVersion": 1})
        new = await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []})
        prompt = [{"type": "text", "text": "deploy it"}]
        params = {"sessionId": new["sessionId"], "prompt": prompt}
        result = await answer(agent, 2, "session/prompt", params)

        assert result == {"stopReason": "refusal"}
        said = "a userPromptSubmit hook blocked the prompt: no deploys on Fridays"
        assert client.said() == [("agent_message_chunk", said)]
        assert model.requests == []
    finally:
        await app.close()
