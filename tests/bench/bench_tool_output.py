"""How a running command's output reaches the editor: one ``run_command`` that prints many
small lines, each flushed (the worst case: one pipe read per line), through the same
``OutputFeed`` the daemon uses, counting the ``session/toolOutput`` pieces it would send.

    python tests/bench/bench_tool_output.py [--lines 200000]

Prints: the pipe reads, the pieces sent (coalesced every 50 ms or 4 KiB, capped at 32 KiB a
call), the bytes sent, and the command's run time with and without the feed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from trellisd.agent.activity import OutputFeed  # noqa: E402
from trellisd.tools.command import execute  # noqa: E402


async def main(lines: int) -> None:
    program = f"import sys\nfor i in range({lines}):\n    print(f'line {{i}}', flush=True)\n"
    argv = [sys.executable, "-c", program]
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        await execute(argv, Path(folder), 600)
        bare = time.perf_counter() - began

        reads = 0
        pieces: list[str] = []
        feed = OutputFeed(pieces.append)

        def listen(data: bytes) -> None:
            nonlocal reads
            reads += 1
            feed.add(data)

        began = time.perf_counter()
        await execute(argv, Path(folder), 600, listen)
        feed.close()
        fed = time.perf_counter() - began
    print(f"lines printed: {lines}")
    print(f"pipe reads: {reads}")
    print(f"toolOutput pieces: {len(pieces)}")
    print(f"bytes sent live: {sum(len(p.encode()) for p in pieces)}")
    print(f"run time without the feed: {bare:.3f} s")
    print(f"run time with the feed: {fed:.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=200_000)
    asyncio.run(main(parser.parse_args().lines))
