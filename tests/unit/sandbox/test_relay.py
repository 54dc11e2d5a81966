"""The relay carries a sandboxed program's loopback connections to a unix socket and stands
in for the program towards the walls: its stdio, its signals and its exit status.

The relay runs for real in ``bwrap --unshare-net`` (a loopback of its own, so any port is
free) in front of a small Python program."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trellisd.sandbox.network import relay_prefix

BWRAP = shutil.which("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed")
PORT = 3128

# Sends a request in two parts, ends its side, and prints what comes back until the end.
CLIENT = f"""
import socket, sys
with socket.create_connection(("127.0.0.1", {PORT})) as conn:
    conn.sendall(b"first part, ")
    conn.sendall(b"second part")
    conn.shutdown(socket.SHUT_WR)
    got = b""
    while data := conn.recv(4096):
        got += data
print(got.decode(), flush=True)
sys.exit(int(sys.argv[1]))
"""


async def walled(socket_path: Path, *program: str) -> asyncio.subprocess.Process:
    assert BWRAP is not None
    walls = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net"]
    return await asyncio.create_subprocess_exec(
        *walls,
        "--die-with-parent",
        "--",
        *relay_prefix(str(socket_path), PORT),
        *program,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@needs_bwrap
async def test_bytes_go_through_both_ways_with_each_end_passed_on(tmp_path: Path) -> None:
    heard: list[bytes] = []

    async def reverse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # returns only when the program's end of file arrived
        heard.append(data)
        writer.write(data[::-1])
        writer.close()  # the program reads to the end: this close must reach it too

    server = await asyncio.start_unix_server(reverse, tmp_path / "s")
    async with server:
        relay = await walled(tmp_path / "s", sys.executable, "-c", CLIENT, "5")
        out, _ = await relay.communicate()
    assert heard == [b"first part, second part"]
    assert out == b"trap dnoces ,trap tsrif\n"
    assert relay.returncode == 5


# Streams 4 MiB out while it reads the echo back, and prints the digests of both.
STREAMER = f"""
import hashlib, os, socket, threading
sent = os.urandom(4 << 20)
with socket.create_connection(("127.0.0.1", {PORT})) as conn:
    def send():
        conn.sendall(sent)
        conn.shutdown(socket.SHUT_WR)
    threading.Thread(target=send).start()
    got = hashlib.sha256()
    while data := conn.recv(65536):
        got.update(data)
print(hashlib.sha256(sent).hexdigest(), got.hexdigest())
"""


@needs_bwrap
async def test_a_large_stream_comes_back_intact_while_both_ways_are_busy(tmp_path: Path) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(echo, tmp_path / "s")
    async with server:
        relay = await walled(tmp_path / "s", sys.executable, "-c", STREAMER)
        out, _ = await relay.communicate()
    sent, got = out.split()
    assert sent == got
    assert relay.returncode == 0


@needs_bwrap
async def test_without_the_gate_a_connection_is_closed_and_the_relay_says_why(
    tmp_path: Path,
) -> None:
    reads = f"import socket; print(socket.create_connection(('127.0.0.1', {PORT})).recv(9))"
    relay = await walled(tmp_path / "gone", sys.executable, "-c", reads)
    out, err = await relay.communicate()
    assert out == b"b''\n"  # the program's connection ended with nothing in it
    assert err.decode().startswith(f"trellisd relay: cannot reach {tmp_path / 'gone'}: ")
    assert relay.returncode == 0


@needs_bwrap
async def test_the_program_exits_with_its_own_status_or_128_plus_its_signal(
    tmp_path: Path,
) -> None:
    for program, status in [
        (["sh", "-c", "exit 7"], 7),
        (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM),
        (["no-such-program-here"], 127),
    ]:
        relay = await walled(tmp_path / "unused", *program)
        assert await relay.wait() == status


WAITS_FOR_TERM = """
import os, signal, sys
signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM", flush=True), sys.exit(42)))
print(os.getppid(), flush=True)
while True:
    signal.pause()
"""


@needs_bwrap
async def test_sigterm_sent_to_the_relay_reaches_the_program(tmp_path: Path) -> None:
    relay = await walled(tmp_path / "unused", sys.executable, "-c", WAITS_FOR_TERM)
    assert relay.stdout is not None
    relay_pid = int(await relay.stdout.readline())  # the program's parent: the relay
    os.kill(relay_pid, signal.SIGTERM)
    assert await relay.stdout.read() == b"got SIGTERM\n"
    assert await relay.wait() == 42


def test_bad_arguments_say_how_to_call_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trellisd.sandbox.relay", "--unix", "/s", "--port", "x", "--"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "trellisd relay: --port x: not a port",
        "usage: python -m trellisd.sandbox.relay --unix SOCK --port PORT -- argv...",
    ]


def test_the_relay_imports_only_light_modules() -> None:
    """It starts before every walled program that may use the network: an interpreter's
    start and little more."""
    probe = "import sys, trellisd.sandbox.relay; print(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    heavy = {"asyncio", "socket", "signal", "enum", "typing", "selectors", "subprocess"}
    assert not loaded & heavy
    assert not any(
        name.startswith("trellisd.")
        for name in loaded - {"trellisd.sandbox", "trellisd.sandbox.relay"}
    )


@needs_bwrap
async def test_the_program_does_not_inherit_pythons_ignored_sigpipe(tmp_path: Path) -> None:
    """``yes | head -1`` must end by SIGPIPE, as it does in a terminal."""
    relay = await walled(tmp_path / "unused", "grep", "SigIgn", "/proc/self/status")
    out, _ = await relay.communicate()
    ignored = int(out.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))


# Connects to the port the proxy variables name, and prints them and what comes back.
PICKED = """
import os, socket
port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
with socket.create_connection(("127.0.0.1", port)) as conn:
    conn.sendall(b"hello")
    conn.shutdown(socket.SHUT_WR)
    print(os.environ["https_proxy"], os.environ["NO_PROXY"], conn.recv(64).decode(), flush=True)
"""


@needs_bwrap
async def test_port_0_takes_a_port_the_kernel_picks_and_names_it_to_the_program(
    tmp_path: Path,
) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"echo " + await reader.read())
        writer.close()

    assert BWRAP is not None
    server = await asyncio.start_unix_server(echo, tmp_path / "s")
    async with server:
        relay = await asyncio.create_subprocess_exec(
            *[BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--die-with-parent"],
            "--",
            *relay_prefix(str(tmp_path / "s"), 0),
            sys.executable,
            "-c",
            PICKED,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": os.environ["PATH"], "HTTP_PROXY": "http://127.0.0.1:0"},
        )
        out, err = await relay.communicate()
    assert relay.returncode == 0, err
    url, no_proxy, answer = out.decode().split(" ", 2)
    assert url.startswith("http://127.0.0.1:") and int(url.rsplit(":", 1)[1]) > 0
    assert no_proxy == "localhost,127.0.0.1,::1" and answer == "echo hello\n"
