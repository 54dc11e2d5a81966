"""Verifying a session's log: ``session/verify``'s work on a session of ``--entries`` entries
(one turn of tool steps, each followed by an event), built through ``trellisd.store.Store``.

    python tests/bench/bench_verify.py [--entries 10000] [--rounds 7]

Prints the median and the best of ``--rounds`` full checks (wall clock, and the process's CPU
time, which a busy machine disturbs less), and the median of the cheap check a reopen makes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from trellisd.records import ProviderChoice, Step, Tokens, ToolCall  # noqa: E402
from trellisd.store import Store  # noqa: E402


def build(store: Store, entries: int) -> str:
    session = store.sessions.create(
        "/work/project", "bench", ProviderChoice(), store.leases.daemon_id
    )
    _, run_id, _ = store.runs.begin(session.session_id, "walk the tree")
    made = 4  # session, title, turn, run
    n = 0
    while made < entries - 1:
        n += 1
        call = ToolCall(f"c{n}", "read_file", {"path": f"src/module_{n}.py"})
        text = f"reading module {n} " * 8
        store.runs.add_step(
            run_id,
            Step(n, "tool", None, text, call, "def f():\n    return 1\n" * 20, Tokens(900, 40, 0)),
        )
        store.runs.add_event(run_id, "retry", n, {"attempt": 2, "delay": 0.5, "reason": "busy"})
        made += 2
    store.runs.finish(run_id, "finished")
    return session.session_id


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "trellisd.db", lambda pid: True)
        store.leases.register()
        session_id = build(store, args.entries)
        full, cpu, tail = [], [], []
        for _ in range(args.rounds):
            start, start_cpu = time.perf_counter(), time.process_time()
            verdict = store.sessions.verify(session_id)
            full.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            assert verdict.ok, verdict.reason
            start = time.perf_counter()
            _, _, _, integrity = store.sessions.reopen(session_id, store.leases, 1)
            tail.append(time.perf_counter() - start)
            assert integrity == "ok"
        store.close()
    print(f"entries: {verdict.entries}")
    median, best = statistics.median(full) * 1000, min(full) * 1000
    print(f"session/verify: median {median:.1f} ms, best {best:.1f} ms")
    print(f"session/verify CPU time: median {statistics.median(cpu) * 1000:.1f} ms")
    print(f"session/reopen (limit 1, tail check): median {statistics.median(tail) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
