"""What a worktree per session costs: making one on a large repository, and several sessions
each in its own worktree running a turn with a command at once.

    python tests/bench/bench_worktrees.py [--files 10000] [--rounds 7] [--sessions 8]

In-process (the services over a store in a temporary folder, a scripted model, approvals
answered at once). Prints:

- the repository: ``--files`` committed files (as ``bench_changes.py`` makes them);
- ``session/open`` with ``worktree: true`` on it: the median, min and max of ``--rounds``
  opens (each makes a new worktree and branch and checks the files out), and
  ``git worktree add`` alone on the same repository for scale;
- ``--sessions`` sessions, each opened with its own worktree, each running one turn whose
  model runs a command (``sh -c``: writes a file and lists the tree) and then answers, all at
  once: the wall time from the first turn started to the last ended, against one such turn
  alone. Each turn's command is recorded (work-tree snapshots before and after it), as in any
  turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.bench.bench_changes import make_repo, ms  # noqa: E402
from tests.fixtures.fake_services import Editor  # noqa: E402
from tests.fixtures.git_repo import git  # noqa: E402
from trellisd import services  # noqa: E402
from trellisd.config import ProviderSettings  # noqa: E402
from trellisd.providers.base import (  # noqa: E402
    ModelRequest,
    ProviderEvent,
    Stop,
    TextDelta,
    ToolCallRequested,
)
from trellisd.records import ToolCall  # noqa: E402
from trellisd.services import Services  # noqa: E402
from trellisd.services.turns import TurnRequest  # noqa: E402
from trellisd.vocabulary import Decision, Outcome  # noqa: E402

COMMAND = ["/bin/sh", "-c", "echo done > out.txt && ls -R . > listing.txt"]


class CommandThenDone:
    """A model that runs ``COMMAND`` in its first step and answers once it has the result,
    whichever session asks: several turns may ask at once."""

    name = "bench"
    model = "bench-model"

    async def aclose(self) -> None:
        pass

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        if request.messages and request.messages[-1].role == "tool":
            yield TextDelta("Done.")
            yield Stop("stop")
            return
        yield ToolCallRequested(ToolCall("call-1", "run_command", {"argv": COMMAND}))
        yield Stop("tool_calls")


async def started(folder: Path) -> tuple[Services, Editor]:
    editor = Editor()
    editor.decisions = [Decision.ALLOW] * 1000
    model = CommandThenDone()
    app = await services.start(
        folder / "store" / "trellisd.db", ProviderSettings(name="openai"), editor, lambda s: model
    )
    return app, editor


async def creation(app: Services, root: Path, rounds: int) -> None:
    times: list[float] = []
    for _ in range(rounds):
        t = time.perf_counter()
        await app.sessions.open(str(root), None, None, None, worktree=True)
        times.append(time.perf_counter() - t)
    print(
        f"session/open with a worktree: median {ms(statistics.median(times))}"
        f" (min {ms(min(times))}, max {ms(max(times))}, {rounds} opens)"
    )
    plain: list[float] = []
    for i in range(3):
        t = time.perf_counter()
        git(root, "worktree", "add", "-q", "-b", f"plain-{i}", str(root.parent / f"plain-{i}"))
        plain.append(time.perf_counter() - t)
    print(f"git worktree add alone: median {ms(statistics.median(plain))}")


async def one_turn(app: Services, session_id: str) -> float:
    t = time.perf_counter()
    result = await app.turns.turn(TurnRequest(session_id, "run the command"))
    assert result.outcome == Outcome.FINISHED, result
    return time.perf_counter() - t


async def parallel(app: Services, root: Path, sessions: int) -> None:
    alone = await app.sessions.open(str(root), None, None, None, worktree=True)
    single = await one_turn(app, alone.session_id)
    opened = [
        await app.sessions.open(str(root), None, None, None, worktree=True) for _ in range(sessions)
    ]
    t = time.perf_counter()
    each = await asyncio.gather(*(one_turn(app, s.session_id) for s in opened))
    wall = time.perf_counter() - t
    for session in opened:
        assert (Path(session.root) / "out.txt").read_text() == "done\n"
    print(f"one turn with a command, alone: {ms(single)}")
    print(
        f"{sessions} sessions, each in its own worktree, a turn with a command each at once:"
        f" {ms(wall)} wall (each turn {ms(min(each))} to {ms(max(each))})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        root = folder / "repo"
        t = time.perf_counter()
        make_repo(root, args.files)
        print(f"repository: {args.files} files committed in {time.perf_counter() - t:.1f} s")
        app, _ = await started(folder)
        try:
            await creation(app, root, args.rounds)
            await parallel(app, root, args.sessions)
        finally:
            await app.close()


if __name__ == "__main__":
    asyncio.run(main())
