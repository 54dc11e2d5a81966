"""initialize, shutdown and exit, as an editor drives them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import TEST_KEY, Daemon, Pipes, without_override
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET


async def test_initialize_names_the_daemon_and_its_protocol(daemon: Daemon) -> None:
    init = next(m for m in daemon.protocol.received if m.get("id") == 1 or "result" in m)
    result = init["result"]
    assert result["serverInfo"]["name"] == "trellisd"
    assert result["serverInfo"]["version"]
    assert result["capabilities"]["experimental"]["trellisd"]["protocolVersion"] == "0.1"


async def test_orderly_shutdown_exits_zero(daemon: Daemon) -> None:
    await daemon.client.shutdown_session()
    assert daemon.process.returncode == 0


async def _raw(frames: list[bytes], db: str, *args: str) -> tuple[int, list[dict], bytes]:
    """Send raw frames to a daemon's stdin; return its exit code, messages and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trellisd",
        "--db",
        db,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=hermetic_env(Path(db).parent / "home"),
    )
    out, err = await asyncio.wait_for(process.communicate(b"".join(frames)), SAFETY_NET)
    messages = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        messages.append(json.loads(rest[:length]))
        out = rest[length:]
    return process.returncode or 0, messages, err


def frame(message: dict | str) -> bytes:
    body = (message if isinstance(message, str) else json.dumps(message)).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def test_params_less_shutdown_and_exit_as_vscode_sends_them(tmp_path) -> None:
    code, messages, _ = await _raw(
        [
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": None, "capabilities": {}},
                }
            ),
            frame({"jsonrpc": "2.0", "method": "initialized"}),
            frame({"jsonrpc": "2.0", "id": 2, "method": "session/list"}),
            frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
            frame({"jsonrpc": "2.0", "method": "exit"}),
        ],
        str(tmp_path / "t.db"),
    )
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert by_id[2]["result"] == {"sessions": []}
    assert by_id[3]["result"] is None
    assert code == 0


async def test_exit_without_shutdown_exits_one(tmp_path) -> None:
    code, _, _ = await _raw(
        [
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": None, "capabilities": {}},
                }
            ),
            frame({"jsonrpc": "2.0", "method": "exit"}),
        ],
        str(tmp_path / "t.db"),
    )
    assert code == 1


async def test_garbage_frames_get_an_answer_and_the_daemon_keeps_serving(tmp_path) -> None:
    code, messages, err = await _raw(
        [
            frame("{this is not json"),
            frame("[1, 2, 3]"),
            frame(
                {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"capabilities": 5}}
            ),
            frame({"jsonrpc": "2.0", "id": 8, "method": "session/list", "params": {}}),
            frame({"jsonrpc": "2.0", "id": 9, "method": "shutdown"}),
            frame({"jsonrpc": "2.0", "id": 10, "method": "session/list", "params": {}}),
            frame({"jsonrpc": "2.0", "method": "exit"}),
        ],
        str(tmp_path / "t.db"),
    )
    unidentified = [m for m in messages if "error" in m and m["id"] is None]
    assert sorted(m["error"]["code"] for m in unidentified) == [-32700, -32600], messages
    after = next(m for m in messages if m.get("id") == 10)
    assert after["error"]["code"] == -32600 and "shutting down" in after["error"]["message"]
    assert any(m.get("id") == 7 and m["error"]["code"] == -32602 for m in messages if "error" in m)
    assert any(m.get("id") == 8 and m["result"] == {"sessions": []} for m in messages)
    assert code == 0
    assert b"Traceback" not in b"".join(json.dumps(m).encode() for m in messages)


async def test_logs_go_to_stderr_and_stdout_is_only_frames(tmp_path) -> None:
    code, messages, err = await _raw(
        [
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": None, "capabilities": {}},
                }
            ),
            frame(
                {"jsonrpc": "2.0", "id": 2, "method": "session/open", "params": {"root": "/nope"}}
            ),
            frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
            frame({"jsonrpc": "2.0", "method": "exit"}),
        ],
        str(tmp_path / "t.db"),
        "--log-level",
        "debug",
    )
    assert sorted(m.get("id") for m in messages) == [1, 2, 3]
    assert b"trellisd DEBUG" in err
    assert code == 0


