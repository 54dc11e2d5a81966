"""The ``trellisd`` command as a person runs it: what it prints when the environment or the
command line is wrong, its help, and what it says when started in a terminal."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from trellisd.cli import parser


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRELLISD_")}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        env.pop(key, None)
    return {**env, "TRELLISD_SHARED": "0", **extra}


def trellisd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command to completion, stdin closed (as a script runs it, not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "trellisd", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=60,
    )


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_frame(stream: object) -> dict[str, object]:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):  # type: ignore[attr-defined]
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    message: dict[str, object] = json.loads(stream.read(length))  # type: ignore[attr-defined]
    return message


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}


@pytest.mark.parametrize("command", [[], ["demo"]])
def test_a_bad_provider_is_one_line_and_exit_code_2(command: list[str]) -> None:
    done = trellisd(*command, env=clean_env(TRELLISD_PROVIDER="bogus"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "trellisd: TRELLISD_PROVIDER must be one of openai, anthropic, openrouter,"
        " openai-responses, scripted,"
        " not 'bogus'"
    ]
    assert done.stdout == ""


@pytest.mark.parametrize("command", [[], ["demo"]])
def test_a_store_path_that_is_a_folder_is_one_line_and_exit_code_2(
    command: list[str], tmp_path: Path
) -> None:
    done = trellisd(*command, "--db", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"trellisd: --db {tmp_path} is a folder; give the path of a file,"
        f" e.g. {tmp_path / 'trellisd.db'}"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_store_folder_from_the_environment_is_named_as_such(tmp_path: Path) -> None:
    done = trellisd(env=clean_env(TRELLISD_DB=str(tmp_path)))
    assert done.returncode == 2
    assert done.stderr.startswith(f"trellisd: TRELLISD_DB {tmp_path} is a folder")


def test_a_store_that_is_not_a_database_is_said_without_sqlites_own_log(tmp_path: Path) -> None:
    store = tmp_path / "notes.txt"
    store.write_bytes(b"these are my notes, not a database\n" * 200)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "trellisd", "--db", str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    assert daemon.stdin is not None and daemon.stdout is not None
    daemon.stdin.write(frame(INITIALIZE))
    daemon.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "session/list"}))
    daemon.stdin.flush()
    assert read_frame(daemon.stdout)["id"] == 1
    answer = read_frame(daemon.stdout)
    assert answer["error"]["code"] == -32040  # type: ignore[index]
    daemon.stdin.close()
    daemon.stdout.close()
    assert daemon.stderr is not None
    stderr = daemon.stderr.read()  # to its end: the daemon exits at the end of its input
    daemon.wait(timeout=60)
    daemon.stderr.close()
    assert b"is not a database" in stderr
    assert b"SQLITE_LOG" not in stderr


def test_demo_help_is_the_demos_own() -> None:
    done = trellisd("demo", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: trellisd demo")
    assert "offline" in done.stdout
    assert "TRELLISD_PROVIDER" not in done.stdout  # the top-level help lists the environment


def test_options_go_before_or_after_the_command() -> None:
    before = parser().parse_args(["--db", "a.db", "--log-level", "info", "demo"])
    after = parser().parse_args(["demo", "--db", "a.db", "--log-level", "info"])
    assert (before.command, before.db, before.log_level) == ("demo", "a.db", "info")
    assert (after.command, after.db, after.log_level) == ("demo", "a.db", "info")
    plain = parser().parse_args([])
    assert (plain.command, plain.db) == ("serve", None)


@contextlib.contextmanager
def in_a_terminal(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The daemon with a terminal (raw: frames pass byte for byte) as its stdin, and the
    terminal's other end to type into."""
    controller, terminal = pty.openpty()
    tty.setraw(terminal)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "trellisd", "--db", str(tmp_path / "t.db")],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    os.close(terminal)
    try:
        yield daemon, controller
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.communicate()
        os.close(controller)


def test_in_a_terminal_it_says_what_it_is_then_serves(tmp_path: Path) -> None:
    with in_a_terminal(tmp_path) as (daemon, controller):
        assert daemon.stdout is not None and daemon.stderr is not None
        hint = b""
        while b"trellisd demo" not in hint:
            line = daemon.stderr.readline()
            assert line, f"stderr ended with {hint!r}"
            hint += line
        assert b"coding-agent daemon" in hint
        os.write(controller, frame(INITIALIZE))
        answer = read_frame(daemon.stdout)
        assert answer["result"]["serverInfo"]["name"] == "trellisd"  # type: ignore[index]
        os.write(controller, frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        assert read_frame(daemon.stdout)["id"] == 2
        os.write(controller, frame({"jsonrpc": "2.0", "method": "exit"}))
        assert daemon.wait(timeout=60) == 0


@pytest.mark.parametrize("serving", [False, True], ids=["at-start", "while-serving"])
def test_ctrl_c_in_a_terminal_ends_it_without_a_traceback(tmp_path: Path, serving: bool) -> None:
    with in_a_terminal(tmp_path) as (daemon, controller):
        assert daemon.stderr is not None and daemon.stdout is not None
        assert daemon.stderr.readline().startswith(b"trellisd ")  # the hint: it is running
        if serving:
            os.write(controller, frame(INITIALIZE))
            assert read_frame(daemon.stdout)["id"] == 1
        daemon.send_signal(signal.SIGINT)
        _, rest = daemon.communicate(timeout=60)
        assert daemon.returncode == 130
        assert b"Traceback" not in rest


def test_on_pipes_it_says_nothing(tmp_path: Path) -> None:
    daemon = subprocess.run(
        [sys.executable, "-m", "trellisd", "--db", str(tmp_path / "t.db")],
        input=frame(INITIALIZE)
        + frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + frame({"jsonrpc": "2.0", "method": "exit"}),
        capture_output=True,
        env=clean_env(),
        timeout=60,
    )
    assert daemon.returncode == 0
    assert daemon.stderr == b""


def test_help_says_a_store_may_be_kept_in_memory() -> None:
    done = trellisd("--help")
    assert done.returncode == 0
    assert ":memory: keeps it in the daemon's memory" in " ".join(done.stdout.split())
