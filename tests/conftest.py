"""What every test shares: the user's own configuration folder is never written; and, for the
in-process and the subprocess tests of the daemon, a model server on 127.0.0.1 and a workspace.

The daemon keeps per-user files in ``$XDG_CONFIG_HOME/trellisd`` (the log anchors' key and
signed heads, among them). Subprocess tests give each daemon a home of its own
(``tests/fixtures/environment.py``); in-process tests run in this process, so its
``XDG_CONFIG_HOME`` points at a folder of the test run's own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.model_server import ModelServer


@pytest.fixture(autouse=True, scope="session")
def _own_config_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("config")
    was = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(folder)
    try:
        yield
    finally:
        if was is None:
            del os.environ["XDG_CONFIG_HOME"]
        else:
            os.environ["XDG_CONFIG_HOME"] = was


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "README.md").write_text("# demo project\n")
    return folder
