"""How fast the daemon relays a model's stream to the editor: one turn against the test model
server (OpenAI-format SSE on 127.0.0.1, no delay between pieces), counting the
``session/token`` notifications the editor receives.

    python tests/bench/bench_tokens.py [--pieces 20000]

Prints one line per figure: notifications, notifications per second (from the first token to
the answer to ``session/turn``), the time to the first token, and the daemon's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


def peak_rss_kib(pid: int) -> int | None:
    """``VmHWM`` (the resident set's high-water mark) of a running process, in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


class Tokens:
    def __init__(self) -> None:
        self.count = 0
        self.chars = 0
        self.first: float | None = None

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/token":
            if self.first is None:
                self.first = time.perf_counter()
            self.count += 1
            self.chars += len(params["text"])


async def one_turn(server: ModelServer, scratch: Path, pieces: int) -> None:
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    path = os.environ.get("PYTHONPATH")
    env = {
        "PYTHONPATH": str(REPO / "daemon") + (os.pathsep + path if path else ""),
        "TRELLISD_PROVIDER": "openai",
        "TRELLISD_BASE_URL": server.url,
        "TRELLISD_API_KEY": "x",
        "TRELLISD_MODEL": "m",
    }
    workspace = scratch / "workspace"
    workspace.mkdir()
    client = await DaemonClient.spawn(
        "--db", str(scratch / "store.db"), "--standalone", env={**os.environ, **env}
    )
    tokens = Tokens()
    client.on_notification = tokens.on_notification
    await client.initialize()
    session = await client.request("session/open", {"root": str(workspace)})

    server.reply(PIECE * pieces, pieces=pieces)
    asked = time.perf_counter()
    result = await client.request(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "stream a lot"}
    )
    answered = time.perf_counter()
    rss = peak_rss_kib(client.process.pid)
    code = await client.close()

    if result["outcome"] != "finished":
        raise SystemExit(f"the turn ended {result['outcome']}: {result.get('error')}")
    if len(result["reply"]) != len(PIECE) * pieces or tokens.chars != len(result["reply"]):
        raise SystemExit("the streamed pieces do not add up to the reply")
    assert tokens.first is not None
    streaming = answered - tokens.first
    print(f"model pieces sent: {pieces}")
    print(f"session/token notifications: {tokens.count}")
    print(f"notifications per second: {tokens.count / streaming:,.0f}")
    print(f"first token to turn answer: {streaming * 1000:.0f} ms")
    print(f"turn request to first token: {(tokens.first - asked) * 1000:.0f} ms")
    print(
        f"daemon peak RSS (VmHWM): {rss / 1024:.1f} MiB"
        if rss is not None
        else "daemon peak RSS (VmHWM): unavailable (no /proc)"
    )
    if code != 0:
        raise SystemExit(f"the daemon exited with status {code}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--pieces",
        type=int,
        default=20_000,
        help="text pieces the model streams in its reply (default 20000)",
    )
    args = p.parse_args()
    if args.pieces < 1:
        p.error("--pieces must be at least 1")
    with ModelServer() as server, tempfile.TemporaryDirectory(prefix="trellisd-bench-") as d:
        asyncio.run(one_turn(server, Path(d), args.pieces))


if __name__ == "__main__":
    main()
