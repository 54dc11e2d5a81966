"""A session's processes in the ACP client's terminals (``terminal/*``), when it offers them:
the walled command line runs in the editor's terminal, its output is read from there, and
stopping it kills and releases the terminal. Every request fits the ACP schema; the editor
here runs the command for real, as a terminal would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests import acp_schema
from tests.fixtures.terminals import Terminals
from tests.fixtures.waits import eventually
from trellisd.acp.terminals import ClientTerminals
from trellisd.sandbox.walls import Walls
from trellisd.services.processes import ProcessService, SessionProcesses
from trellisd.tools import ToolContext, ToolFailure
from trellisd.tools.environment import use_environment
from trellisd.tools.processes import ProcessState, process_tools


class Editor:
    """The client's side of ``terminal/*`` over the wire's JSON, each request checked against
    the ACP schema."""

    def __init__(self) -> None:
        self.terminals = Terminals()
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: Any) -> Any:
        if acp_schema.available():
            acp_schema.check({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        self.asked.append((method, params))
        terminals = self.terminals
        if method == "terminal/create":
            env = {v["name"]: v["value"] for v in params["env"]}
            made = await terminals.create(
                params["command"], params["args"], env, params["cwd"], params["outputByteLimit"]
            )
            return {"terminalId": made}
        terminal_id = params["terminalId"]
        if method == "terminal/output":
            text, cut, status = terminals.output(terminal_id)
            return {"output": text, "truncated": cut, "exitStatus": status}
        if method == "terminal/wait_for_exit":
            return await terminals.wait_for_exit(terminal_id)
        if method == "terminal/kill":
            terminals.kill(terminal_id)
        elif method == "terminal/release":
            terminals.release(terminal_id)
        return {}


@pytest.fixture
async def editor() -> Any:
    editor = Editor()
    yield editor
    await editor.terminals.close()


def tools(service: ProcessService) -> dict[str, Any]:
    return {t.name: t for t in process_tools(SessionProcesses(service, "s1", "t1"))}


class Quiet:
    """Sends no output; keeps how each process ended, as the editor's windows are told."""

    def __init__(self) -> None:
        self.exited: list[ProcessState] = []

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        pass

    def process_exited(self, state: ProcessState) -> None:
        self.exited.append(state)


PRINTS = "import time; print('ready', flush=True); time.sleep(300)"


async def test_a_process_runs_in_the_editors_terminal_inside_the_walls(
    editor: Editor, tmp_path: Path
) -> None:
    use_environment({"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "ghp_secret"}, ())
    quiet = Quiet()
    service = ProcessService(quiet)  # type: ignore[arg-type]
    service.terminals = lambda session_id: ClientTerminals(editor, session_id)
    found = tools(service)
    walls = Walls("workspace-write", False, tmp_path)
    context = ToolContext(tmp_path, walls=walls)
    argv = [sys.executable, "-c", PRINTS]
    answer = await found["start_process"].run({"argv": argv}, context)
    pid = answer.split()[2].rstrip(":")
    method, created = editor.asked[0]
    assert method == "terminal/create" and created["sessionId"] == "s1"
    command = [created["command"], *created["args"]]  # a process bound may come first
    assert any(a.endswith("/bwrap") for a in command) and command[-3:] == argv
    assert created["cwd"] == str(tmp_path) and created["outputByteLimit"] == 1024 * 1024
    env = {v["name"]: v["value"] for v in created["env"]}
    assert env["GITHUB_TOKEN"] == "" and env["PATH"] == "/usr/bin:/bin"  # the secret blanked

    async def printed() -> str | None:
        read: str = await found["read_process_output"].run({"processId": pid, "since": 0}, context)
        return read if "\nready\n" in read else None

    read = await eventually(printed, "the terminal's output")
    assert "still running" in read and "output from offset 0 to 6:\nready\n" in read
    with pytest.raises(ToolFailure, match="takes no input"):
        await found["write_process_input"].run({"processId": pid, "text": "x\n"}, context)

    said = await found["stop_process"].run({"processId": pid}, context)
    assert "killed by signal 9" in said
    methods = [m for m, _ in editor.asked]
    assert methods.index("terminal/kill") < methods.index("terminal/release")
    assert editor.terminals.open == {}
    assert not service.state("s1", pid).running
    # The exit status the terminal told is the one the windows are told.
    assert [(s.process_id, s.exit_code) for s in quiet.exited] == [(pid, -9)]


def test_what_a_terminal_adds_is_found_though_its_start_was_cut() -> None:
    from trellisd.services.processes import _after

    assert _after("", "ready\n", False) == "ready\n"
    assert _after("ready\n", "ready\nGET /\n", False) == "GET /\n"
    seen = "".join(f"line {i}\n" for i in range(100))
    assert _after(seen, seen[300:] + "line 100\n", True) == "line 100\n"  # its start cut
    assert _after("abc", "xyz", True) == "xyz"  # all of it is new: nothing seen is left
