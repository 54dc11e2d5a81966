"""A session's life on a long session, through ``trellisd.store.Store`` on a temporary file:

    python tests/bench/bench_session_life.py [--rounds 5] [--turns 1000 10000]

Prints, for sessions of each ``--turns`` size (turns of one model event and one reply step
each), as the median of ``--rounds`` rounds: forking at the head (a copy of every turn, run,
step, event and feed entry), reading the session's feed a page (200 entries) at its start and
at its end (``session/events``), and deleting a fork of that size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from trellisd.processes import pid_alive  # noqa: E402
from trellisd.records import (  # noqa: E402
    ProviderChoice,  # noqa: E402
    Step,
    Tokens,
)
from trellisd.store import Store  # noqa: E402

PAGE = 200


def build(store: Store, turns: int) -> str:
    session = store.sessions.create(
        "/work/project", "long", ProviderChoice(), store.leases.daemon_id
    )
    for n in range(turns):
        prompt = f"question {n}: " + "why " * 20
        _, run_id, _ = store.runs.begin(session.session_id, prompt, "gpt-4o-mini")
        store.runs.add_event(run_id, "model", None, {"model": "gpt-4o-mini"})
        reply = Step(1, "reply", prompt, "because " * 40, None, None, Tokens(1200, 80, 600))
        store.runs.add_step(run_id, reply)
        store.runs.finish(run_id, "finished")
    return session.session_id


def median_ms(rounds: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(scratch: Path, turns: int, rounds: int) -> None:
    store = Store(scratch / f"store-{turns}.db", pid_alive)
    store.leases.register()
    session_id = build(store, turns)
    head = store.sessions.get(session_id).head
    forks: list[str] = []
    fork = median_ms(
        rounds, lambda: forks.append(store.sessions.fork(session_id, head, store.leases).session_id)
    )
    entries = 4 * turns
    first = median_ms(rounds, lambda: store.sessions.feed(session_id, 0, PAGE))
    last = median_ms(rounds, lambda: store.sessions.feed(session_id, entries - PAGE, PAGE))
    delete = median_ms(rounds, lambda: store.sessions.delete(forks.pop(), store.leases))
    print(f"{turns} turns: fork at the head {fork:.1f} ms")
    print(f"{turns} turns: session/events first page of {PAGE} {first:.2f} ms")
    print(f"{turns} turns: session/events last page of {PAGE} {last:.2f} ms")
    print(f"{turns} turns: delete a fork of that size {delete:.1f} ms")
    store.leases.unregister()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for turns in args.turns:
            measure(Path(scratch), turns, args.rounds)


if __name__ == "__main__":
    main()
