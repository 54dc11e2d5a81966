"""The ACP agent over real services in a temp store, with a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.fixtures.fake_services import Model
from trellisd import services
from trellisd.acp.agent import TrellisAgent
from trellisd.acp.notifier import AcpNotifier
from trellisd.config import ProviderSettings


@pytest_asyncio.fixture
async def agent(tmp_path: Path) -> AsyncIterator[TrellisAgent]:
    holder: list[services.Services] = []
    notifier = AcpNotifier(lambda: holder[0].changes)
    app = await services.start(
        tmp_path / "store.db", ProviderSettings(name="openai"), notifier, lambda s: Model()
    )
    holder.append(app)
    yield TrellisAgent(app, notifier)
    await app.close()


@pytest.fixture
def root(tmp_path: Path) -> str:
    folder = tmp_path / "root"
    folder.mkdir()
    return str(folder)
