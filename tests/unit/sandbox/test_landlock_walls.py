"""Where bubblewrap cannot build the walls, Landlock builds weaker ones: real programs run
inside them on this kernel and try to get out. bwrap is made unavailable through
``confine``'s finder (none found, or one that cannot make a namespace), never by patching.

The folders live under ``/var/tmp``, as in ``test_walls``.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from trellisd.sandbox.bwrap import WallsUnavailable, builder, confine
from trellisd.sandbox.doctor import examine
from trellisd.sandbox.landlock import abi_version
from trellisd.sandbox.walls import Walls, secret_paths

ABI = abi_version()
pytestmark = pytest.mark.skipif(ABI < 1, reason="this kernel offers no Landlock")
needs_network_rules = pytest.mark.skipif(ABI < 4, reason="this Landlock cannot deny TCP")

GIT = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"


def no_bwrap() -> str | None:
    return None


@dataclass
class Ran:
    exit_code: int | None
    output: str
    via: str | None
    record: dict[str, object]
    swept: list[str]
    temp: str


@dataclass
class Place:
    base: Path
    root: Path
    home: Path
    walls: Walls
    find: Callable[[], str | None] = no_bwrap

    async def run(self, script: str, walls: Walls | None = None) -> Ran:
        return await self.run_argv(["sh", "-c", script], walls)

    async def run_argv(self, argv: list[str], walls: Walls | None = None) -> Ran:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), **GIT}
        walls = walls or self.walls
        async with confine(walls, argv, self.root, env, find=self.find) as launch:
            process = await asyncio.create_subprocess_exec(
                *launch.argv,
                cwd=self.root,
                env=launch.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await process.communicate()
            swept = launch.sweep()
        text = out.decode("utf-8", "replace")
        temp = launch.env.get("TMPDIR", "")
        return Ran(process.returncode, text, launch.via, launch.record(), swept, temp)


@pytest.fixture
def place() -> Iterator[Place]:
    base = Path(tempfile.mkdtemp(prefix="trellisd-landlock-", dir="/var/tmp"))
    try:
        root, home = base / "root", base / "home"
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / ".trellisd.toml").write_text("approval = 'ask'\n")
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text(SECRET)
        walls = Walls("workspace-write", True, root, hidden=secret_paths(home), processes=64)
        yield Place(base, root, home, walls)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_a_program_writes_the_root_and_its_own_temp_folder_only(place: Place) -> None:
    ran = await place.run(
        'echo made > made.txt && echo t > "$TMPDIR/t" && cat "$TMPDIR/t";'
        f" echo pwned > {place.base}/outside.txt; echo pwned > ../up.txt;"
        f" echo pwned > /proc/self/root{place.base}/proc.txt; echo end"
    )
    assert ran.via == "landlock" and ran.record["via"] == "landlock"
    assert (place.root / "made.txt").read_text() == "made\n"
    assert ran.output.count("Permission denied") == 3, ran.output
    assert ran.output.split()[0] == "t" and ran.output.split()[-1] == "end"
    assert sorted(os.listdir(place.base)) == ["home", "root"]
    assert ran.temp.startswith(tempfile.gettempdir()) and not os.path.exists(ran.temp)


async def test_a_named_cache_is_writable_and_its_neighbour_is_not(place: Place) -> None:
    (place.base / "cache").mkdir()
    walls = replace(place.walls, writable=(place.base / "cache",))
    ran = await place.run("echo n > ../n; echo c > ../cache/c && ls ../cache", walls)
    assert ran.output.endswith("Permission denied\nc\n"), ran.output
    assert sorted(os.listdir(place.base)) == ["cache", "home", "root"]


async def test_read_only_walls_refuse_writes_in_the_root(place: Place) -> None:
    ran = await place.run(
        'echo x > made.txt; echo t > "$TMPDIR/t" && echo temp ok',
        replace(place.walls, mode="read-only"),
    )
    assert "Permission denied" in ran.output and "temp ok" in ran.output
    assert not (place.root / "made.txt").exists()


async def test_a_secret_is_not_readable(place: Place) -> None:
    ran = await place.run(f"cat {place.home}/.ssh/id_ed25519; ls {place.home}/.ssh; echo end")
    assert SECRET not in ran.output
    assert "id_ed25519\n" not in ran.output
    assert ran.output.count("Permission denied") == 2, ran.output


async def _connect_to_the_host(place: Place, network: bool) -> tuple[Ran, bool]:
    """A program inside the walls connects to a server the test runs on the host's
    loopback: what it said, and whether a connection came."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server.setblocking(False)
        probe = f"import socket; socket.create_connection({server.getsockname()}); print('in')"
        ran = await place.run_argv(
            [sys.executable, "-c", probe], replace(place.walls, network=network)
        )
        try:
            server.accept()[0].close()
        except BlockingIOError:
            return ran, False
    return ran, True


