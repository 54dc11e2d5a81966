"""The Landlock walls hold for a real program: it writes only where it may, cannot read what
is hidden, and with the network denied cannot reach a server the test runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trellisd.sandbox.landlock import READ, abi_version, grants, landlock_prefix

ABI = abi_version()
needs_landlock = pytest.mark.skipif(ABI < 1, reason="this kernel offers no Landlock")

# Tries each thing named on its command line and prints what became of it, one line each.
ATTEMPTS = """
import os, socket, sys
for attempt in sys.argv[1:]:
    what, _, where = attempt.partition(" ")
    try:
        if what == "write":
            with open(where, "w") as f:
                f.write("x")
        elif what == "read":
            with open(where) as f:
                f.read()
        elif what == "list":
            os.listdir(where)
        elif what == "connect":
            socket.create_connection(("127.0.0.1", int(where))).close()
        elif what == "unix":
            socket.socket(socket.AF_UNIX).connect(where.replace("@", "\\0"))
        elif what == "signal":
            os.kill(int(where), 0)
        print(attempt, "ok")
    except OSError as error:
        print(attempt, type(error).__name__)
"""


def walled(
    attempts: list[str], hidden: list[Path], writable: list[Path], network: bool = True
) -> list[str]:
    prefix = landlock_prefix(hidden, writable, network)
    done = subprocess.run(
        [*prefix, sys.executable, "-c", ATTEMPTS, *attempts], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for folder in ("inside", "outside", "secret"):
        (tmp_path / folder).mkdir()
    (tmp_path / "secret" / "id_ed25519").write_text("a key")
    (tmp_path / "outside" / "notes").write_text("readable")
    (tmp_path / "inside" / "link").symlink_to(tmp_path / "outside")
    return tmp_path


@needs_landlock
def test_a_program_writes_inside_only_and_cannot_read_what_is_hidden(tree: Path) -> None:
    attempts = [
        f"write {tree}/inside/made",
        f"write {tree}/inside/../outside/made",
        f"write {tree}/outside/made",
        f"write {tree}/inside/link/made",  # a link planted inside that leads out
        f"write /proc/self/root{tree}/outside/made",
        f"read {tree}/outside/notes",
        f"read {tree}/secret/id_ed25519",
        f"list {tree}/secret",
        f"read /proc/self/root{tree}/secret/id_ed25519",
        "write /dev/null",
    ]
    outcomes = walled(attempts, hidden=[tree / "secret"], writable=[tree / "inside"])
    assert outcomes == [
        f"write {tree}/inside/made ok",
        f"write {tree}/inside/../outside/made PermissionError",
        f"write {tree}/outside/made PermissionError",
        f"write {tree}/inside/link/made PermissionError",
        f"write /proc/self/root{tree}/outside/made PermissionError",
        f"read {tree}/outside/notes ok",
        f"read {tree}/secret/id_ed25519 PermissionError",
        f"list {tree}/secret PermissionError",
        f"read /proc/self/root{tree}/secret/id_ed25519 PermissionError",
        "write /dev/null ok",
    ]
    assert (tree / "inside" / "made").read_text() == "x"
    assert not (tree / "outside" / "made").exists()


@needs_landlock
def test_a_hidden_path_inside_a_writable_folder_stays_hidden(tree: Path) -> None:
    (tree / "inside" / ".env").write_text("TOKEN=1")
    (tree / "inside" / "src").mkdir()
    attempts = [f"read {tree}/inside/.env", f"write {tree}/inside/src/made"]
    outcomes = walled(attempts, hidden=[tree / "inside" / ".env"], writable=[tree / "inside"])
    assert outcomes == [
        f"read {tree}/inside/.env PermissionError",
        f"write {tree}/inside/src/made ok",
    ]


@pytest.mark.skipif(ABI < 4, reason="this kernel's Landlock cannot deny the network")
def test_without_the_network_a_program_cannot_connect_even_to_the_loopback(
    tmp_path: Path,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert walled([f"connect {port}"], [], [tmp_path]) == [f"connect {port} ok"]
        denied = walled([f"connect {port}"], [], [tmp_path], network=False)
        assert denied == [f"connect {port} PermissionError"]


@pytest.mark.skipif(ABI < 6, reason="this kernel's Landlock cannot scope signals and sockets")
def test_a_program_cannot_signal_the_daemon_or_reach_its_abstract_sockets(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(f"\0trellisd-test-{os.getpid()}")
        listening.listen()
        attempts = [f"signal {os.getpid()}", f"unix @trellisd-test-{os.getpid()}"]
        assert walled(attempts, [], [tmp_path]) == [
            f"signal {os.getpid()} PermissionError",
            f"unix @trellisd-test-{os.getpid()} PermissionError",
        ]


@needs_landlock
def test_the_program_s_exit_status_is_its_own(tmp_path: Path) -> None:
    exited = subprocess.run([*landlock_prefix([], [tmp_path], True), "sh", "-c", "exit 3"])
    assert exited.returncode == 3
    missing = subprocess.run(
        [*landlock_prefix([], [], True), "no-such-program-here"], capture_output=True, text=True
    )
    assert missing.returncode == 127
    assert missing.stderr.startswith("trellisd landlock: cannot start no-such-program-here")


def test_a_hidden_path_is_granted_around_never_through(tree: Path) -> None:
    rules = dict(grants([tree / "secret"], []))
    assert rules[str(tree / "outside")] == READ
    assert rules[str(tree / "inside")] == READ
    # Neither the hidden folder nor any folder holding it has a rule: those cover all below.
    assert not {path for path in rules if (tree / "secret").is_relative_to(path)}
    assert "/" not in rules and str(tree) not in rules


def test_the_prefix_names_its_paths_and_refuses_relative_ones() -> None:
    prefix = landlock_prefix([Path("/h/.ssh"), Path("/h/.aws")], [Path("/w")], False)
    assert prefix == [
        sys.executable,
        "-P",
        "-m",
        "trellisd.sandbox.landlock",
        "--write",
        "/w",
        "--hide",
        "/h/.ssh",
        "/h/.aws",
        "--no-network",
        "--",
    ]
    with pytest.raises(ValueError, match="relative is not an absolute path"):
        landlock_prefix([Path("relative")], [], True)


def test_what_runs_before_every_walled_program_imports_little() -> None:
    probe = "import sys, trellisd.sandbox.landlock; print(' '.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    assert not set(loaded.split()) & {"pathlib", "typing", "enum", "signal", "asyncio"}
