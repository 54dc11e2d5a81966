"""Processes that outlive a call, through the native protocol: a dev server started by one
turn's ``start_process`` inside the walls, reached by a later turn's ``run_command``, its
output read back and streamed as ``session/processOutput``, listed by ``session/processes``,
read after the fact by ``session/process/output``, stopped by the model or from the editor,
and stopped when its session closes; each end told as ``session/processExited``."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

from tests.fixtures.driver import Daemon, call, followed, open_session, tool_results, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import alive, eventually

POLICY = {
    "layers": [{"name": "editor", "allowRead": ["**"], "allowExec": ["*"]}],
    "approval": "all",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def walled(token: str) -> bool:
    """Whether bubblewrap runs a program whose command line holds ``token``."""
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"bwrap") and token.encode() in argv:
            return True
    return False


def printed(daemon: Daemon, process_id: str) -> str:
    pieces = followed(daemon, "session/processOutput")
    return "".join(p["text"] for p in pieces if p["processId"] == process_id)


def exited(daemon: Daemon, process_id: str) -> list[dict[str, Any]]:
    told = followed(daemon, "session/processExited")
    return [e for e in told if e["processId"] == process_id]


async def processes(daemon: Daemon, session: dict[str, Any]) -> list[dict[str, Any]]:
    listed = await daemon.call("session/processes", {"sessionId": session["sessionId"]})
    found: list[dict[str, Any]] = listed["processes"]
    return found


async def test_a_server_started_in_one_turn_is_reached_in_the_next_then_stopped(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / "hello.txt").write_text("hello from the root\n")
    session = await open_session(daemon, workspace, policy=POLICY)
    port = free_port()
    server = [sys.executable, "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    model.reply("Starting the server.", tool_calls=[call("start_process", argv=server)])
    model.reply("It runs.")
    first = await turn(daemon, session, "start the dev server")
    assert first["outcome"] == "finished"
    [started] = await tool_results(daemon, first["runId"])
    [listed] = await processes(daemon, session)
    pid = listed["processId"]
    assert started.startswith(f"started process {pid}: $ {sys.executable} -u -m http.server")
    assert listed["running"] is True and listed["exitCode"] is None
    assert listed["argv"] == server and listed["turnId"] == first["turnId"]
    assert listed["cwd"] == str(workspace.resolve())
    # The turn ended; the server runs on, and the editor is sent what it prints.
    await eventually(lambda: "Serving HTTP" in printed(daemon, pid), "the server's first line")
    assert walled(str(port))  # inside the walls

    fetch = (
        f"import urllib.request; print(urllib.request.urlopen("
        f"'http://127.0.0.1:{port}/hello.txt').read().decode())"
    )
    model.reply("", tool_calls=[call("run_command", argv=[sys.executable, "-c", fetch])])
    model.reply("", tool_calls=[call("read_process_output", processId=pid)])
    model.reply("", tool_calls=[call("stop_process", processId=pid)])
    model.reply("The server answered.")
    second = await turn(daemon, session, "test it")
    assert second["outcome"] == "finished"
    fetched, read, stopped = await tool_results(daemon, second["runId"])
    assert "exit code 0" in fetched and "hello from the root" in fetched
    assert f"process {pid} " in read and "still running" in read
    assert "Serving HTTP" in read and '"GET /hello.txt HTTP/1.1" 200' in read
    assert stopped.startswith(f"process {pid} ") and "ended" in stopped
    assert "GET /hello.txt" in printed(daemon, pid)
    [ended] = await processes(daemon, session)
    assert ended["running"] is False and ended["exitCode"] is not None
    [told] = exited(daemon, pid)  # the editor was told, once, how it ended
    assert told == {"sessionId": session["sessionId"], **ended}
    # An editor opened now reads what it printed, from its first byte.
    late = await daemon.call(
        "session/process/output", {"sessionId": session["sessionId"], "processId": pid}
    )
    assert late["text"].startswith("Serving HTTP") and "GET /hello.txt" in late["text"]
    assert late["dropped"] == 0 and late["next"] == len(late["text"].encode())
    assert late["running"] is False and late["exitCode"] == ended["exitCode"]
    with socket.socket() as s:  # nothing listens on its port any more
        assert s.connect_ex(("127.0.0.1", port)) != 0


PRINTS_PID = "import os, time; print(os.getpid(), flush=True); time.sleep(300)"


async def test_the_editor_stops_a_process_and_closing_the_session_stops_the_rest(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy={**POLICY, "sandbox": "off"})
    sleeper = [sys.executable, "-c", PRINTS_PID]
    model.reply("", tool_calls=[call("start_process", argv=sleeper)])
    model.reply("", tool_calls=[call("start_process", argv=sleeper)])
    model.reply("Two running.")
    await turn(daemon, session, "start two")
    one, two = await processes(daemon, session)
    pids = {}
    for process_id in (one["processId"], two["processId"]):
        number = await eventually(lambda p=process_id: printed(daemon, p).strip(), "a pid")
        pids[process_id] = int(number)
    assert all(alive(p) for p in pids.values())

    sid = session["sessionId"]
    stopped = await daemon.call(
        "session/process/stop", {"sessionId": sid, "processId": one["processId"]}
    )
    assert stopped["processId"] == one["processId"] and stopped["running"] is False
    assert [e["exitCode"] for e in exited(daemon, one["processId"])] == [stopped["exitCode"]]
    await eventually(lambda: not alive(pids[one["processId"]]), "the stopped one is gone")
    assert alive(pids[two["processId"]])
    unknown = await daemon.error("session/process/stop", {"sessionId": sid, "processId": "p0"})
    assert unknown.code == -32010 and "no process p0" in unknown.message

    await daemon.call("session/close", {"sessionId": sid})
    await eventually(lambda: not alive(pids[two["processId"]]), "the other one is gone")
    [closed] = exited(daemon, two["processId"])  # told before the window stopped following
    assert closed["running"] is False
    assert (await processes(daemon, session)) == []


async def test_deleting_the_session_stops_its_processes(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy={**POLICY, "sandbox": "off"})
    model.reply("", tool_calls=[call("start_process", argv=[sys.executable, "-c", PRINTS_PID])])
    model.reply("Started.")
    await turn(daemon, session, "start one")
    [listed] = await processes(daemon, session)
    number = await eventually(lambda: printed(daemon, listed["processId"]).strip(), "its pid")
    assert alive(int(number))

    await daemon.call("session/delete", {"sessionId": session["sessionId"]})
    await eventually(lambda: not alive(int(number)), "the process is gone")
    gone = await daemon.error("session/processes", {"sessionId": session["sessionId"]})
    assert gone.code == -32010


ENDS = "print('first'); print('second'); raise SystemExit(3)"


async def test_a_process_that_ends_by_itself_is_told_and_read_by_an_editor_opened_later(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy={**POLICY, "sandbox": "off"})
    sid = session["sessionId"]
    model.reply("", tool_calls=[call("start_process", argv=[sys.executable, "-c", ENDS])])
    model.reply("Started.")
    await turn(daemon, session, "start one")
    [listed] = await processes(daemon, session)
    pid = listed["processId"]
    told = await eventually(lambda: exited(daemon, pid), "its end told")
    assert [(e["exitCode"], e["running"], e["argv"]) for e in told] == [(3, False, listed["argv"])]
    assert printed(daemon, pid) == "first\nsecond\n"  # all of it came before the end

    read = {"sessionId": sid, "processId": pid}
    whole = await daemon.call("session/process/output", read)
    assert (whole["text"], whole["next"], whole["dropped"]) == ("first\nsecond\n", 13, 0)
    assert (whole["running"], whole["exitCode"]) == (False, 3)
    rest = await daemon.call("session/process/output", {**read, "since": 6})
    assert (rest["text"], rest["next"]) == ("second\n", 13)
    past = await daemon.call("session/process/output", {**read, "since": 99})
    assert (past["text"], past["next"]) == ("", 13)

    bad = await daemon.error("session/process/output", {**read, "since": -1})
    assert bad.code == -32602 and "since" in bad.message
    unknown = await daemon.error("session/process/output", {**read, "processId": "p0"})
    assert unknown.code == -32010 and "no process p0" in unknown.message
    nobody = await daemon.error("session/process/output", {**read, "sessionId": "s-none"})
    assert nobody.code == -32010
