"""``trellisd export`` and ``trellisd import`` as a backup script runs them: one line and
exit 0 when done, one line on stderr and exit 2 on a mistake, no daemon needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fixtures.sessions import fill_session
from tests.unit.test_cli import clean_env
from trellisd.processes import pid_alive
from trellisd.store import Store


def trellisd(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trellisd", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )


def history(db: Path, session_id: str) -> list[tuple[str, str]]:
    store = Store(db, pid_alive)
    try:
        return [(t.prompt, t.reply) for t in store.sessions.history(session_id)]
    finally:
        store.close()


def test_a_session_backed_up_and_restored_from_the_command_line(tmp_path: Path) -> None:
    sid = fill_session(tmp_path / "a.db", turns=3)

    exported = trellisd(tmp_path, "--db", "a.db", "export", sid, "backup.trellisd")
    assert exported.returncode == 0, exported.stderr
    file = tmp_path / "backup.trellisd"
    assert exported.stdout == (
        f"exported session {sid}: 3 turns, {file.stat().st_size} bytes to {file}\n"
    )
    assert exported.stderr == ""

    imported = trellisd(tmp_path, "import", "backup.trellisd", "--db", "b.db")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == f"imported session {sid} over /work\n"
    assert history(tmp_path / "b.db", sid) == history(tmp_path / "a.db", sid)

    again = trellisd(tmp_path, "--db", "b.db", "import", "backup.trellisd")
    assert again.returncode == 2
    assert again.stdout == ""
    assert again.stderr.count("\n") == 1
    assert again.stderr.startswith(f"trellisd: session {sid} is already in this store")
    assert "--as-new" in again.stderr

    copy = trellisd(
        tmp_path, "--db", "b.db", "import", "backup.trellisd", "--as-new", "--root", "."
    )
    assert copy.returncode == 0, copy.stderr
    assert copy.stdout.startswith("imported session s-")
    assert copy.stdout.endswith(f" as a copy of {sid} over {tmp_path}\n")


def test_mistakes_are_one_line_and_exit_2(tmp_path: Path) -> None:
    sid = fill_session(tmp_path / "a.db", turns=1)
    (tmp_path / "notes.txt").write_text("not a session\n")
    for args, says in [
        (("export", "s-unknown", "x.trellisd"), "unknown session s-unknown"),
        (("export", sid, "missing/x.trellisd"), "does not exist"),
        (("import", "absent.trellisd"), "there is no file at"),
        (("import", "notes.txt"), "line 1: this is not a trellisd session file"),
    ]:
        done = trellisd(tmp_path, "--db", "a.db", *args)
        assert done.returncode == 2, args
        assert done.stderr.startswith("trellisd: ") and says in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
    assert not (tmp_path / "x.trellisd").exists()
