"""``trellisd demo`` as a newcomer runs it: offline, it shows the product (a tool call, an
approval, a file written, a steer, a cancel, a branch, a reopen in a new process, a cost), every
claim holds, and it leaves nothing behind in the temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trellisd.demo import STEER


def run_demo(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRELLISD_")}
    env.update(TMPDIR=str(tmp), **extra)
    return subprocess.run(
        [sys.executable, "-m", "trellisd", "demo", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_tour_shows_the_product_and_cleans_up(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_demo(scratch)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "FAIL" not in out and out.rstrip().endswith("all claims held")
    assert '[step 1: read_file {"path": "hello.py"}]' in out
    assert "[approval asked: edit_file wants to write hello.py]" in out
    assert f"[steer: {STEER}]" in out and "[the steer joined step 2]" in out
    assert 'hello.py now reads:\n  print("hello, world")' in out
    assert "[approval asked: run_command wants to exec python3 hello.py]" in out
    assert "[the daemon withdrew its approval question]" in out
    assert "[cancelled;" in out
    assert "branching back to the first turn" in out
    assert "the session's tree:" in out
    cost = next(line for line in out.splitlines() if line.startswith("cost:"))
    assert "4 turns" in cost and "$0.00" in cost
    pids = [line.rsplit(" ", 1)[1] for line in out.splitlines() if line.startswith("daemon:")]
    assert len(pids) == 2 and pids[0] != pids[1]  # the reopen is another process
    assert list(scratch.iterdir()) == []


def test_a_configured_provider_does_not_make_the_tour_go_online(tmp_path: Path) -> None:
    done = run_demo(
        tmp_path,
        TRELLISD_PROVIDER="openai",
        TRELLISD_BASE_URL="http://127.0.0.1:9/v1",
        OPENAI_API_KEY="sk-not-used",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the built-in scripted model" in done.stdout


def test_a_store_given_with_db_is_kept(tmp_path: Path) -> None:
    store = tmp_path / "kept" / "demo.db"
    done = run_demo(tmp_path, "--db", str(store))
    assert done.returncode == 0, done.stdout + done.stderr
    assert store.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
