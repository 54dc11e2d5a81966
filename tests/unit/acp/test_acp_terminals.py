"""A session's processes in the ACP client's terminals (``terminal/*``), when it offers them:
the walled command line runs in the editor's terminal, its output is read from there, and
stopping it kills and releases the terminal. Every request fits the ACP schema; the editor
here runs the command for real, as a terminal would."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import acp_schema
from tests.fixtures.waits import eventually
from trellisd.acp.terminals import ClientTerminals
from trellisd.sandbox.walls import Walls
from trellisd.services.processes import ProcessService, SessionProcesses
from trellisd.tools import ToolContext, ToolFailure
from trellisd.tools.environment import use_environment
from trellisd.tools.processes import process_tools


class Terminal:
    def __init__(self, process: asyncio.subprocess.Process, limit: int) -> None:
        self.process, self.limit = process, limit
        self.output = b""
        self.truncated = False
        self.reading = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.output += chunk
            if len(self.output) > self.limit:
                self.output, self.truncated = self.output[-self.limit :], True

    def status(self) -> dict[str, Any] | None:
        code = self.process.returncode
        if code is None:
            return None
        return {"exitCode": None, "signal": "SIGKILL"} if code < 0 else {"exitCode": code}


class Editor:
    """The client's side of ``terminal/*``: each command run as a terminal would run it."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.terminals: dict[str, Terminal] = {}

    async def request(self, method: str, params: Any) -> Any:
        if acp_schema.available():
            acp_schema.check({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        self.asked.append((method, params))
        if method == "terminal/create":
            env = {v["name"]: v["value"] for v in params["env"]}
            process = await asyncio.create_subprocess_exec(
                params["command"],
                *params["args"],
                cwd=params["cwd"],
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            terminal_id = f"term-{len(self.terminals) + 1}"
            self.terminals[terminal_id] = Terminal(process, params["outputByteLimit"])
            return {"terminalId": terminal_id}
        terminal = self.terminals[params["terminalId"]]
        if method == "terminal/output":
            text, cut = terminal.output.decode(), terminal.truncated
            return {"output": text, "truncated": cut, "exitStatus": terminal.status()}
        if method == "terminal/wait_for_exit":
            await terminal.process.wait()
            await terminal.reading
            return terminal.status()
        if method == "terminal/kill":
            if terminal.process.returncode is None:
                terminal.process.kill()
            return {}
        if method == "terminal/release":
            del self.terminals[params["terminalId"]]
            return {}
        raise AssertionError(f"unexpected {method}")


@pytest.fixture
async def editor() -> Any:
    editor = Editor()
    yield editor
    for terminal in editor.terminals.values():
        if terminal.process.returncode is None:
            terminal.process.kill()
            await terminal.process.wait()


def tools(service: ProcessService) -> dict[str, Any]:
    return {t.name: t for t in process_tools(SessionProcesses(service, "s1", "t1"))}


class Quiet:
    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        pass


PRINTS = "import time; print('ready', flush=True); time.sleep(300)"


async def test_a_process_runs_in_the_editors_terminal_inside_the_walls(
    editor: Editor, tmp_path: Path
) -> None:
    use_environment({"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "ghp_secret"}, ())
    service = ProcessService(Quiet())  # type: ignore[arg-type]
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
    assert editor.terminals == {}
    assert not service.state("s1", pid).running


def test_what_a_terminal_adds_is_found_though_its_start_was_cut() -> None:
    from trellisd.services.processes import _after

    assert _after("", "ready\n", False) == "ready\n"
    assert _after("ready\n", "ready\nGET /\n", False) == "GET /\n"
    seen = "".join(f"line {i}\n" for i in range(100))
    assert _after(seen, seen[300:] + "line 100\n", True) == "line 100\n"  # its start cut
    assert _after("abc", "xyz", True) == "xyz"  # all of it is new: nothing seen is left