async def test_initialize_says_which_provider_turns_will_use(spawn) -> None:  # type: ignore[no-untyped-def]
    daemon = await spawn(options={"model": "editor-model"})
    init = next(m for m in daemon.protocol.received if "result" in m)
    provider = init["result"]["capabilities"]["experimental"]["trellisd"]["provider"]
    assert provider["name"] == "openai" and provider["model"] == "editor-model"
    assert provider["keyFrom"] == "TRELLISD_API_KEY"
    assert "sk-" not in json.dumps(init)


@pytest.mark.parametrize("mode", ["standalone", "shared"])
async def test_a_store_in_memory_leaves_nothing_behind(
    tmp_path: Path, model: ModelServer, mode: str
) -> None:
    here = tmp_path / "here"  # the folder the editor starts the daemon in
    here.mkdir()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = hermetic_env(
        tmp_path / "home",
        TRELLISD_PROVIDER="openai",
        TRELLISD_BASE_URL=model.url,
        TRELLISD_API_KEY=TEST_KEY,
        TRELLISD_MODEL="test-model",
        TRELLISD_SHARED="1" if mode == "shared" else "0",
        XDG_RUNTIME_DIR=str(runtime),
    )
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "trellisd", "--db", ":memory:"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=here,
        env=env,
    )
    pipes = Pipes(process)
    await pipes.initialize()
    opened = await pipes.call("session/open", {"root": str(workspace), "title": "kept"})
    listed = await pipes.call("session/list", {})
    backup = tmp_path / "kept.trellisd"
    exported = await pipes.call(
        "session/export", {"sessionId": opened["sessionId"], "path": str(backup)}
    )
    code, err = await pipes.stop()
    if mode == "shared":
        stopped = subprocess.run(
            [sys.executable, "-m", "trellisd", "stop", "--db", ":memory:"],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=SAFETY_NET,
        )
        assert stopped.returncode == 0, stopped.stderr

    assert code == 0, err
    assert [s["sessionId"] for s in listed["sessions"]] == [opened["sessionId"]]
    assert exported["bytes"] == backup.stat().st_size > 0
    assert list(here.iterdir()) == []


def _environment(tmp_path: Path, mode: str) -> dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return hermetic_env(
        tmp_path / "home",
        TRELLISD_SHARED="1" if mode == "shared" else "0",
        XDG_RUNTIME_DIR=str(runtime),
    )


@pytest.mark.parametrize("mode", ["standalone", "shared"])
async def test_a_store_path_under_a_file_ends_the_command_with_exit_code_2(
    tmp_path: Path, mode: str
) -> None:
    (tmp_path / "notes").write_text("a file, not a folder\n")
    db = tmp_path / "notes" / "store" / "trellisd.db"
    done = subprocess.run(
        [sys.executable, "-m", "trellisd", "--db", str(db)],
        env=_environment(tmp_path, mode),
        input="",
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"trellisd: --db {db}: {tmp_path / 'notes'} is a file, not a folder"
    ]
    assert done.stdout == ""


@pytest.mark.parametrize("mode", ["standalone", "shared"])
async def test_a_store_whose_folder_cannot_be_made_answers_32040_after_initialize(
    tmp_path: Path, mode: str
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    db = locked / "store" / "trellisd.db"
    wrapper = without_override()
    env = _environment(tmp_path, mode)
    process = await asyncio.create_subprocess_exec(
        *wrapper,
        *(sys.executable, "-m", "trellisd", "--db", str(db)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    pipes = Pipes(process)
    try:
        await pipes.initialize()
        answer = await asyncio.wait_for(pipes.answer(pipes.request("session/list", {})), 30)
        code, err = await pipes.stop()
    finally:
        if mode == "shared":
            subprocess.run(
                [*wrapper, sys.executable, "-m", "trellisd", "stop", "--db", str(db)],
                env=env,
                capture_output=True,
                timeout=SAFETY_NET,
            )
        locked.chmod(0o700)
    assert answer["error"]["code"] == -32040, answer
    assert f"cannot open the store at {db}" in answer["error"]["message"]
    assert code == 0, err
    assert list(locked.iterdir()) == []
