"""What change sets cost: the overhead a turn pays to record what its command changed in a
large git repository, and how the store grows when turns keep rewriting one file.

    python tests/bench/bench_changes.py [--files 10000] [--rounds 15] [--turns 100]
        [--size 102400]

Prints:

- the overhead per turn of one ``run_command`` that changes one file, in a git repository of
  ``--files`` committed files: the time ``Watch`` adds to the turn, as the median, min and
  max of ``--rounds`` turns after the first, and the first turn alone (the private index is
  copied from the user's). It is measured whole: the snapshot of the work tree before the
  command, which the command waits for, and the snapshot after it, the diff of the two trees,
  reading the changed blobs and recording them, which in a turn go on while the model is
  asked its next step (``settle`` waits for them here). How much of it the command waits
  for is printed apart;
- the same for one ``write_file`` (the file read before and after, and recorded);
- for scale on the machine at hand, the median time of ``git status --porcelain`` there;
- the store's growth for ``--turns`` turns that each rewrite one ``--size``-byte text file
  (a few lines changed each time) with ``write_file``: the stored texts and the database file,
  against the raw bytes written and against each version compressed on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.fixtures.git_repo import git  # noqa: E402
from trellisd.processes import pid_alive  # noqa: E402
from trellisd.records import ProviderChoice, TurnRef  # noqa: E402
from trellisd.services.changes import Trees, Watch  # noqa: E402
from trellisd.store.facade import AsyncStore  # noqa: E402
from trellisd.tools import ToolContext  # noqa: E402
from trellisd.tools.base import Action  # noqa: E402
from trellisd.tools.edit import atomic_write  # noqa: E402

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()


def make_repo(root: Path, files: int) -> None:
    """``files`` files, an hour old (as a checkout's are: files written in the same second as
    an index are "racily clean", and git reads them again on every snapshot)."""
    root.mkdir()
    hour_ago = time.time() - 3600
    for i in range(files):
        folder = root / f"pkg{i % 100:02d}"
        folder.mkdir(exist_ok=True)
        path = folder / f"mod{i:05d}.py"
        path.write_text(f"VALUE = {i}\n\ndef f():\n    return VALUE\n")
        os.utime(path, (hour_ago, hour_ago))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "files")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def start(folder: Path, root: Path) -> tuple[AsyncStore, TurnRef]:
    store = await AsyncStore.open(folder / "store" / "trellisd.db", pid_alive)
    await store.leases.register()
    session = await store.sessions.create(str(root), "bench", ProviderChoice(), None)
    return store, TurnRef(session.session_id, "", "")


async def new_turn(store: AsyncStore, session_id: str) -> TurnRef:
    turn_id, run_id, _ = await store.runs.begin(session_id, "change one file", None)
    await store.runs.finish(run_id, "finished", None)
    return TurnRef(session_id, turn_id, run_id)


async def overhead(folder: Path, files: int, rounds: int) -> None:
    root = folder / "repo"
    t = time.perf_counter()
    make_repo(root, files)
    print(f"repository: {files} files committed in {time.perf_counter() - t:.1f} s")
    store, session = await start(folder, root)
    context = ToolContext(root)
    target = root / "pkg00" / "mod00000.py"
    for label, action in (
        ("run_command", Action("exec", "python change.py")),
        ("write_file", Action("write", "pkg00/mod00000.py")),
    ):
        times: list[float] = []
        waits: list[float] = []
        trees = Trees(folder / "store" / "git")
        for n in range(rounds + 1):
            ref = await new_turn(store, session.session_id)
            watch = Watch(store, ref, context, trees)
            content = f"VALUE = {n}  # {label}\n".encode()
            t = time.perf_counter()
            async with watch.around(action, 1):
                u = time.perf_counter()
                atomic_write(target, content, context)
                work = time.perf_counter() - u
            waits.append(time.perf_counter() - t - work)
            await watch.settle()
            times.append(time.perf_counter() - t - work)
            recorded = await store.changes.of_turns([ref.turn_id])
            assert [c.path for c in recorded] == ["pkg00/mod00000.py"], recorded
        rest = times[1:]
        print(
            f"overhead per turn, one {label} changing one file of {files}: median"
            f" {ms(statistics.median(rest))} (min {ms(min(rest))}, max {ms(max(rest))};"
            f" {rounds} turns); first turn {ms(times[0])}; of it the tool call waits for"
            f" {ms(statistics.median(waits[1:]))} (median)"
        )
    statuses = []
    for _ in range(rounds):
        t = time.perf_counter()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, check=True
        )
        statuses.append(time.perf_counter() - t)
    print(
        f"for scale, git status --porcelain on the same repository: median"
        f" {ms(statistics.median(statuses))}; it shows {status.stdout.decode().strip()!r}"
    )
    await store.close()


def text(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    lines, total = [], 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(10)) + f" {rng.randrange(10**6)}\n"
        lines.append(line)
        total += len(line)
    return lines


async def growth(folder: Path, turns: int, size: int) -> None:
    root = folder / "plain"
    root.mkdir()
    store, session = await start(folder, root)
    db = folder / "store" / "trellisd.db"
    await store._thread(store._store.db.con.wal_checkpoint, None, 2)  # type: ignore[attr-defined]
    db_before = db.stat().st_size
    context = ToolContext(root)
    lines = text(size, 1)
    rng = random.Random(2)
    raw = alone = 0
    for n in range(turns):
        for _ in range(3):
            lines[rng.randrange(len(lines))] = f"turn {n} changed this line {rng.random()}\n"
        data = "".join(lines).encode()
        raw += len(data)
        alone += len(zlib.compress(data, 6))
        ref = await new_turn(store, session.session_id)
        watch = Watch(store, ref, context, Trees(folder / "store" / "git"))
        async with watch.around(Action("write", "big.txt"), 1):
            atomic_write(root / "big.txt", data, context)
    stored = await store._thread(store._store.changes.stored_bytes)  # type: ignore[attr-defined]
    await store._thread(store._store.db.con.wal_checkpoint, None, 2)  # type: ignore[attr-defined]
    grown = db.stat().st_size - db_before
    print(
        f"store growth, {turns} turns each rewriting one {size // 1024} KiB file (3 lines"
        f" changed): stored texts {stored / 1024:.1f} KiB, database file +{grown / 1024:.1f} KiB;"
        f" raw {raw / 1024:.0f} KiB, each version compressed alone {alone / 1024:.0f} KiB"
    )
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--size", type=int, default=100 * 1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(overhead(Path(tmp), args.files, args.rounds))
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(growth(Path(tmp), args.turns, args.size))


if __name__ == "__main__":
    main()
