"""Exporting and importing a long session: ``session/export`` and ``session/import``.

    python tests/bench/bench_archive.py [--turns 1000] [--result-bytes 2000] [--rounds 5]
        [--rewrites 0] [--file-bytes 102400]

Writes a session of ``--turns`` turns into a new store (each turn a tool step whose result
holds ``--result-bytes`` bytes, as a file read does, then a reply and an event;
``tests/fixtures/sessions.fill_session``; the first ``--rewrites`` turns each also rewrite one
``--file-bytes`` text file, a few lines changed, so that the file holds their change sets and
contents), starts a daemon on it and another on an empty
store, and prints, as the median (and max) of ``--rounds`` rounds, from request to answer:

- ``session/export`` of the session to a file (its size is printed too);
- ``session/import`` of that file into the other store with ``asNew`` (each round a new
  copy, so the store grows as it would);

and the peak memory (``VmHWM``) of each daemon, read before it is shut down (Linux only):
neither holds the session twice in memory.
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
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.fixtures.sessions import fill_session  # noqa: E402
from trellisd.client import DaemonClient  # noqa: E402


def peak_rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


async def bench(turns: int, result_bytes: int, rounds: int, rewrites: int, file_bytes: int) -> None:
    for name in [n for n in os.environ if n.startswith("TRELLISD_")]:
        del os.environ[name]
    env = {"PYTHONPATH": str(REPO / "daemon")}
    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "source.db", Path(folder) / "target.db"
        started = time.perf_counter()
        sid = await asyncio.to_thread(
            fill_session, source, turns, result_bytes, "/work", rewrites, file_bytes
        )
        print(
            f"wrote a session of {turns:,} turns ({rewrites:,} rewriting a"
            f" {file_bytes / 1024:.0f} KiB file) in {time.perf_counter() - started:.1f} s"
        )
        exporter = await DaemonClient.spawn("--db", str(source), env={**os.environ, **env})
        importer = await DaemonClient.spawn("--db", str(target), env={**os.environ, **env})
        await exporter.initialize()
        await importer.initialize()
        path = Path(folder) / "session.trellisd"
        exports, imports = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            done = await exporter.request("session/export", {"sessionId": sid, "path": str(path)})
            exports.append(time.perf_counter() - started)
            started = time.perf_counter()
            await importer.request("session/import", {"path": str(path), "asNew": True})
            imports.append(time.perf_counter() - started)
        peaks = peak_rss_mib(exporter.process.pid), peak_rss_mib(importer.process.pid)
        await exporter.close()
        await importer.close()
    size = done["bytes"] / 2**20
    print(
        f"session/export  {turns:,} turns, {size:.1f} MiB:"
        f" median {statistics.median(exports) * 1000:.0f} ms, max {max(exports) * 1000:.0f} ms"
    )
    print(
        f"session/import  {turns:,} turns, {size:.1f} MiB:"
        f" median {statistics.median(imports) * 1000:.0f} ms, max {max(imports) * 1000:.0f} ms"
    )
    if None not in peaks:
        print(f"peak RSS: exporting daemon {peaks[0]:.0f} MiB, importing daemon {peaks[1]:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=1_000)
    p.add_argument("--result-bytes", type=int, default=2_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rewrites", type=int, default=0)
    p.add_argument("--file-bytes", type=int, default=100 * 1024)
    args = p.parse_args()
    asyncio.run(bench(args.turns, args.result_bytes, args.rounds, args.rewrites, args.file_bytes))


if __name__ == "__main__":
    main()
