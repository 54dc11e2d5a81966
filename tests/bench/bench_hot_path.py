"""The hot path, side by side: trellisd and, when it is installed, Codex's app-server, against
one loopback model streaming at full speed (``tests/fixtures/provider_servers.ScriptServer``
on 127.0.0.1: OpenAI Chat Completions for trellisd, the Responses API for Codex).

    python tests/bench/bench_hot_path.py [--rounds 7] [--tokens 20000] [--turns 2000 10000]
        [--codex PREFIX] [--daemon DIR]

Prints, as the median of ``--rounds`` rounds:

- warm turn: from the turn request to the first token notification, and that less the model's
  own time to its first byte (from the request reaching the model to its first chunk);
- tokens relayed per second: ``--tokens`` tokens streamed in one turn, from the first token
  notification to the turn's end;
- reopen / history of a session of each ``--turns`` size (trellisd only; built through
  ``trellisd.store.Store``): ``session/reopen`` and ``session/history``.

Codex is looked for under ``--codex`` (an ``npm install --prefix PREFIX @openai/codex``; default
``$CODEX_PREFIX`` or ``/tmp/codex``); its native binary runs as ``codex app-server`` with
``CODEX_HOME`` in a temporary folder and a model provider pointing at the loopback model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.fixtures.provider_servers import (  # noqa: E402
    Request,
    Response,
    ScriptServer,
    openai_reply,
    sse,
)

TOKEN = "tok "
BATCH = 32  # events per HTTP chunk when streaming at full speed


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


def batched(events: list[bytes]) -> list[bytes]:
    return [b"".join(events[i : i + BATCH]) for i in range(0, len(events), BATCH)]


def responses_reply(pieces: list[str]) -> list[bytes]:
    """The Responses API's stream of one assistant message."""
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress"}
    out = [
        sse({"type": "response.created", "response": {"id": "resp_1"}}, "response.created"),
        sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": []},
            },
            "response.output_item.added",
        ),
    ]
    for piece in pieces:
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
        }
        out.append(sse(delta, "response.output_text.delta"))
    done = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": "".join(pieces), "annotations": []}],
    }
    out.append(
        sse(
            {"type": "response.output_item.done", "output_index": 0, "item": done},
            "response.output_item.done",
        )
    )
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": len(pieces),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10 + len(pieces),
    }
    completed = {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}}
    out.append(sse(completed, "response.completed"))
    return out


class Model:
    """The loopback model: each request is answered with ``pieces`` in the wire its path
    names, at full speed, on a kept-alive connection."""

    def __init__(self) -> None:
        self.pieces = ["Hello ", "there."]
        self.server = ScriptServer(answer=self.answer)

    def answer(self, request: Request) -> Response:
        if request.path.endswith("/responses"):
            events = responses_reply(self.pieces)
        elif request.path.endswith("/chat/completions"):
            events = openai_reply(self.pieces, usage={"prompt_tokens": 10, "completion_tokens": 2})
        else:
            return Response(status=404, body=b'{"error": {"message": "not here"}}', keep_alive=True)
        return Response(chunks=batched(events), keep_alive=True)

    def last_model_call(self) -> Request:
        return [r for r in self.server.requests if r.path.endswith(("/responses", "/completions"))][
            -1
        ]


class Client:
    """What both programs have in common for the figures: a request, and a time for the
    first text notification of the turn."""

    first_token: float | None = None
    text: list[str]

    async def start(self, root: Path) -> None: ...

    async def turn(self, prompt: str) -> None: ...

    async def close(self) -> None: ...


class Trellisd(Client):
    def __init__(self, model: Model, daemon: Path, scratch: Path) -> None:
        from trellisd.client import DaemonClient

        self.spawn = DaemonClient.spawn
        self.model, self.daemon, self.scratch = model, daemon, scratch
        self.text = []

    def env(self) -> dict[str, str]:
        return {
            "PYTHONPATH": str(self.daemon),
            "TRELLISD_PROVIDER": "openai",
            "TRELLISD_BASE_URL": self.model.server.url + "/v1",
            "TRELLISD_API_KEY": "bench-key",
            "TRELLISD_MODEL": "m",
        }

    async def start(self, root: Path) -> None:
        self.client = await self.spawn(
            "--db", str(self.scratch / "store.db"), "--standalone", env={**os.environ, **self.env()}
        )
        self.client.on_notification = self.on_notification
        await self.client.initialize()
        self.session = (await self.client.request("session/open", {"root": str(root)}))["sessionId"]

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/token":
            if self.first_token is None:
                self.first_token = time.monotonic()
            self.text.append(params["text"])

    async def turn(self, prompt: str) -> None:
        self.first_token, self.text = None, []
        result = await self.client.request(
            "session/turn", {"sessionId": self.session, "prompt": prompt}
        )
        if result["outcome"] != "finished":
            raise SystemExit(f"trellisd: the turn ended {result['outcome']}: {result.get('error')}")

    async def close(self) -> None:
        await self.client.close()


