"""Every window of a user on one shared daemon per store: each editor connection is a
``trellisd`` forwarder process over real pipes, attached to the daemon over its Unix socket.
Windows follow, steer and cancel each other's live turns, a turn outlives the window that
started it, and an approval is asked of every window that follows the session."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

import trellisd
from tests.e2e.conftest import Daemon, Windows
from tests.fixtures.driver import (
    LONG,
    OPEN,
    STUBBORN,
    DaemonFactory,
    followed,
    held_after,
    open_session,
    running_command,
    streamed,
    tokens,
    turn,
)
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET, alive, eventually, until
from trellisd.build import build
from trellisd.rendezvous import Place, hello

# acp_e2e imports the windows' fixtures from here; they live in conftest.py.


async def test_windows_attach_to_one_daemon_that_outlives_them(windows: Windows) -> None:
    a, facts_a = await windows.open()
    b, facts_b = await windows.open()
    assert facts_a["daemon"] == facts_b["daemon"]
    assert facts_a["daemon"]["shared"] is True
    assert a.process.pid != b.process.pid != facts_a["daemon"]["pid"]
    await a.client.shutdown_session()
    assert await a.process.wait() == 0  # LSP's exit code, through the forwarder
    assert alive(facts_a["daemon"]["pid"])
    await b.call("session/list", {})


async def test_a_second_window_follows_steers_and_cancels_a_running_turn(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    session = await open_session(a, workspace)
    held = held_after(model, 5)
    model.reply("Steered onto the new course.")
    running = asyncio.ensure_future(turn(a, session, "a long story"))
    await tokens(a, 5)

    reopened = await b.call("session/reopen", {"sessionId": session["sessionId"]})
    live = reopened["running"]
    assert live["step"] == 1 and live["text"] == " ".join(LONG.split()[:5]) + " "
    assert live["prompt"] == "a long story"
    receipt = await b.call(
        "session/steer", {"sessionId": session["sessionId"], "text": "change course"}
    )
    assert receipt["queued"] is True
    held.release()
    result = await running

    assert result["outcome"] == "finished"
    assert result["reply"] == "Steered onto the new course."  # what it said last
    # B drew the whole turn: the text before it came, then every piece after.
    assert live["text"] + streamed(b, live["runId"]) == streamed(a, live["runId"])
    for window in (a, b):
        steered = followed(window, "session/steered")
        assert [s["text"] for s in steered] == ["change course"]
        assert [s["delivered"] for s in steered] == [True]
        replies = [s for s in followed(window, "session/step") if s["decision"] == "reply"]
        assert replies[-1]["runId"] == result["runId"]

    model.reply(LONG, hold=threading.Event(), hold_at=3)
    again = asyncio.ensure_future(turn(a, session, "another"))
    await eventually(
        lambda: any(t["runId"] != result["runId"] for t in a.tokens), "the next turn streams"
    )
    cancelled = await b.call("session/cancel", {"sessionId": session["sessionId"]})
    assert cancelled["cancelled"] is True
    assert (await again)["outcome"] == "cancelled"


async def test_every_window_following_a_session_hears_its_turn_end_before_the_answer(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    session = await open_session(a, workspace)
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    model.reply("Done, and said so.")
    result = await turn(a, session, "a short job")

    told = {
        "sessionId": session["sessionId"],
        "turnId": result["turnId"],
        "runId": result["runId"],
        "outcome": "finished",
        "reply": "Done, and said so.",
        "tokens": result["tokens"],
        "cost": result["cost"],
    }
    await eventually(lambda: followed(b, "session/turnEnded"), "B hears the turn end")
    assert followed(b, "session/turnEnded") == [told]
    assert followed(a, "session/turnEnded") == [told]
    # A hears it after the turn's last step and before the answer to its session/turn.
    order = [
        "answer" if m.get("result", {}) == result else m.get("method")
        for m in a.protocol.received
        if m.get("method") in ("session/step", "session/turnEnded") or "result" in m
    ]
    assert order[-3:] == ["session/step", "session/turnEnded", "answer"]


async def test_a_turn_goes_on_when_its_window_closes(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    session = await open_session(a, workspace)
    held = held_after(model, 3)
    asyncio.ensure_future(turn(a, session, "keep going without me"))
    await tokens(a, 3)
    a.process.kill()  # the editor is killed mid-turn: its forwarder goes
    await a.process.wait()

    b, _ = await windows.open()
    reopened = await b.call("session/reopen", {"sessionId": session["sessionId"]})
    assert reopened["running"]["text"] == " ".join(LONG.split()[:3]) + " "
    held.release()
    await eventually(
        lambda: any(s["decision"] == "reply" for s in followed(b, "session/step")),
        "the turn ends in the window that reopened it",
    )
    history = (await b.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert history[-1]["outcome"] == "finished" and history[-1]["reply"] == LONG


async def test_an_approval_is_asked_of_every_window_and_the_first_answer_wins(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    asked_a: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def a_never_answers(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        asked_a.set_result(params)
        await asyncio.Event().wait()
        return {"decision": "deny"}

    asked_b: list[dict[str, Any]] = []

    async def b_allows(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        asked_b.append(params)
        await asked_a  # both were asked before either answers
        return {"decision": "allow"}

    a.client.feature("session/requestApproval")(a_never_answers)
    b.client.feature("session/requestApproval")(b_allows)
    session = await open_session(a, workspace, policy={"approval": "ask"})
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": "ok.txt", "content": "x"}}]
    )
    model.reply("Written.")
    result = await turn(a, session, "write it")

    assert result["outcome"] == "finished"
    assert (workspace / "ok.txt").read_text() == "x"
    assert asked_b and (await asked_a)["tool"] == "write_file"
    withdrawn = [m for m in a.protocol.received if m.get("method") == types.CANCEL_REQUEST]
    assert len(withdrawn) == 1


async def test_an_approval_waits_for_a_window_that_opens_the_session_later(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    session = await open_session(a, workspace, policy={"approval": "ask"})
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": "late.txt", "content": "y"}}]
    )
    model.reply("Done.")
    asked: asyncio.Event = asyncio.Event()

    def a_goes(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        asked.set()
        a.process.kill()
        return {"decision": "deny"}

    a.client.feature("session/requestApproval")(a_goes)
    asyncio.ensure_future(turn(a, session, "write late"))
    await asyncio.wait_for(asked.wait(), SAFETY_NET)
    await a.process.wait()

    b, _ = await windows.open()
    b.client.feature("session/requestApproval")(lambda ls, params: {"decision": "allow"})
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    await eventually(lambda: (workspace / "late.txt").exists(), "the window that came allows it")


async def test_twenty_windows_run_turns_at_once_with_nothing_crossed(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    opened = await asyncio.gather(*(windows.open() for _ in range(20)))
    assert len({facts["daemon"]["pid"] for _, facts in opened}) == 1
    sessions = [await open_session(w, workspace, title=f"w{i}") for i, (w, _) in enumerate(opened)]
    results = await asyncio.gather(
        *(
            turn(w, s, f"window {i} speaking")
            for i, ((w, _), s) in enumerate(zip(opened, sessions, strict=True))
        )
    )
    for i, ((window, _), result) in enumerate(zip(opened, results, strict=True)):
        assert result["reply"] == f"echo: window {i} speaking"
        assert {t["sessionId"] for t in window.tokens} == {sessions[i]["sessionId"]}
        assert streamed(window, result["runId"]) == result["reply"]


async def test_two_forwarders_started_at_once_start_one_daemon(
    windows: Windows, runtime: Path
) -> None:
    opened = await asyncio.gather(*(windows.open() for _ in range(4)))
    assert len({facts["daemon"]["pid"] for _, facts in opened}) == 1
    assert len(list((runtime / "trellisd").glob("*.sock"))) == 1


async def test_a_killed_daemon_ends_its_windows_with_a_reason_and_a_new_one_starts(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, facts = await windows.open()
    session = await open_session(a, workspace)
    held_after(model, 2)
    asyncio.ensure_future(turn(a, session, "interrupted soon"))
    await tokens(a, 2)
    os.kill(facts["daemon"]["pid"], signal.SIGKILL)
    assert await a.process.wait() == 1
    model.clear()

    b, again = await windows.open()
    assert again["daemon"]["pid"] != facts["daemon"]["pid"]
    history = (await b.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert history[-1]["outcome"] == "interrupted"


def forwarder(runtime: Path, db: Path, home: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "trellisd", "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=hermetic_env(home, TRELLISD_SHARED="1", XDG_RUNTIME_DIR=str(runtime), **env),
    )


def test_a_window_with_a_bad_setting_is_refused_in_one_line(runtime: Path, tmp_path: Path) -> None:
    proc = forwarder(runtime, tmp_path / "t.db", tmp_path / "home", TRELLISD_PROVIDER="bogus")
    _, err = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 2
    assert err.decode().splitlines() == [
        "trellisd: TRELLISD_PROVIDER must be one of openai, anthropic, openrouter,"
        " openai-responses, scripted,"
        " not 'bogus'"
    ]
    good = forwarder(runtime, tmp_path / "t.db", tmp_path / "home")
    good.communicate(b"", timeout=SAFETY_NET)
    assert good.returncode == 1  # input ended with no shutdown: LSP's 1
    status = subprocess.run(
        [sys.executable, "-m", "trellisd", "stop", "--db", str(tmp_path / "t.db")],
        env=hermetic_env(tmp_path / "home", XDG_RUNTIME_DIR=str(runtime)),
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert "it has exited" in status.stdout


async def test_another_user_is_refused_before_anything_is_served(
    windows: Windows, runtime: Path
) -> None:
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to connect as another user")
    a, facts = await windows.open()
    place = next((runtime / "trellisd").glob("*.sock"))
    assert (runtime / "trellisd").stat().st_mode & 0o777 == 0o700
    assert place.stat().st_mode & 0o777 == 0o600
    # Even with the folder and socket opened to everyone, the daemon checks who connects.
    os.chmod(runtime, 0o755)
    os.chmod(runtime / "trellisd", 0o755)
    os.chmod(place, 0o777)
    probe = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode())\n"
        "print(repr(s.recv(1000)))\n"
    )
    said = hello({}, "status").decode()
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-c",
            probe,
            str(place),
            said,
        ],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert done.stdout.strip() in ("b''", ""), done.stdout
    assert str(facts["daemon"]["pid"]) not in done.stdout
    await a.call("session/list", {})  # and the daemon serves its user as before


async def test_connections_that_never_say_hello_keep_no_window_out(
    windows: Windows, workspace: Path
) -> None:
    a, facts = await windows.open(TRELLISD_HELLO_TIMEOUT="2")
    place = Place(str(windows.db), {"XDG_RUNTIME_DIR": str(windows.runtime)})
    silent = []
    for _ in range(40):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(place.socket)
        silent.append(sock)
    # A window that comes after them is served at once, as is the one already there.
    b, again = await asyncio.wait_for(windows.open(), SAFETY_NET)
    assert again["daemon"] == facts["daemon"]
    await open_session(b, workspace)
    await a.call("session/list", {})

    def closed(sock: socket.socket) -> bool:
        return sock.recv(1) == b""

    for sock in silent:  # each is let go: the oldest for the newer, the rest at the deadline
        sock.settimeout(SAFETY_NET)
        assert await asyncio.to_thread(closed, sock)
        sock.close()


def as_nobody(*argv: str) -> list[str]:
    """``argv`` run as another local user (uid 65534)."""
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


# Another user's listener on the socket's name: it prints whatever a connection says.
PLANTED = """
import os, socket, sys
folder, path = sys.argv[1], sys.argv[2]
if not os.path.isdir(folder):
    os.mkdir(folder)
    os.chmod(folder, 0o777)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o777)
