"""Searching sessions: ``session/list`` with a ``query`` over a store of many sessions.

    python tests/bench/bench_search.py [--sessions 10000] [--turns 4] [--rounds 21]

Fills a new store with ``--sessions`` sessions of ``--turns`` turns each (prompts and replies
of 10 to 60 words drawn with a Zipf law from a vocabulary of 5,000 words, so that some words
are in most sessions and most are in few; written in one transaction through the store's own
tables, its triggers filling the search index), then prints, as the median (and max) of
``--rounds`` searches each, the time of one search page (50 hits) for queries of each kind:

- in the store (``Store.search.page``), and
- over the wire: ``session/list`` ``{query}`` to a daemon on the same store, from the request
  to its answer.

The goal is 50 ms for a page over 10,000 sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "daemon")]

from trellisd.client import DaemonClient  # noqa: E402
from trellisd.processes import pid_alive  # noqa: E402
from trellisd.store import Store  # noqa: E402

VOCABULARY = 5_000


def words(rng: random.Random, lexicon: list[str], weights: list[float], n: int) -> str:
    return " ".join(rng.choices(lexicon, weights, k=n))


def fill(db: Path, sessions: int, turns: int) -> dict[str, str]:
    """The store at ``db`` with the sessions; returns a query of each kind."""
    rng = random.Random(12)
    lexicon = [f"w{n}" for n in range(VOCABULARY)]
    weights = [1 / (rank + 1) for rank in range(VOCABULARY)]
    store = Store(db, pid_alive)
    try:
        with store.db.write() as con:
            for s in range(sessions):
                sid = f"s-{s:08d}"
                stamp = f"2026-01-01T00:00:{s:08d}"
                con.execute(
                    "INSERT INTO session(id, root, title, head, created_at, updated_at)"
                    " VALUES (?, '/work', ?, NULL, ?, ?)",
                    (sid, words(rng, lexicon, weights, 5), stamp, stamp),
                )
                parent = None
                for t in range(turns):
                    tid, rid = f"t-{s:08d}-{t}", f"r-{s:08d}-{t}"
                    con.execute(
                        "INSERT INTO turn(id, session_id, parent_id, prompt, created_at)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (
                            tid,
                            sid,
                            parent,
                            words(rng, lexicon, weights, rng.randint(10, 60)),
                            stamp,
                        ),
                    )
                    con.execute(
                        "INSERT INTO run(id, turn_id, outcome, pid, started_at)"
                        " VALUES (?, ?, 'finished', 0, ?)",
                        (rid, tid, stamp),
                    )
                    con.execute(
                        "INSERT INTO step(run_id, n, decision, text, created_at)"
                        " VALUES (?, 1, 'reply', ?, ?)",
                        (rid, words(rng, lexicon, weights, rng.randint(10, 60)), stamp),
                    )
                    parent = tid
                con.execute("UPDATE session SET head = ? WHERE id = ?", (parent, sid))
    finally:
        store.close()
    return {
        "common word (in most sessions)": "w1",
        "mid word": "w60",
        "rare word": "w4000",
        "two words": "w3 w200",
        "prefix (w12*)": "w12",
        "absent word": "nothing",
    }


Timings = dict[str, tuple[float, float, int]]  # query: median, max (seconds), hits


async def timed(
    search: Callable[[str], Awaitable[int]], queries: dict[str, str], rounds: int
) -> Timings:
    out = {}
    for name, query in queries.items():
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            hits = await search(query)
            times.append(time.perf_counter() - started)
        out[name] = (statistics.median(times), max(times), hits)
    return out


async def in_store(db: Path, queries: dict[str, str], rounds: int) -> Timings:
    store = Store(db, pid_alive)

    async def search(query: str) -> int:
        return len(store.search.page(query, None, 50, None)[0])

    try:
        return await timed(search, queries, rounds)
    finally:
        store.close()


async def over_the_wire(db: Path, queries: dict[str, str], rounds: int) -> Timings:
    env = {"PYTHONPATH": str(REPO / "daemon")}
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    client = await DaemonClient.spawn("--db", str(db), env={**os.environ, **env})
    await client.initialize()

    async def search(query: str) -> int:
        return len((await client.request("session/list", {"query": query}))["sessions"])

    try:
        return await timed(search, queries, rounds)
    finally:
        await client.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=10_000)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--rounds", type=int, default=21)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "trellisd.db"
        started = time.perf_counter()
        queries = fill(db, args.sessions, args.turns)
        print(
            f"filled {args.sessions:,} sessions of {args.turns} turns in"
            f" {time.perf_counter() - started:.1f} s ({db.stat().st_size / 2**20:.0f} MiB)"
        )
        store_times = asyncio.run(in_store(db, queries, args.rounds))
        wire_times = asyncio.run(over_the_wire(db, queries, args.rounds))
        print(f"{'query':34} {'hits':>5} {'store median/max ms':>20} {'wire median/max ms':>20}")
        for name, query in queries.items():
            median, worst, hits = store_times[name]
            wire_median, wire_worst, _ = wire_times[name]
            print(
                f"{name + ' ' + repr(query):34} {hits:5d}"
                f" {median * 1000:11.1f} / {worst * 1000:6.1f}"
                f" {wire_median * 1000:11.1f} / {wire_worst * 1000:6.1f}"
            )


if __name__ == "__main__":
    main()
