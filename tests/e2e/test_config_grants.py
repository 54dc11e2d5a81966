"""The config file and the daemon's process: a broken file stops the daemon (standalone and
shared) in one line, ``trellisd config`` says where each setting came from, and a grant holds
in every window of the shared daemon."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import TEST_KEY, Windows
from tests.fixtures.driver import answer_approvals, open_session, turn, write
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET

BROKEN = 'provider = "openai"\nmodel = "m"\nmaxRetries = "many"\n'


def write_config(home: Path, text: str, mode: int = 0o600) -> Path:
    path = home / ".config" / "trellisd" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def trellisd(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trellisd", *args],
        env=hermetic_env(home, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )


def test_a_broken_config_file_stops_the_daemon_in_one_line(tmp_path: Path, runtime: Path) -> None:
    home = tmp_path / "home"
    path = write_config(home, BROKEN)
    expected = f"trellisd: {path}:3: maxRetries must be a whole number, not a string"
    standalone = trellisd(home, "--db", str(tmp_path / "a.db"))
    assert standalone.returncode == 2
    assert standalone.stderr.splitlines() == [expected]
    shared = trellisd(
        home, "--db", str(tmp_path / "b.db"), TRELLISD_SHARED="1", XDG_RUNTIME_DIR=str(runtime)
    )
    assert shared.returncode == 2
    assert shared.stderr.splitlines() == [expected]
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()


def test_a_window_is_refused_once_the_file_breaks_under_a_running_shared_daemon(
    tmp_path: Path, runtime: Path
) -> None:
    home, db = tmp_path / "home", tmp_path / "s.db"
    path = write_config(home, 'model = "m"\n')
    shared = {"TRELLISD_SHARED": "1", "XDG_RUNTIME_DIR": str(runtime)}
    first = trellisd(home, "--db", str(db), **shared)  # starts the daemon; input ends at once
    assert first.returncode == 1, first.stderr
    try:
        path.write_text(BROKEN)
        refused = trellisd(home, "--db", str(db), **shared)
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            f"trellisd: {path}:3: maxRetries must be a whole number, not a string"
        ]
    finally:
        stopped = trellisd(home, "stop", "--db", str(db), XDG_RUNTIME_DIR=str(runtime))
        assert "it has exited" in stopped.stdout


def test_trellisd_config_prints_each_setting_with_its_source_and_no_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write_config(
        home,
        'provider = "openai"\nmodel = "file-model"\nkeyVariable = "WORK_KEY"\n'
        '[[mcp]]\nname = "files"\ncommand = "npx"\n',
    )
    done = trellisd(home, "config", WORK_KEY=TEST_KEY, TRELLISD_MODEL="env-model")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert rows["config"].endswith(str(path))
    assert "env-model" in rows["model"] and rows["model"].endswith("environment TRELLISD_MODEL")
    assert rows["provider"].endswith(f"config file {path}")
    assert "(set, not shown)" in rows["apiKey"] and "WORK_KEY (named by" in rows["apiKey"]
    assert rows["readTimeout"].endswith("built-in default") and "files" in rows["mcp"]
    assert TEST_KEY not in done.stdout + done.stderr
    broken = write_config(home, BROKEN)
    refused = trellisd(home, "config")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"trellisd: {broken}:3: maxRetries must be a whole number, not a string"
    ]


async def test_a_grant_holds_in_every_window_of_the_shared_daemon(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    answer_approvals(a, ["allowAlways"])
    asked_b = answer_approvals(b, ["deny"])
    session = await open_session(a, workspace)
    model.reply("", tool_calls=[write("a.txt", "1")])
    model.reply("done")
    await turn(a, session, "write a")
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    model.reply("", tool_calls=[write("a.txt", "2")])
    model.reply("done")
    await turn(b, session, "write a again")
    assert asked_b == [] and (workspace / "a.txt").read_text() == "2"
    seen = await b.call("session/policy", {"sessionId": session["sessionId"]})
    assert seen["grants"] == [{"kind": "write", "target": "a.txt", "scope": "session"}]
