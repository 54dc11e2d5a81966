"""How long an editor waits for a daemon of its own: from spawning ``python -m trellisd --db
<tmp> --standalone`` to the answer to ``initialize`` (which opens, and on first use migrates,
the store). ``bench_attach.py`` measures attaching to the shared daemon.

    python tests/bench/bench_startup.py [--runs 10] [--warmup 1] [--fresh]

Prints one line per figure, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "daemon")]

from trellisd.client import DaemonClient  # noqa: E402


def child_env() -> dict[str, str]:
    """The daemon imports this checkout's trellisd, and no provider is configured."""
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(REPO / "daemon") + (os.pathsep + path if path else "")}


async def one_start(db: Path, env: dict[str, str]) -> float:
    """Seconds from spawn to the ``initialize`` answer; the daemon is shut down after."""
    started = time.perf_counter()
    client = await DaemonClient.spawn("--db", str(db), "--standalone", env={**os.environ, **env})
    await client.request(
        "initialize",
        {"processId": os.getpid(), "rootUri": None, "capabilities": {}},
    )
    answered = time.perf_counter() - started
    client.notify("initialized")
    code = await client.close()
    if code != 0:
        raise SystemExit(f"the daemon exited with status {code}")
    return answered


async def bench(runs: int, warmup: int, fresh: bool) -> list[float]:
    env = child_env()
    with tempfile.TemporaryDirectory(prefix="trellisd-bench-") as scratch:
        times = []
        for n in range(warmup + runs):
            db = Path(scratch) / (f"store-{n}.db" if fresh else "store.db")
            seconds = await one_start(db, env)
            if n >= warmup:
                times.append(seconds)
        return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="measured starts (default 10)")
    p.add_argument(
        "--warmup", type=int, default=1, help="starts before measuring, not counted (default 1)"
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="a new store for every start, so each one creates and migrates it"
        " (default: one store, created by the first start)",
    )
    args = p.parse_args()
    if args.runs < 1:
        p.error("--runs must be at least 1")

    times = [t * 1000 for t in asyncio.run(bench(args.runs, max(args.warmup, 0), args.fresh))]
    print(f"starts: {len(times)} ({'a new store each' if args.fresh else 'one existing store'})")
    print(f"spawn to initialize answer, median: {statistics.median(times):.1f} ms")
    print(f"spawn to initialize answer, min: {min(times):.1f} ms")
    print(f"spawn to initialize answer, max: {max(times):.1f} ms")


if __name__ == "__main__":
    main()
