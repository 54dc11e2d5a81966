"""Two editor windows on the shared daemon, each with a session over one git folder, as a new
user would try it: A's command writes a.txt and waits while B's writes b.txt and b2.txt.
A's change set says which of its paths B may have written, and reverting either turn
answers a conflict naming them instead of deleting the other session's files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Daemon, Windows
from tests.fixtures.driver import open_session, turn
from tests.fixtures.gates import Gate, gates_in
from tests.fixtures.git_repo import make_repo
from tests.fixtures.model_server import ModelServer

OPEN = {
    "layers": [{"name": "editor", "allowRead": ["**"], "allowWrite": ["**"], "allowExec": ["*"]}],
    "approval": "all",
}


async def changes(window: Daemon, turn_id: str) -> dict[str, dict[str, Any]]:
    files = (await window.call("turn/changes", {"turnId": turn_id}))["files"]
    return {f["path"]: f for f in files}


def shell(script: str) -> dict[str, Any]:
    return {"name": "run_command", "arguments": {"argv": ["sh", "-c", script]}}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "# demo project\n"})


def on_disk(repo: Path) -> dict[str, str]:
    names = ("a.txt", "b.txt", "b2.txt")
    return {n: (repo / n).read_text() for n in names if (repo / n).exists()}


async def test_two_windows_sessions_in_one_folder_never_revert_each_others_files(
    windows: Windows, model: ModelServer, repo: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    session_a = await open_session(a, repo, policy=OPEN)
    session_b = await open_session(b, repo, policy=OPEN)
    gate = Gate(gates_in(repo), "a")
    try:
        # The model answers in the order asked: A's command, B's, B's end, A's end.
        model.reply("", tool_calls=[shell(gate.script("echo a > a.txt"))])
        model.reply("", tool_calls=[shell("echo b > b.txt && echo b2 > b2.txt")])
        model.reply("B is done.")
        model.reply("A is done.")
        running_a = asyncio.ensure_future(turn(a, session_a, "write a.txt"))
        await gate.reached()
        turn_b = await turn(b, session_b, "write b.txt and b2.txt")
        await gate.release()
        turn_a = await running_a
    finally:
        gate.unblock()
    assert turn_a["outcome"] == turn_b["outcome"] == "finished"

    by_a = [{"sessionId": session_a["sessionId"], "turnId": turn_a["turnId"]}]
    by_b = [{"sessionId": session_b["sessionId"], "turnId": turn_b["turnId"]}]
    files_a = await changes(a, turn_a["turnId"])
    assert "shared" not in files_a["a.txt"]
    assert {p: (f.get("shared"), f.get("sharedWith")) for p, f in files_a.items()} == {
        "a.txt": (None, None),
        "b.txt": (True, by_b),
        "b2.txt": (True, by_b),
    }
    seen_by_a = await changes(b, turn_b["turnId"])  # any window reads any session's
    assert {p: f.get("sharedWith") for p, f in seen_by_a.items()} == {
        "b.txt": by_a,
        "b2.txt": by_a,
    }

    written = on_disk(repo)
    reverting_a = await a.error("turn/revert", {"turnId": turn_a["turnId"]})
    assert reverting_a.code == -32020 and reverting_a.data["paths"] == ["b.txt", "b2.txt"]
    assert reverting_a.data["shared"][0] == {"path": "b.txt", "sharedWith": by_b}
    reverting_b = await b.error("turn/revert", {"turnId": turn_b["turnId"]})
    assert reverting_b.code == -32020 and reverting_b.data["paths"] == ["b.txt", "b2.txt"]
    assert on_disk(repo) == written == {"a.txt": "a\n", "b.txt": "b\n", "b2.txt": "b2\n"}

    forced = await a.call("turn/revert", {"turnId": turn_a["turnId"], "force": True})
    assert forced["restored"] == ["a.txt", "b.txt", "b2.txt"]
    assert on_disk(repo) == {}
