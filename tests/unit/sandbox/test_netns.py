"""A session's private loopback (``sandbox.netns``), with real programs: the walled programs of
one loopback share its network and nothing else of each other's; the walls hold as they do with
a loopback of a program's own; it needs no privilege; where it cannot be had, each program gets
a loopback of its own, as before; and closing it leaves no holder behind."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fixtures.waits import alive, eventually
from tests.unit.sandbox import test_walls as walls_tests
from tests.unit.sandbox.test_walls import Place
from trellisd.sandbox.bwrap import confine
from trellisd.sandbox.doctor import examine
from trellisd.sandbox.netns import NO_NSENTER, Loopback, Loopbacks, find_nsenter
from trellisd.services.processes import ProcessService, SessionProcesses
from trellisd.tools import ToolContext
from trellisd.tools.command import execute
from trellisd.tools.processes import StartProcess

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("nsenter") is None,
    reason="bwrap or nsenter is not installed",
)

place = walls_tests.place  # the fixture: a root, a home with a secret, a store


def namespaces(*names: str) -> list[str]:
    """A command that prints its namespaces ``names`` (``net:[4026532176]`` ...)."""
    ask = f"import os; print(*(os.readlink('/proc/self/ns/' + n) for n in {names!r}))"
    return [sys.executable, "-c", ask]


@contextlib.asynccontextmanager
async def started(place: Place, argv: list[str]) -> AsyncIterator[asyncio.subprocess.Process]:
    """A program inside ``place``'s walls that runs while the block does."""
    async with confine(place.walls, argv, place.root, {"PATH": os.environ["PATH"]}) as launch:
        process = await asyncio.create_subprocess_exec(
            *launch.argv,
            env=launch.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            yield process
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.fixture
async def shared(place: Place) -> AsyncIterator[Place]:
    """``place`` with its walls over a loopback of its own, as a session's are."""
    loopback = Loopback()
    yield replace(place, walls=replace(place.walls, loopback=loopback))
    await loopback.close()


async def test_programs_share_the_loopback_and_nothing_else(shared: Place) -> None:
    ask = namespaces("net", "pid", "ipc", "user")
    waits = [*ask[:2], ask[2] + "; input()"]  # runs on, so that no namespace of it is reused
    async with started(shared, waits) as first:
        assert first.stdout is not None
        one = (await first.stdout.readline()).decode()
        two = await execute(ask, shared.root, 60, walls=shared.walls)
    assert two.exit_code == 0, two.output
    net_one, *own_one = one.split()
    net_two, *own_two = two.output.split()
    assert net_one == net_two != os.readlink("/proc/self/ns/net")
    for theirs, mine in zip(own_one, own_two, strict=True):  # pid, ipc, user: each its own
        assert theirs != mine
    assert shared.walls.loopback is not None and shared.walls.loopback.problem is None
    holder = shared.walls.loopback.pid
    assert holder is not None and os.readlink(f"/proc/{holder}/ns/net") == net_one
    alone = await execute(["ps", "-e", "-o", "comm="], shared.root, 60, walls=shared.walls)
    assert alone.output.split()[-2:] == ["bwrap", "ps"] or "cat" not in alone.output


async def test_a_server_of_one_program_is_reached_by_another(shared: Place) -> None:
    listen = textwrap.dedent(
        """
        import socket
        server = socket.create_server(("127.0.0.1", 0))
        print(server.getsockname()[1], flush=True)
        conn, _ = server.accept()
        conn.sendall(b"from the first program")
        """
    )
    assert shared.walls.loopback is not None
    async with started(shared, [sys.executable, "-c", listen]) as server:
        assert server.stdout is not None
        port = int(await server.stdout.readline())
        reach = f"import socket; print(socket.create_connection(('127.0.0.1', {port})).recv(64))"
        done = await execute([sys.executable, "-c", reach], shared.root, 60, walls=shared.walls)
        assert await server.wait() == 0
    assert "from the first program" in done.output, done.output


@pytest.mark.parametrize(
    "wall",
    [
        walls_tests.test_the_hosts_loopback_is_out_of_reach,
        walls_tests.test_secrets_are_not_even_readable,
        walls_tests.test_the_daemons_environment_is_out_of_sight,
        walls_tests.test_a_fork_bomb_stops_at_the_process_bound,
        walls_tests.test_a_local_server_of_the_programs_own_works,
        walls_tests.test_a_network_list_lets_the_program_reach_only_what_it_names,
    ],
    ids=lambda wall: wall.__name__.removeprefix("test_"),
)
async def test_the_walls_hold_in_the_sessions_network(shared: Place, wall: object) -> None:
    await wall(shared)  # type: ignore[operator]
    assert shared.walls.loopback is not None and shared.walls.loopback.pid is not None


async def test_without_nsenter_each_program_has_a_loopback_of_its_own(
    place: Place, caplog: pytest.LogCaptureFixture
) -> None:
    loopback = Loopback(find=lambda: None)
    walls = replace(place.walls, loopback=loopback)
    with caplog.at_level(logging.WARNING, logger="trellisd.sandbox.netns"):
        one = await execute(namespaces("net"), place.root, 60, walls=walls)
        two = await execute(namespaces("net"), place.root, 60, walls=walls)
    assert one.exit_code == 0 and two.exit_code == 0, (one.output, two.output)
    assert one.output.split()[0] != two.output.split()[0]
    assert loopback.problem == NO_NSENTER and loopback.pid is None
    [warned] = [r.getMessage() for r in caplog.records]  # said once
    assert NO_NSENTER in warned and "each gets one of its own" in warned


async def test_the_landlock_walls_start_no_holder(place: Place) -> None:
    loopback = Loopback()
    walls = replace(place.walls, loopback=loopback)
    try:
        async with confine(walls, ["true"], place.root, {}, find=lambda: None) as launch:
            pass
    except Exception as exc:  # no Landlock on this kernel: nothing to check
        pytest.skip(f"Landlock cannot build the walls here: {exc}")
    assert launch.via == "landlock" and loopback.pid is None


async def test_closing_stops_the_holder_and_later_programs_get_their_own(place: Place) -> None:
    loopbacks = Loopbacks()
    walls = replace(place.walls, loopback=loopbacks.of("s1"))
    first = await execute(namespaces("net"), place.root, 60, walls=walls)
    assert walls.loopback is not None
    holder = walls.loopback.pid
    assert holder is not None and alive(holder)
    net = first.output.split()[0]

    await loopbacks.close("s1")
    assert walls.loopback.pid is None
    await eventually(lambda: not alive(holder), "the holder is gone")
    after = await execute(namespaces("net"), place.root, 60, walls=walls)
    assert after.exit_code == 0 and after.output.split()[0] != net
    assert loopbacks.of("s1") is not walls.loopback  # a session opened again gets a new one


async def test_a_holder_killed_from_outside_is_replaced(shared: Place) -> None:
    loopback = shared.walls.loopback
    assert loopback is not None
    await execute(namespaces("net"), shared.root, 60, walls=shared.walls)
    holder = loopback.pid
    assert holder is not None
    os.kill(holder, 9)
    await eventually(lambda: not alive(holder), "the holder is gone")
    done = await execute(namespaces("net"), shared.root, 60, walls=shared.walls)
    assert done.exit_code == 0, done.output
    assert loopback.pid not in (None, holder)


UNPRIVILEGED = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from trellisd.sandbox.netns import Loopback
    from trellisd.sandbox.walls import Walls
    from trellisd.tools.command import execute

    async def main():
        loopback = Loopback()
        walls = Walls("workspace-write", False, Path(sys.argv[1]), loopback=loopback)
        ask = [sys.executable, "-c", "import os; print(os.readlink('/proc/self/ns/net'))"]
        one = await execute(ask, Path(sys.argv[1]), 60, walls=walls)
        two = await execute(ask, Path(sys.argv[1]), 60, walls=walls)
        print(one.output, two.output, file=sys.stderr)
        print(loopback.problem, one.exit_code, two.exit_code, one.output.split()[-1],
              two.output.split()[-1])
        await loopback.close()

    asyncio.run(main())
    """
)


SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not SYSTEM_PYTHON.exists(),
    reason="needs root to become nobody, and a Python nobody may run",
)
def test_a_user_other_than_root_shares_a_loopback(place: Place) -> None:
    place.base.chmod(0o711)
    place.root.chmod(0o777)
    site = sysconfig.get_paths()["purelib"]
    package = Path(__file__).resolve().parents[3] / "daemon"
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--bounding-set=-all"]
    done = subprocess.run(
        [*nobody, str(SYSTEM_PYTHON), "-c", UNPRIVILEGED, str(place.root)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": f"{package}:{site}"},
        cwd=place.root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    problem, one, two, net_one, net_two = done.stdout.split()
    assert (problem, one, two) == ("None", "0", "0"), done.stderr
    assert net_one == net_two != os.readlink("/proc/self/ns/net")


async def test_the_doctor_says_whether_a_session_shares_a_loopback() -> None:
    found, default_ok = await examine()
    [line] = [f for f in found if f.check == "session loopback"]
    assert default_ok and line.ok and "share a loopback" in line.said

    found, default_ok = await examine(find_nsenter=lambda: None)
    [line] = [f for f in found if f.check == "session loopback"]
    assert default_ok and not line.ok  # the default walls still hold, on loopbacks of their own
    assert line.line().startswith("no  session loopback: nsenter (util-linux) is not installed")
    assert "each walled program gets a loopback of its own" in line.said


async def test_a_bwrap_that_cannot_build_walls_in_the_shared_network_leaves_them_unshared(
    tmp_path: Path,
) -> None:
    real = shutil.which("bwrap")
    fussy = tmp_path / "bwrap"  # holds a network, but builds no walls inside one
    fussy.write_text(
        f'#!/bin/sh\ncase "$*" in *--info-fd*) exec {real} "$@";; esac\n'
        'echo "bwrap: setting up uid map: Permission denied" >&2; exit 1\n'
    )
    fussy.chmod(0o755)
    loopback = Loopback()
    assert await loopback.enter(str(fussy)) is None
    assert loopback.problem is not None and "uid map: Permission denied" in loopback.problem
    assert loopback.pid is None and await loopback.enter(str(fussy)) is None  # not tried again


class _Unheard:
    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        pass

    def process_exited(self, state: object) -> None:
        pass


@pytest.mark.parametrize("nsenter", [find_nsenter, lambda: None], ids=["shared", "unshared"])
async def test_start_process_says_who_reaches_its_ports(
    place: Place, nsenter: Callable[[], str | None]
) -> None:
    service = ProcessService(_Unheard())  # type: ignore[arg-type]
    loopback = Loopback(nsenter)
    walls = replace(place.walls, loopback=loopback)
    start = StartProcess(SessionProcesses(service, "s1", "t1"))
    try:
        answer = await start.run(
            {"argv": [sys.executable, "-c", "input()"]}, ToolContext(place.root, walls=walls)
        )
    finally:
        await service.close_all()
        await loopback.close()
    if loopback.problem is None:
        assert "the session's other commands reach the ports it listens on" in answer
    else:
        assert "other commands cannot reach the ports it listens on" in answer
    assert (loopback.problem is None) == (nsenter is find_nsenter)