s.listen(8)
print("listening", flush=True)
while True:
    conn, _ = s.accept()
    print(repr(conn.recv(1 << 20)), flush=True)
    conn.close()
"""


@pytest.fixture
def temp_base() -> Iterator[Path]:
    """A temp folder such as /tmp, short enough for sockets: anyone may make things in it."""
    folder = Path(tempfile.mkdtemp(prefix="tp", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def served_window(spawn: DaemonFactory, db: Path, env: dict[str, str]) -> Daemon:
    """A window attached with ``env``, initialized and answering."""
    window = await spawn(db=db, env={"TRELLISD_SHARED": "1", "TRELLISD_IDLE_EXIT": "0", **env})
    await window.call("session/list", {})
    return window


async def said_on_stderr(capfd: pytest.CaptureFixture[str], words: str) -> str:
    """What the windows said on stderr, once it holds ``words``."""
    said: list[str] = []

    def holds() -> bool:
        said.append(capfd.readouterr().err)
        return words in "".join(said)

    await eventually(holds, f"a window says {words!r} on stderr")
    return "".join(said)


@pytest.mark.parametrize("planted_in", ["a folder of theirs", "a folder of the user's open to all"])
async def test_a_socket_another_user_planted_hears_nothing_and_the_window_is_served(
    spawn: DaemonFactory,
    tmp_path: Path,
    temp_base: Path,
    capfd: pytest.CaptureFixture[str],
    planted_in: str,
) -> None:
    """No ``$XDG_RUNTIME_DIR``: the socket's folder is ``trellisd-<uid>`` in the temp
    folder, where another user listens on the socket's name."""
    db = tmp_path / "store" / "trellisd.db"
    env = {"TMPDIR": str(temp_base)}
    place = Place(str(db), env)
    assert place.folder == str(temp_base / f"trellisd-{os.getuid()}")
    if planted_in != "a folder of theirs":
        os.mkdir(place.folder)
        os.chmod(place.folder, 0o777)
    planted = subprocess.Popen(
        as_nobody(sys.executable, "-c", PLANTED, place.folder, place.socket),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert planted.stdout is not None and planted.stdout.readline() == "listening\n"
        window = await served_window(spawn, db, env)
        # The planted listener heard nothing (a connection checked and closed at most):
        # the test's own probe is the first thing it hears.
        probe = socket.socket(socket.AF_UNIX)
        probe.connect(place.socket)
        probe.sendall(b"probe")
        probe.close()
        heard = iter(planted.stdout.readline, "b'probe'\n")
        assert all(line == "b''\n" for line in heard)
    finally:
        planted.kill()
        planted.wait()
        if planted.stdout is not None:
            planted.stdout.close()
    said = await said_on_stderr(capfd, "refused")
    refusals = [line for line in said.splitlines() if "refused" in line]
    assert len(refusals) == 1 and place.folder in refusals[0], said
    # The window's daemon listens in a folder of the user's own, closed to others.
    own = [p for p in temp_base.glob(f"trellisd-{os.getuid()}-*") if list(p.glob("*.sock"))]
    assert len(own) == 1 and own[0].stat().st_uid == os.getuid()
    assert own[0].stat().st_mode & 0o777 == 0o700
    await window.client.shutdown_session()
    await window.process.wait()


async def test_a_symlink_planted_for_the_folder_leaves_the_folder_it_names_alone(
    spawn: DaemonFactory, tmp_path: Path, temp_base: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    env = {"TMPDIR": str(temp_base)}
    place = Place(str(db), env)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    mine.chmod(0o755)
    (mine / "notes.txt").write_text("mine\n")
    planting = ["ln", "-s", str(mine), place.folder]
    subprocess.run(as_nobody(*planting), check=True, timeout=SAFETY_NET)

    window = await served_window(spawn, db, env)
    assert mine.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    said = await said_on_stderr(capfd, "refused")
    assert f"refused {place.folder}: it is a symlink, not a folder; trying the next folder" in said
    await window.client.shutdown_session()
    await window.process.wait()


async def test_with_no_folder_of_the_users_own_the_window_is_served_standalone_saying_so(
    spawn: DaemonFactory, tmp_path: Path, temp_base: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "trellisd").write_text("")  # no folder can be recorded there
    env = {"TMPDIR": str(temp_base), "XDG_STATE_HOME": str(tmp_path / "state")}
    place = Place(str(db), env)
    subprocess.run(as_nobody("mkdir", "-m", "777", place.folder), check=True, timeout=SAFETY_NET)

    window = await spawn(db=db, env={"TRELLISD_SHARED": "1", **env}, initialize=False)
    result = await window.client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities())
    )
    assert result.capabilities.experimental["trellisd"]["daemon"]["shared"] is False
    await window.call("session/list", {})
    said = await said_on_stderr(capfd, "served standalone")
    assert f"refused {place.folder}: it belongs to uid 65534" in said


