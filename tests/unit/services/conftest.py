"""The services over a real store in a temp folder, a fake provider and a fake editor."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.fixtures.fake_services import Editor, Model
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.services import Services


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
def editor() -> Editor:
    return Editor()


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "root"
    folder.mkdir()
    yield folder


@pytest_asyncio.fixture
async def app(tmp_path: Path, model: Model, editor: Editor) -> AsyncIterator[Services]:
    started = await services.start(
        tmp_path / "store.db", ProviderSettings(name="openai"), editor, lambda s: model
    )
    yield started
    await started.close()
