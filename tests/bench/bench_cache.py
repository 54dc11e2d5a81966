"""How much of a long session's input the provider's prompt cache serves: a 20-turn session
against the test model server (OpenAI-format SSE on 127.0.0.1), whose usage reports as
``prompt_tokens_details.cached_tokens`` the words of the leading messages a request shares
with an earlier one, as a provider's prefix cache would.

    python tests/bench/bench_cache.py [--turns 20] [--reads]

With ``--reads`` each turn first reads a file of its own (``read_file``, 200 words) and then
answers, so the session's transcript holds tool calls and their results.

Prints the input tokens, the cached input tokens and the cached share of the session, from
the ledger (``session/history``), the cost with and without the cache discount at the
``gpt-4o-mini`` rates of the built-in price table, and the last ``session/usage``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.fixtures.model_server import ModelServer  # noqa: E402
from trellisd.client import DaemonClient  # noqa: E402
from trellisd.pricing import Price, cost  # noqa: E402
from trellisd.records import Tokens  # noqa: E402

MODEL = "gpt-4o-mini"


async def session(server: ModelServer, scratch: Path, turns: int, reads: bool) -> None:
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    path = os.environ.get("PYTHONPATH")
    env = {
        "PYTHONPATH": str(REPO / "daemon") + (os.pathsep + path if path else ""),
        "TRELLISD_PROVIDER": "openai",
        "TRELLISD_BASE_URL": server.url,
        "TRELLISD_API_KEY": "x",
        "TRELLISD_MODEL": MODEL,
        "TRELLISD_PRICES": str(scratch / "no-prices.json"),
    }
    workspace = scratch / "workspace"
    workspace.mkdir()
    client = await DaemonClient.spawn(
        "--db", str(scratch / "store.db"), "--standalone", env={**os.environ, **env}
    )
    usages: list[dict[str, Any]] = []
    client.on_notification = lambda method, params: (
        usages.append(params) if method == "session/usage" else None
    )
    await client.initialize()
    opened = await client.request("session/open", {"root": str(workspace)})
    sid = opened["sessionId"]
    for n in range(1, turns + 1):
        words = " ".join(f"w{n}-{i}" for i in range(40))
        if reads:
            note = " ".join(f"n{n}-{i}" for i in range(200))
            (workspace / f"notes-{n}.md").write_text(note + "\n")
            server.reply(f"reading {n}", tool_calls=[_read(n)])
        server.reply(f"answer {n}: " + words)
        result = await client.request(
            "session/turn", {"sessionId": sid, "prompt": f"question {n}: {words}"}
        )
        if result["outcome"] != "finished":
            raise SystemExit(f"turn {n} ended {result['outcome']}: {result.get('error')}")
    history = (await client.request("session/history", {"sessionId": sid}))["turns"]
    await client.close()

    total = Tokens()
    for turn in history:
        t = turn["tokens"]
        total = total + Tokens(t["input"], t["output"], t["cached"])
    assert total.input is not None and total.cached is not None
    price = Price.of(0.15, 0.60, 0.075)
    table = {MODEL: price}
    uncached = Tokens(total.input, total.output, 0)
    print(f"turns: {len(history)}")
    print(f"model requests: {len(server.requests)}")
    print(f"input tokens: {total.input}")
    print(f"cached input tokens: {total.cached}")
    print(f"cached share of input: {total.cached / total.input:.1%}")
    print(f"cost at {MODEL} rates: ${cost(MODEL, total, table):.6f}")
    print(f"cost without the cache discount: ${cost(MODEL, uncached, table):.6f}")
    last = usages[-1]
    print(f"last session/usage: context {last['contextTokens']} of {last['contextWindow']}")


def _read(n: int) -> dict[str, Any]:
    return {"id": f"call-{n}", "name": "read_file", "arguments": {"path": f"notes-{n}.md"}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=20, help="turns in the session (default 20)")
    p.add_argument("--reads", action="store_true", help="each turn reads a file first")
    args = p.parse_args()
    if args.turns < 1:
        p.error("--turns must be at least 1")
    with ModelServer() as server, tempfile.TemporaryDirectory(prefix="trellisd-bench-") as d:
        server.caching = True
        asyncio.run(session(server, Path(d), args.turns, args.reads))


if __name__ == "__main__":
    main()