def request(msg_id: int, method: str, params: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode())


def answer(sock: socket.socket) -> dict[str, Any]:
    """The next record from the shared daemon, holding one answer frame."""
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(65536)
        assert chunk, "the daemon closed the window"
        data += chunk
    frame = data[4 : 4 + int.from_bytes(data[:4], "big")]
    message: dict[str, Any] = json.loads(frame.split(b"\r\n\r\n", 1)[1])
    return message


async def test_a_window_that_stops_reading_is_dropped_and_slows_no_one(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, facts = await windows.open(TRELLISD_WINDOW_QUEUE="65536")
    place = Place(str(windows.db), {"XDG_RUNTIME_DIR": str(windows.runtime)})
    stuck = socket.socket(socket.AF_UNIX)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(place.socket)
    stuck.sendall(hello({"TRELLISD_PROVIDER": "openai", "TRELLISD_BASE_URL": model.url}))
    assert json.loads(stuck.recv(4096))["ok"] is True
    stuck.sendall(request(1, "session/open", {"root": str(workspace)}))
    session = answer(stuck)["result"]
    huge = " ".join(f"w{i}" for i in range(200_000))
    model.reply(huge, pieces=2000)
    stuck.sendall(request(2, "session/turn", {"sessionId": session["sessionId"], "prompt": "go"}))
    # The stuck window reads no more. Its turn runs to its end, and the daemon serves the
    # other window all along.

    async def ended() -> bool:
        turns = (await a.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
        return bool(turns) and turns[-1]["outcome"] == "finished"

    await eventually(ended, "the stuck window's turn ends")
    history = await a.call("session/history", {"sessionId": session["sessionId"]})
    assert history["turns"][-1]["reply"] == huge
    assert alive(facts["daemon"]["pid"])
    log = next((windows.runtime / "trellisd").glob("*.log")).read_text()
    assert "stopped reading" in log
    stuck.close()


async def test_a_window_of_changed_code_starts_a_daemon_of_its_own(
    windows: Windows, tmp_path: Path
) -> None:
    """After an upgrade (here: a copy of the package with one file changed), a new window
    does not attach to the daemon still running the old code: a second one starts for the
    same store, and ``trellisd status`` tells them apart by their builds."""
    upgraded = tmp_path / "upgraded"
    shutil.copytree(
        Path(trellisd.__file__).parent,
        upgraded / "trellisd",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    with (upgraded / "trellisd" / "oneline.py").open("a") as changed:
        changed.write("\n# a change of the upgrade\n")
    old, facts_old = await windows.open()
    new, facts_new = await windows.open(PYTHONPATH=str(upgraded))
    again, facts_again = await windows.open()
    assert facts_new["daemon"]["pid"] != facts_old["daemon"]["pid"]
    assert facts_again["daemon"]["pid"] == facts_old["daemon"]["pid"]
    assert alive(facts_old["daemon"]["pid"]) and alive(facts_new["daemon"]["pid"])
    status = subprocess.run(
        [sys.executable, "-m", "trellisd", "status"],
        env=hermetic_env(windows.db.parent / "h", XDG_RUNTIME_DIR=str(windows.runtime)),
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    lines = status.stdout.splitlines()
    ours = [lines[n + 1] for n, line in enumerate(lines) if line == str(windows.db)]
    builds = {line.split("trellisd ")[1].split(",")[0] for line in ours}
    assert len(ours) == len(builds) == 2, status.stdout
    assert build() in builds, status.stdout
    # ``trellisd stop`` stops the store's daemons of either build: the old one too.
    for window in (old, new, again):
        await window.client.shutdown_session()
        await window.process.wait()
    stopped = subprocess.run(
        [sys.executable, "-m", "trellisd", "stop", "--db", str(windows.db)],
        env=hermetic_env(windows.db.parent / "h", XDG_RUNTIME_DIR=str(windows.runtime)),
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert "they have exited" in stopped.stdout, stopped.stdout
    for pid in (facts_old["daemon"]["pid"], facts_new["daemon"]["pid"]):
        await eventually(lambda pid=pid: not alive(pid), f"the daemon {pid} exits")


async def test_the_daemon_exits_when_idle(windows: Windows) -> None:
    a, facts = await windows.open()
    await a.client.shutdown_session()
    await a.process.wait()
    # The daemon started with the first window's environment; the test asks it to stop
    # by the same path a person would.
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trellisd",
        "status",
        env=hermetic_env(windows.db.parent / "h", XDG_RUNTIME_DIR=str(windows.runtime)),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await done.communicate()
    assert f"pid {facts['daemon']['pid']}" in out.decode()
    assert "windows  0" in out.decode()


async def test_the_daemon_exits_once_no_window_is_left_and_no_turn_runs(
    windows: Windows,
) -> None:
    a, facts = await windows.open(TRELLISD_IDLE_EXIT="0")
    await a.client.shutdown_session()
    await a.process.wait()
    pid = facts["daemon"]["pid"]
    await eventually(lambda: not alive(pid), "the idle daemon exits")
    assert not list((windows.runtime / "trellisd").glob("*.sock"))


async def test_each_window_runs_its_turns_with_its_own_settings_and_key(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, facts_a = await windows.open(TRELLISD_API_KEY="sk-window-a", TRELLISD_MODEL="model-a")
    b, facts_b = await windows.open(TRELLISD_API_KEY="sk-window-b", TRELLISD_MODEL="model-b")
    assert facts_a["provider"]["model"] == "model-a" and facts_b["provider"]["model"] == "model-b"
    session = await open_session(a, workspace)
    await turn(a, session, "from a")
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    await turn(b, session, "from b")
    assert [h["authorization"] for h in model.headers] == [
        "Bearer sk-window-a",
        "Bearer sk-window-b",
    ]
    assert [r["model"] for r in model.requests] == ["model-a", "model-b"]
    assert "sk-window" not in str(a.protocol.received) + str(b.protocol.received)


async def test_each_window_sends_its_own_key_and_runs_its_commands_in_its_environment(
    windows: Windows, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    """The config file names the variable holding the key; each window holds its own, for
    its own endpoint, and its programs see its own ``PATH`` and variables."""
    config = tmp_path / "home" / ".config" / "trellisd"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('provider = "openai"\nkeyVariable = "WORK_OPENAI_KEY"\n')
    path = os.environ["PATH"]
    with ModelServer() as other:
        a, _ = await windows.open(
            TRELLISD_API_KEY="",
            WORK_OPENAI_KEY="sk-work-a",
            WINDOW_NAME="a",
            PATH=f"/opt/window-a/bin:{path}",
        )
        b, _ = await windows.open(
            TRELLISD_API_KEY="",
            TRELLISD_BASE_URL=other.url,
            WORK_OPENAI_KEY="sk-work-b",
            WINDOW_NAME="b",
            PATH=f"/opt/window-b/bin:{path}",
        )
        session_a = await open_session(a, workspace)
        await turn(a, session_a, "from a")
        session_b = await open_session(b, workspace, policy={"approval": "all"})
        other.reply("", tool_calls=[{"name": "run_command", "arguments": {"argv": ["env"]}}])
        other.reply("done")
        result = await turn(b, session_b, "print the environment", maxSteps=2)

        assert [h["authorization"] for h in model.headers] == ["Bearer sk-work-a"]
        assert [h["authorization"] for h in other.headers] == ["Bearer sk-work-b"] * 2
    steps = (await b.call("run/steps", {"runId": result["runId"]}))["steps"]
    printed = steps[0]["result"].splitlines()
    assert "WINDOW_NAME=b" in printed
    assert f"PATH=/opt/window-b/bin:{path}" in printed
    assert "sk-work" not in steps[0]["result"]


async def test_a_standalone_daemon_on_the_same_store_obeys_the_shared_daemons_lease(
    windows: Windows, spawn: DaemonFactory, workspace: Path
) -> None:
    a, facts = await windows.open()
    session = await open_session(a, workspace)
    alone = await spawn(db=windows.db)
    exc = await alone.error("session/turn", {"sessionId": session["sessionId"], "prompt": "x"})
    assert exc.code == -32030
    assert str(facts["daemon"]["pid"]) in exc.message


async def test_a_reopen_between_two_steps_has_no_text_the_history_already_holds(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    session = await open_session(a, workspace)
    first = model.reply("The first step. ", hold=threading.Event(), hold_at=99)
    second = model.reply("The second step.", hold=threading.Event(), hold_at=0)
    running = asyncio.ensure_future(turn(a, session, "two steps, please"))
    await until(first.served, "the first model call")
    await a.call("session/steer", {"sessionId": session["sessionId"], "text": "and go on"})
    first.release()
    await until(second.served, "the second model call, held before its first piece")

    reopened = await b.call("session/reopen", {"sessionId": session["sessionId"]})
    committed = reopened["history"][-1]["reply"]
    live = reopened["running"]
    second.release()
    await running
    assert committed == "The first step. "
    # The step being streamed is the second, with nothing streamed yet.
    assert (live["step"], live["text"]) in ((None, ""), (2, ""))


async def test_any_window_pauses_a_turn_and_a_paused_turn_keeps_no_daemon_alive(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, facts = await windows.open(TRELLISD_IDLE_EXIT="0")
    b, _ = await windows.open()
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    read = [{"name": "read_file", "arguments": {"path": "README.md"}}]
    held = model.reply("Let me look.", tool_calls=read, hold=threading.Event(), hold_at=1)
    running = asyncio.ensure_future(turn(a, session, "go"))
    await until(held.served, "the model call is in flight")

    pausing = await b.call("session/pause", {"sessionId": sid})
    assert pausing["pausing"] is True and pausing["runId"]
    held.release()
    paused = await running
    assert paused["outcome"] == "paused" and paused["steps"] == 1

    reopened = await b.call("session/reopen", {"sessionId": sid})
    assert "running" not in reopened
    assert reopened["history"][-1]["outcome"] == "paused"
    for window in (a, b):
        await window.client.shutdown_session()
        await window.process.wait()
    pid = facts["daemon"]["pid"]
    await eventually(lambda: not alive(pid), "the daemon exits: a paused turn is not running")


async def test_a_command_killed_as_the_shared_daemon_stops_waits_for_a_decision(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, facts = await windows.open()
    session = await open_session(a, workspace, policy=OPEN)
    model.reply("Migrating.", tool_calls=[{"name": "run_command", "arguments": {"argv": STUBBORN}}])
    asyncio.ensure_future(turn(a, session, "migrate"))
    await eventually(lambda: running_command(a, "migrating"), "the command runs")
    a.process.kill()  # the window goes; its turn runs on in the daemon
    await a.process.wait()
    os.kill(facts["daemon"]["pid"], signal.SIGTERM)  # then the daemon is stopped
    await eventually(lambda: not alive(facts["daemon"]["pid"]), "the daemon exits")

    b, _ = await windows.open()
    reopened = await b.call("session/reopen", {"sessionId": session["sessionId"]})
    assert reopened["history"][-1]["outcome"] == "cancelled"
    assert reopened["recovery"]["argv"] == STUBBORN
