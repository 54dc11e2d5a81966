"""What the walls cost a command: ``true`` run through ``execute`` (as ``run_command`` runs
it) inside the default walls (``workspace-write``, no network) against unconfined, and the
same for ``pytest --collect-only`` over a project of ``--files`` test files.

    python tests/bench/bench_sandbox.py [--rounds 21] [--files 1000]

Prints the median of ``--rounds`` runs of each (wall clock, milliseconds) and the difference;
the goal is under 20 ms more for ``true``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from trellisd.sandbox.walls import Walls  # noqa: E402
from trellisd.tools.command import execute  # noqa: E402


async def median_ms(argv: list[str], root: Path, walls: Walls | None, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        done = await execute(argv, root, 600, walls=walls)
        times.append((time.perf_counter() - start) * 1000)
        if done.exit_code != 0:
            raise SystemExit(f"{argv[0]} failed: {done.output[-500:]}")
    return statistics.median(times)


def project(root: Path, files: int) -> None:
    tests = root / "tests"
    tests.mkdir()
    for n in range(files):
        (tests / f"test_m{n}.py").write_text(f"def test_{n}():\n    assert {n} == {n}\n")


async def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--rounds", type=int, default=21)
    options.add_argument("--files", type=int, default=1000)
    args = options.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        root = Path(folder)
        walls = Walls("workspace-write", False, root)
        await median_ms(["true"], root, walls, 1)  # the first builds and checks the walls
        plain = await median_ms(["true"], root, None, args.rounds)
        walled = await median_ms(["true"], root, walls, args.rounds)
        print(f"true: unconfined {plain:.1f} ms, walled {walled:.1f} ms, +{walled - plain:.1f} ms")
        project(root, args.files)
        collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        rounds = max(3, args.rounds // 4)
        plain = await median_ms(collect, root, None, rounds)
        walled = await median_ms(collect, root, walls, rounds)
        print(
            f"pytest --collect-only, {args.files} files: unconfined {plain:.0f} ms,"
            f" walled {walled:.0f} ms, +{walled - plain:.0f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
