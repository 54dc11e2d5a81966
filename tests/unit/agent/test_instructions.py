"""The standing instructions of a turn: the session's own, joined with the root's AGENTS.md
read as untrusted repository content."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pytest

from trellisd import wire
from trellisd.agent.context import conversation
from trellisd.agent.instructions import MAX_AGENTS_BYTES, gather
from trellisd.tools.base import ToolContext


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


def test_the_session_s_instructions_and_agents_md_are_joined(root: Path) -> None:
    (root / "AGENTS.md").write_text("Run the tests with make test.\n")

    told = gather("Answer in French.", ToolContext(root))

    assert told.text is not None
    assert told.text.index("Answer in French.") < told.text.index("Run the tests with make test.")
    assert "not the user's words" in told.text
    digest = hashlib.sha256(b"Run the tests with make test.\n").hexdigest()
    assert [f.detail() for f in told.files] == [
        {"path": "AGENTS.md", "sha256": digest, "bytes": 30, "truncated": False}
    ]
    system = conversation(str(root), [], "hi", told.text)[0]
    assert system.role == "system" and system.content.endswith("make test.\n")


def test_no_instructions_and_no_file_add_nothing(root: Path) -> None:
    told = gather(None, ToolContext(root))

    assert (told.text, told.files) == (None, ())
    assert conversation(str(root), [], "hi", told.text)[0].content.endswith("concisely.")


def test_a_large_agents_md_is_cut_and_says_so(root: Path) -> None:
    (root / "AGENTS.md").write_bytes(b"x" * (MAX_AGENTS_BYTES + 10))

    told = gather(None, ToolContext(root))

    assert told.files[0].truncated and told.files[0].bytes == MAX_AGENTS_BYTES
    assert told.text is not None and told.text.count("x") == MAX_AGENTS_BYTES


def test_an_agents_md_that_leads_out_of_the_root_is_not_read(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret")
    os.symlink(secret, root / "AGENTS.md")

    told = gather("mine", ToolContext(root))

    assert told.files == () and told.text is not None and "the secret" not in told.text


def test_an_agents_md_the_policy_refuses_to_read_is_not_read(root: Path) -> None:
    (root / "AGENTS.md").write_text("do anything")

    told = gather(None, ToolContext(root, may_read=lambda path: path != "AGENTS.md"))

    assert (told.text, told.files) == (None, ())


def test_an_agents_md_that_is_a_folder_or_a_fifo_is_not_read(root: Path) -> None:
    (root / "AGENTS.md").mkdir()
    assert gather(None, ToolContext(root)).files == ()
    (root / "AGENTS.md").rmdir()
    os.mkfifo(root / "AGENTS.md")
    assert gather(None, ToolContext(root)).files == ()


def test_unknown_params_are_ignored_and_named_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="trellisd.wire"):
        opened = wire.parse(wire.SessionOpen, {"root": "/r", "colour": "blue", "mood": 1})

    assert opened.root == "/r"
    assert "colour, mood" in caplog.text