class Codex(Client):
    """``codex app-server``: JSON-RPC, one message a line, over stdio."""

    def __init__(self, binary: Path, model: Model, scratch: Path) -> None:
        self.binary, self.model, self.scratch = binary, model, scratch
        self.text = []
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.completed: asyncio.Event = asyncio.Event()
        self.next_id = 0
        self.errors: list[str] = []

    async def start(self, root: Path) -> None:
        home = self.scratch / "codex-home"
        home.mkdir()
        url = self.model.server.url + "/v1"
        provider = (
            f'{{name="loopback", base_url="{url}", wire_api="responses", env_key="BENCH_KEY",'
            " request_max_retries=0, stream_max_retries=0}"
        )
        args = [
            "app-server",
            "-c", f"model_providers.loopback={provider}",
            "-c", 'model_provider="loopback"',
            "-c", 'model="m"',
        ]  # fmt: skip
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.scratch),
            "CODEX_HOME": str(home),
            "BENCH_KEY": "bench-key",
            "RUST_LOG": "error",
        }
        self.process = await asyncio.create_subprocess_exec(
            str(self.binary),
            *args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=root,
            limit=64 * 1024 * 1024,
        )
        self.reader = asyncio.create_task(self.read())
        self.stderr = asyncio.create_task(self.read_stderr())
        await self.request("initialize", {"clientInfo": {"name": "bench", "version": "1"}})
        self.notify("initialized", {})
        started = await self.request(
            "thread/start",
            {"cwd": str(root), "approvalPolicy": "never", "sandbox": "read-only"},
        )
        self.thread = started["thread"]["id"]

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.errors.append(line.decode(errors="replace").rstrip())

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            message = json.loads(line)
            if "id" in message and ("result" in message or "error" in message):
                future = self.pending.pop(message["id"], None)
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_exception(RuntimeError(str(message["error"])))
                    else:
                        future.set_result(message["result"])
            elif "id" in message:  # a request to the client: decline it
                self.send({"id": message["id"], "result": {"decision": "decline"}})
            else:
                self.on_notification(message.get("method", ""), message.get("params") or {})
        for future in self.pending.values():
            if not future.done():
                future.set_exception(RuntimeError("codex app-server exited"))

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "item/agentMessage/delta":
            if self.first_token is None:
                self.first_token = time.monotonic()
            self.text.append(params.get("delta", ""))
        elif method == "turn/completed":
            self.completed.set()
        elif method == "error":
            self.errors.append(json.dumps(params))

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self.send({"id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(future, 60)

    async def turn(self, prompt: str) -> None:
        self.first_token, self.text = None, []
        self.completed.clear()
        await self.request(
            "turn/start",
            {"threadId": self.thread, "input": [{"type": "text", "text": prompt}]},
        )
        await asyncio.wait_for(self.completed.wait(), 120)

    async def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self.reader.cancel()
        self.stderr.cancel()


async def hot_path(
    client: Client, model: Model, rounds: int, tokens: int, root: Path
) -> tuple[float, float, float]:
    """Median warm turn (ms to first token), its excess over the model's own first byte,
    and tokens relayed per second."""
    await client.start(root)
    try:
        model.pieces = ["Hello ", "there."]
        await client.turn("warm up")
        latency, excess = [], []
        for n in range(rounds):
            asked = time.monotonic()
            await client.turn(f"warm turn {n}")
            call = model.last_model_call()
            if client.first_token is None or call.first_chunk_at is None:
                raise SystemExit("no token came")
            own = call.first_chunk_at - call.at
            latency.append(client.first_token - asked)
            excess.append(client.first_token - asked - own)
        model.pieces = [TOKEN] * tokens
        speeds = []
        for _ in range(rounds):
            await client.turn("stream a lot")
            ended = time.monotonic()
            if "".join(client.text) != TOKEN * tokens or client.first_token is None:
                raise SystemExit("the streamed text does not add up to the model's reply")
            speeds.append(tokens / (ended - client.first_token))
    finally:
        await client.close()
    return statistics.median(latency), statistics.median(excess), statistics.median(speeds)


def build_session(db: Path, root: Path, turns: int) -> None:
    """A session of ``turns`` finished turns of one step each, written through the store."""
    from trellisd.records import Step, Tokens
    from trellisd.store import Store

    try:  # this revision
        from trellisd.processes import pid_alive
        from trellisd.records import ProviderChoice

        choice: Any = ProviderChoice()
    except ImportError:  # an older one, given with --daemon
        from trellisd.daemon import pid_alive  # type: ignore[import-not-found,no-redef]

        choice = {}
    store = Store(db, pid_alive)
    store.leases.register()
    session = store.sessions.create(str(root), "a long session", choice, store.leases.daemon_id)
    for n in range(turns):
        prompt = f"question {n}: " + "why " * 20
        _, run_id, _ = store.runs.begin(session.session_id, prompt, "gpt-4o-mini")
        reply = Step(1, "reply", prompt, "because " * 40, None, None, Tokens(1200, 80, 600))
        store.runs.add_step(run_id, reply)
        store.runs.finish(run_id, "finished")
    store.leases.unregister()
    store.close()
    print(session.session_id)


PAGE = 100


async def history(
    daemon: Path, scratch: Path, turns: int, rounds: int
) -> tuple[float, float, float, float]:
    """Median ``session/reopen`` and ``session/history`` of a ``turns``-turn session: whole,
    then the first page of ``PAGE`` turns (a daemon without paging answers whole)."""
    from trellisd.client import DaemonClient

    db, root = scratch / f"history-{turns}.db", scratch / "workspace"
    built = subprocess.run(
        [sys.executable, __file__, "--build", str(db), str(root), str(turns)],
        env={**os.environ, "PYTHONPATH": str(daemon)},
        capture_output=True,
        text=True,
        check=True,
    )
    session = built.stdout.split()[-1]
    client = await DaemonClient.spawn(
        "--db", str(db), "--standalone", env={**os.environ, "PYTHONPATH": str(daemon)}
    )
    await client.initialize()
    whole = {"sessionId": session}
    page = {"sessionId": session, "limit": PAGE}
    figures: list[list[float]] = [[], [], [], []]
    try:
        for _ in range(rounds):
            for column, (method, params) in enumerate(
                [
                    ("session/reopen", whole),
                    ("session/history", whole),
                    ("session/reopen", page),
                    ("session/history", page),
                ]
            ):
                figures[column].append(
                    await timed(lambda: client.request(method, params))  # noqa: B023
                )
    finally:
        await client.close()
    reopen, path, reopen_page, path_page = (statistics.median(f) for f in figures)
    return reopen, path, reopen_page, path_page


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.monotonic()
    await call()
    return time.monotonic() - started


def find_codex(prefix: Path) -> Path | None:
    for binary in sorted(prefix.glob("node_modules/@openai/codex*/vendor/*/bin/codex")):
        if os.access(binary, os.X_OK):
            return binary
    return None


async def main(args: argparse.Namespace) -> None:
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    daemon = Path(args.daemon).resolve()
    model = Model()
    with model.server, tempfile.TemporaryDirectory(prefix="trellisd-bench-") as d:
        scratch = Path(d)
        root = scratch / "workspace"
        root.mkdir()
        print(f"trellisd from {daemon}; {args.rounds} rounds, medians")
        ours = await hot_path(
            Trellisd(model, daemon, scratch), model, args.rounds, args.tokens, root
        )
        theirs: tuple[float, float, float] | None = None
        binary = find_codex(Path(args.codex))
        if binary is None:
            print(f"codex: not found under {args.codex} (npm install --prefix DIR @openai/codex)")
        else:
            codex = Codex(binary, model, scratch)
            try:
                theirs = await hot_path(codex, model, args.rounds, args.tokens, root)
            except (RuntimeError, TimeoutError, SystemExit, OSError) as exc:
                print(f"codex: {binary} could not run a turn against the loopback model: {exc}")
                for line in codex.errors[-5:]:
                    print(f"  codex stderr: {line}")
        rows = [
            ("warm turn: request to first token", ours[0], theirs and theirs[0], "ms"),
            ("  over the model's own first byte", ours[1], theirs and theirs[1], "ms"),
            (f"{args.tokens:,} tokens relayed", ours[2], theirs and theirs[2], "tokens/s"),
        ]
        print(f"{'figure':40} {'trellisd':>14} {'codex':>14} {'trellisd/codex':>15}")
        for label, mine, other, unit in rows:
            show = (lambda v: f"{v * 1000:.1f} ms") if unit == "ms" else (lambda v: f"{v:,.0f}/s")
            ratio = f"{mine / other:.2f}" if other else "-"
            print(f"{label:40} {show(mine):>14} {show(other) if other else '-':>14} {ratio:>15}")
        for turns in args.turns:
            reopen, path, reopen_page, path_page = await history(
                daemon, scratch, turns, args.rounds
            )
            label = f"reopen / history, {turns:,} turns"
            print(f"{label:40} {reopen * 1000:>6.0f} / {path * 1000:.0f} ms {'-':>14} {'-':>15}")
            label = f"  first page of {PAGE}"
            print(
                f"{label:40} {reopen_page * 1000:>6.1f} / {path_page * 1000:.1f} ms"
                f" {'-':>14} {'-':>15}"
            )


def cli() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--build":
        build_session(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="rounds per figure (default 7)")
    p.add_argument("--tokens", type=int, default=20_000, help="tokens of the long turn")
    p.add_argument(
        "--turns", type=int, nargs="*", default=[2_000, 10_000], help="sizes of the long sessions"
    )
    p.add_argument(
        "--codex",
        default=os.environ.get("CODEX_PREFIX", "/tmp/codex"),
        help="the npm prefix @openai/codex was installed into",
    )
    p.add_argument(
        "--daemon", default=str(REPO / "daemon"), help="the folder holding the trellisd package"
    )
    args = p.parse_args()
    if args.rounds < 1 or args.tokens < 1:
        p.error("--rounds and --tokens must be at least 1")
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