@needs_network_rules
async def test_without_the_network_the_hosts_server_is_out_of_reach(place: Place) -> None:
    ran, came = await _connect_to_the_host(place, network=False)
    assert not came
    assert "PermissionError" in ran.output, ran.output
    assert ran.record == {"mode": "workspace-write", "network": False, "via": "landlock"}


async def test_with_the_network_on_the_hosts_server_is_reached(place: Place) -> None:
    ran, came = await _connect_to_the_host(place, network=True)
    assert came and ran.output.strip() == "in", ran.output


async def test_a_network_list_fails_closed_and_says_how_to_choose_off(place: Place) -> None:
    walls = replace(place.walls, network=("pypi.org:443",))
    with pytest.raises(WallsUnavailable) as caught:
        await place.run("echo ran > ran.txt", walls)
    said = str(caught.value)
    assert "bwrap" in said and "list of hosts" in said and '"off"' in said
    assert not (place.root / "ran.txt").exists()


async def test_a_changed_protected_path_is_put_back_and_a_new_one_taken_away(
    place: Place,
) -> None:
    quarantine = place.base / "store" / "quarantine"
    walls = replace(place.walls, quarantine=quarantine)
    config = (place.root / ".git" / "config").read_text()
    ran = await place.run(
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config"
        " && echo 'approval = \"all\"' > .trellisd.toml && mkdir .vscode && echo ok",
        walls,
    )
    assert ran.exit_code == 0, ran.output
    assert sorted(ran.swept) == [".git/config", ".trellisd.toml", ".vscode"]
    assert (place.root / ".git" / "config").read_text() == config
    assert (place.root / ".trellisd.toml").read_text() == "approval = 'ask'\n"
    assert not os.path.lexists(place.root / ".vscode")
    (moved,) = quarantine.iterdir()
    assert "fsmonitor = evil" in (moved / ".git" / "config").read_text()


async def test_git_commits_inside_and_leaves_the_protected_paths_alone(place: Place) -> None:
    ran = await place.run(
        "echo one > a.txt && git add a.txt && git commit -qm one && git log --oneline | wc -l"
    )
    assert ran.exit_code == 0, ran.output
    assert ran.output.split() == ["1"]
    assert ran.swept == []


async def test_where_bwrap_cannot_make_a_namespace_landlock_builds_the_walls(
    place: Place,
) -> None:
    broken = place.base / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    ran = await replace(place, find=lambda: str(broken)).run("echo made > made.txt")
    assert ran.via == "landlock"
    assert (place.root / "made.txt").read_text() == "made\n"


async def test_the_doctor_says_landlock_builds_the_walls_without_bwrap() -> None:
    found, default_ok = await examine(no_bwrap)
    lines = [finding.line() for finding in found]
    assert default_ok
    assert any(line.startswith("no  bubblewrap") for line in lines)
    assert any("walls built with: Landlock" in line and "loopback" in line for line in lines)


async def test_no_capability_is_left_and_the_daemons_environment_is_out_of_reach(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRELLISD_TEST_CANARY", canary := secrets.token_hex(8))
    ran = await place.run(
        f"grep -E '^Cap(Eff|Prm|Amb|Bnd):' /proc/self/status; cat /proc/{os.getpid()}/environ"
    )
    assert canary not in ran.output
    assert "Permission denied" in ran.output, ran.output
    capabilities = dict(line.split(":\t") for line in ran.output.splitlines()[:4])
    assert capabilities["CapEff"] == capabilities["CapPrm"] == capabilities["CapAmb"] == "0" * 16
    if os.geteuid() == 0:
        assert capabilities["CapBnd"] == "0" * 16


async def test_a_root_inside_a_hidden_folder_is_writable_and_the_rest_stays_hidden(
    place: Place,
) -> None:
    store = place.base / "store"
    (store / "worktrees" / "w").mkdir(parents=True)
    (store / "trellisd.db").write_text("the store")
    inner = replace(place.walls, root=store / "worktrees" / "w", hidden=(store,))
    ran = await replace(place, root=inner.root, walls=inner).run(
        "echo made > made.txt && cat ../../trellisd.db; echo end"
    )
    assert (inner.root / "made.txt").read_text() == "made\n"
    assert "the store" not in ran.output and "Permission denied" in ran.output, ran.output


async def test_what_builds_the_walls_is_known_before_a_program_starts(place: Place) -> None:
    assert await builder(place.walls, no_bwrap) == "landlock"
    assert await builder(replace(place.walls, mode="off"), no_bwrap) is None
    with pytest.raises(WallsUnavailable):
        await builder(replace(place.walls, network=("pypi.org:443",)), no_bwrap)
    ran = await place.run("true")
    assert ran.record == {**place.walls.record(), "via": "landlock"}
