"""Processes that outlive a call: real programs started by ``start_process``, their output
read back from a bounded ring at absolute offsets, typed into, stopped with what they started,
a session's limit, and the end of a session ending them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waits import alive, eventually
from trellisd.services.processes import ProcessService, Ring, SessionProcesses
from trellisd.tools import ToolContext, ToolFailure
from trellisd.tools.processes import (
    ProcessState,
    ReadProcessOutput,
    StartProcess,
    StopProcess,
    WriteProcessInput,
    process_tools,
)


class Printed:
    """The service's notifier: what each process printed, as the editor is sent it."""

    def __init__(self) -> None:
        self.pieces: list[tuple[str, str, str]] = []
        self.exited: dict[str, ProcessState] = {}

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        self.pieces.append((session_id, process_id, text))
        assert process_id not in self.exited, "output after the process's end"

    def process_exited(self, state: ProcessState) -> None:
        assert state.process_id not in self.exited, "told twice"
        self.exited[state.process_id] = state

    def text(self, process_id: str) -> str:
        return "".join(t for _, p, t in self.pieces if p == process_id)


@pytest.fixture
async def service() -> Any:
    printed = Printed()
    service = ProcessService(printed, max_running=2)  # type: ignore[arg-type]
    service.printed = printed  # type: ignore[attr-defined]
    yield service
    await service.close_all()


def tools(service: ProcessService, session: str = "s1") -> dict[str, Any]:
    return {t.name: t for t in process_tools(SessionProcesses(service, session, "t1"))}


# Prints a line, then echoes each line it reads back in upper case until "quit".
ECHO = (
    "import sys\nprint('ready', flush=True)\nfor line in sys.stdin:\n"
    "    if line.strip() == 'quit': break\n    print(line.strip().upper(), flush=True)\n"
    "print('bye', flush=True)"
)


def process_id(answer: str) -> str:
    return answer.split()[2].rstrip(":")


async def test_a_started_process_outlives_the_call_is_typed_into_and_read(
    service: ProcessService, tmp_path: Path
) -> None:
    found = tools(service)
    context = ToolContext(tmp_path)
    answer = await found["start_process"].run({"argv": [sys.executable, "-c", ECHO]}, context)
    pid = process_id(answer)
    assert answer.startswith(f"started process {pid}: $ ")
    await eventually(lambda: "ready" in service.printed.text(pid), "the first line")  # type: ignore[attr-defined]

    await found["write_process_input"].run({"processId": pid, "text": "hello\n"}, context)
    await eventually(lambda: "HELLO" in service.printed.text(pid), "the echoed line")  # type: ignore[attr-defined]
    read = await found["read_process_output"].run({"processId": pid}, context)
    assert "still running" in read and "ready\nHELLO\n" in read and "[next offset: 12]" in read
    late = await service.output("s1", pid, 0, 1024)  # an editor opened after the fact
    assert (late.text, late.next, late.dropped) == ("ready\nHELLO\n", 12, 0)
    again = await found["read_process_output"].run({"processId": pid}, context)
    assert "(nothing new)" in again  # from where the model's last read ended, not the editor's
    from_start = await found["read_process_output"].run({"processId": pid, "since": 6}, context)
    assert "output from offset 6 to 12:\nHELLO" in from_start

    await found["write_process_input"].run({"processId": pid, "text": "quit\n"}, context)
    state = await eventually(
        lambda: not service.state("s1", pid).running and service.state("s1", pid), "its end"
    )
    assert state.exit_code == 0
    await eventually(lambda: pid in service.printed.exited, "the editor told of its end")  # type: ignore[attr-defined]
    assert service.printed.exited[pid].exit_code == 0  # type: ignore[attr-defined]
    read = await found["read_process_output"].run({"processId": pid}, context)
    assert "ended with exit code 0" in read and "bye" in read
    with pytest.raises(ToolFailure, match="has ended"):
        await found["write_process_input"].run({"processId": pid, "text": "more\n"}, context)


async def test_stop_ends_the_process_and_what_it_started(
    service: ProcessService, tmp_path: Path
) -> None:
    found = tools(service)
    family = "sleep 300 & echo $! > child.pid; echo $$ > parent.pid; echo started; wait"
    answer = await found["start_process"].run({"argv": ["sh", "-c", family]}, ToolContext(tmp_path))
    pid = process_id(answer)
    await eventually(lambda: (tmp_path / "child.pid").exists(), "the child's pid")
    await eventually(lambda: (tmp_path / "child.pid").read_text().strip(), "the child's pid")
    pids = [int((tmp_path / f).read_text()) for f in ("child.pid", "parent.pid")]
    assert all(alive(p) for p in pids)

    said = await found["stop_process"].run({"processId": pid}, ToolContext(tmp_path))
    assert said.startswith(f"process {pid} ($ sh -c ") and "ended" in said
    await eventually(lambda: not any(alive(p) for p in pids), "the processes are gone")
    assert not service.state("s1", pid).running
    assert service.printed.exited[pid] == service.state("s1", pid)  # type: ignore[attr-defined]


