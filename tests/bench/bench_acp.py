"""``trellisd acp`` against the native protocol, in the same run and against the same model
server (OpenAI-format SSE on 127.0.0.1, no delay between pieces): from spawning the process
to the answer to ``initialize`` and to a session opened on top of it (``session/open``,
``session/new``: ``trellisd acp`` answers ``initialize`` before it has loaded the store and
the agent loop, so the second figure is the one a first prompt waits for), from sending a prompt
to the first streamed text (``agent_message_chunk`` / ``session/token``), and to the whole
reply of ``--tokens`` pieces received. Each client is a bare reader of its framing
(newline-delimited JSON for ACP, ``Content-Length`` frames for native), so the figures are
the daemon's. Runs alternate native and ACP on a fresh store each.

With ``--shared`` both attach to the store's shared daemon (in a runtime folder of the
bench's own), started before the clock starts by a window that comes and goes: the figures of
an editor starting while another window of the user keeps the daemon running.

    python tests/bench/bench_acp.py [--runs 5] [--tokens 2000] [--shared]

Prints one line per figure: the native and ACP medians in milliseconds, and ACP / native.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.fixtures.model_server import ModelServer  # noqa: E402
from trellisd.client import DaemonClient  # noqa: E402

PIECE = "tok "
SHARED: dict[str, str] = {}  # with --shared: the runtime folder of the bench's daemons


def child_env(server: ModelServer) -> dict[str, str]:
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    path = os.environ.get("PYTHONPATH")
    return {
        "PYTHONPATH": str(REPO / "daemon") + (os.pathsep + path if path else ""),
        "TRELLISD_PROVIDER": "openai",
        "TRELLISD_BASE_URL": server.url,
        "TRELLISD_API_KEY": "x",
        "TRELLISD_MODEL": "m",
        "TRELLISD_SHARED": "0",
        **SHARED,
    }


async def warm(server: ModelServer, store: Path) -> None:
    """With --shared: the store's daemon started by a window that comes and goes."""
    if SHARED:
        client = await DaemonClient.spawn(
            "--db", str(store), env={**os.environ, **child_env(server)}
        )
        await client.initialize()
        await client.close()


async def stop(server: ModelServer, store: Path) -> None:
    if SHARED:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trellisd",
            "stop",
            "--db",
            str(store),
            stdout=asyncio.subprocess.DEVNULL,
            env={**os.environ, **child_env(server)},
        )
        await process.wait()


class Timing:
    def __init__(self, tokens: int) -> None:
        self.want = len(PIECE) * tokens
        self.chars = 0
        self.first: float | None = None
        self.all: float | None = None

    def text(self, text: str) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.chars += len(text)
        if self.chars >= self.want and self.all is None:
            self.all = now


Figures = tuple[float, float, float, float]


async def native(server: ModelServer, scratch: Path, tokens: int) -> Figures:
    workspace = scratch / "workspace"
    workspace.mkdir()
    await warm(server, scratch / "store.db")
    spawned = time.perf_counter()
    client = await DaemonClient.spawn(
        "--db",
        str(scratch / "store.db"),
        *(() if SHARED else ("--standalone",)),
        env={**os.environ, **child_env(server)},
    )
    await client.initialize()
    ready = time.perf_counter() - spawned
    timing = Timing(tokens)
    client.on_notification = lambda m, p: timing.text(p["text"]) if m == "session/token" else None
    session = await client.request("session/open", {"root": str(workspace)})
    opened = time.perf_counter() - spawned
    server.reply(PIECE * tokens, pieces=tokens)
    asked = time.perf_counter()
    await client.request("session/turn", {"sessionId": session["sessionId"], "prompt": "go"})
    await client.close()
    await stop(server, scratch / "store.db")
    assert timing.first is not None and timing.all is not None, "the reply did not stream"
    return ready, opened, timing.first - asked, timing.all - asked


class AcpClient:
    """Newline-delimited JSON-RPC to ``trellisd acp``: requests, answers, notifications."""

    def __init__(self, process: asyncio.subprocess.Process, timing: Timing) -> None:
        self.process, self.timing = process, timing
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            if "id" in message and "method" not in message:
                self.pending.pop(message["id"]).set_result(message.get("result"))
            elif message.get("method") == "session/update":
                update = message["params"]["update"]
                if update["sessionUpdate"] == "agent_message_chunk":
                    self.timing.text(update["content"]["text"])

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.process.stdin is not None
        self.next_id += 1
        future = self.pending[self.next_id] = asyncio.get_running_loop().create_future()
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        return await future

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await self.process.wait()
        await self.reader


async def acp(server: ModelServer, scratch: Path, tokens: int) -> Figures:
    workspace = scratch / "workspace"
    workspace.mkdir()
    timing = Timing(tokens)
    await warm(server, scratch / "store.db")
    spawned = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trellisd",
        "acp",
        "--db",
        str(scratch / "store.db"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **child_env(server)},
    )
    client = AcpClient(process, timing)
    await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    ready = time.perf_counter() - spawned
    session = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    opened = time.perf_counter() - spawned
    server.reply(PIECE * tokens, pieces=tokens)
    asked = time.perf_counter()
    prompt = [{"type": "text", "text": "go"}]
    await client.request("session/prompt", {"sessionId": session["sessionId"], "prompt": prompt})
    await client.close()
    await stop(server, scratch / "store.db")
    assert timing.first is not None and timing.all is not None, "the reply did not stream"
    return ready, opened, timing.first - asked, timing.all - asked


async def run(runs: int, tokens: int) -> None:
    figures: dict[str, list[Figures]] = {"native": [], "acp": []}
    with ModelServer() as server:
        for _ in range(runs):
            for name, one in (("native", native), ("acp", acp)):
                with tempfile.TemporaryDirectory(prefix="trellisd-bench-") as d:
                    figures[name].append(await one(server, Path(d), tokens))
    labels = (
        "spawn to initialize answer",
        "spawn to a session opened (session/open, session/new)",
        "prompt to first text",
        f"prompt to {tokens:,} tokens received",
    )
    print(f"runs: {runs} (median of each){', shared daemon' if SHARED else ''}")
    for index, label in enumerate(labels):
        mine = statistics.median(f[index] for f in figures["acp"]) * 1000
        theirs = statistics.median(f[index] for f in figures["native"]) * 1000
        print(f"{label}: native {theirs:.0f} ms, ACP {mine:.0f} ms, ACP/native {mine / theirs:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs of each protocol (default 5)")
    p.add_argument("--tokens", type=int, default=2000, help="pieces streamed (default 2000)")
    p.add_argument("--shared", action="store_true", help="attach to a shared daemon")
    args = p.parse_args()
    if args.runs < 1 or args.tokens < 1:
        p.error("--runs and --tokens must be at least 1")
    if not args.shared:
        asyncio.run(run(args.runs, args.tokens))
        return
    with tempfile.TemporaryDirectory(prefix="rt", dir="/tmp") as runtime:
        SHARED.update(TRELLISD_SHARED="1", XDG_RUNTIME_DIR=runtime)
        asyncio.run(run(args.runs, args.tokens))


if __name__ == "__main__":
    main()