async def test_a_session_may_run_only_so_many_and_its_close_stops_them(
    service: ProcessService, tmp_path: Path
) -> None:
    found = tools(service)
    context = ToolContext(tmp_path)
    sleeper = {"argv": ["sleep", "300"]}
    first = process_id(await found["start_process"].run(sleeper, context))
    process_id(await found["start_process"].run(sleeper, context))
    with pytest.raises(ToolFailure, match="already has 2 processes running"):
        await found["start_process"].run(sleeper, context)
    # Another session has a limit of its own.
    other = process_id(await tools(service, "s2")["start_process"].run(sleeper, context))
    await found["stop_process"].run({"processId": first}, context)
    running = process_id(await found["start_process"].run(sleeper, context))  # room again

    await service.close("s1")
    assert service.list("s1") == []
    told = service.printed.exited  # type: ignore[attr-defined]
    assert running in told and not told[running].running and other not in told
    assert service.state("s2", other).running
    with pytest.raises(ToolFailure, match="no process"):
        await found["read_process_output"].run({"processId": first}, context)


async def test_an_unknown_process_or_a_missing_program_is_told_to_the_model(
    service: ProcessService, tmp_path: Path
) -> None:
    found = tools(service)
    context = ToolContext(tmp_path)
    with pytest.raises(ToolFailure, match=r"no process p0 in this session \(its processes: none"):
        found["read_process_output"].action({"processId": "p0"}, context)
    with pytest.raises(ToolFailure, match="no process"):
        found["stop_process"].action({"processId": "p0"}, context)
    answer = await found["start_process"].run({"argv": ["no-such-program-here"]}, context)
    pid = process_id(answer)
    state = await eventually(
        lambda: not service.state("s1", pid).running and service.state("s1", pid), "its end"
    )
    assert state.exit_code == 127
    assert "cannot be started" in service.printed.text(pid)  # type: ignore[attr-defined]


def test_the_policy_judges_a_process_as_run_command_and_its_input_likewise(
    service: ProcessService, tmp_path: Path
) -> None:
    table = SessionProcesses(service, "s1", "t1")
    context = ToolContext(tmp_path)
    action = StartProcess(table).action({"argv": ["python3", "-m", "http.server"]}, context)
    assert (action.kind, action.target) == ("exec", "python3 -m http.server")
    assert not action.escalate
    escalated = StartProcess(table).action(
        {"argv": ["make"], "escalate": True, "reason": "needs the docker socket"}, context
    )
    assert escalated.escalate
    with pytest.raises(ToolFailure, match="say why"):
        StartProcess(table).action({"argv": ["make"], "escalate": True}, context)
    with pytest.raises(ToolFailure, match="mcp:"):
        StartProcess(table).action({"argv": ["mcp:x"]}, context)
    assert ReadProcessOutput.name == "read_process_output"
    assert WriteProcessInput.name == "write_process_input" and StopProcess.name == "stop_process"


def test_the_ring_keeps_the_last_bytes_at_absolute_offsets() -> None:
    ring = Ring(limit=10)
    ring.add(b"0123456789")
    ring.add(b"abcde")
    assert (ring.start, ring.end) == (5, 15)
    assert ring.since(0, 100) == (b"56789abcde", 5, 5)  # what was asked for and is gone
    assert ring.since(12, 100) == (b"cde", 12, 0)
    assert ring.since(7, 3) == (b"789", 7, 0)
    assert ring.since(40, 100) == (b"", 15, 0)


async def test_a_process_that_prints_more_than_its_ring_keeps_the_end(
    service: ProcessService, tmp_path: Path
) -> None:
    found = tools(service)
    context = ToolContext(tmp_path)
    flood = "import sys\nfor i in range(3000): sys.stdout.write(f'{i:07d}' + '.' * 392 + '\\n')"
    pid = process_id(
        await found["start_process"].run({"argv": [sys.executable, "-c", flood]}, context)
    )
    await eventually(lambda: not service.state("s1", pid).running, "its end")
    printed = await service.read("s1", pid, 0, 64)
    total = 3000 * 400
    assert printed.dropped == total - 1024 * 1024 and printed.since == printed.dropped
    late = await service.output("s1", pid, 0, 1024 * 1024)
    assert late.dropped == printed.dropped and late.next == total and len(late.text) == 1024 * 1024
    last = await service.read("s1", pid, total - 400, 400)
    assert last.text.startswith("0002999.") and last.next == total and not last.more
