"""One private loopback per session, with real programs that try to get out: a server one
program of a session started is reached by the session's next command, and by no one else (not
another session, not the host); the host's loopback is out of reach from inside; the allowed
hosts' relay serves two programs of a session at once; and the session's end leaves no process
of its network behind."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.driver import Daemon, call, open_session, tool_results, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually
from tests.inprocess.test_processes import POLICY, free_port, printed, processes

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("nsenter") is None,
    reason="bwrap or nsenter is not installed",
)


SERVE = [sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1"]


def fetch(port: int) -> list[str]:
    """A command that prints what ``http://127.0.0.1:<port>/`` answers, or why it could not."""
    code = (
        "import urllib.request, sys\n"
        "try:\n"
        f"    print('got', urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=30)"
        ".read().decode())\n"
        "except OSError as e:\n"
        "    print('unreachable', e); sys.exit(3)\n"
    )
    return [sys.executable, "-c", code]


NET_NS = "import os; print(os.readlink('/proc/self/ns/net'))"


def in_network(namespace: str) -> list[int]:
    """The host's processes in the network namespace ``namespace`` (``net:[N]``)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/ns/net") == namespace:
                found.append(int(name))
        except OSError:
            continue
    return found


def host_listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class HostServer:
    """An HTTP answer on the host's loopback, which no walled program may reach."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port: int = self.listener.getsockname()[1]
        self.served = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.served += 1
                body = b"host answer"
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (len(body), body)
                )

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._thread.join()


@pytest.fixture
def host_server() -> Iterator[HostServer]:
    server = HostServer()
    yield server
    server.close()


async def test_a_session_reaches_its_own_server_and_no_one_else_does(
    daemon: Daemon, model: ModelServer, workspace: Path, host_server: HostServer
) -> None:
    (workspace / "index.html").write_text("inside the session\n")
    port = free_port()
    model.reply("", tool_calls=[call("start_process", argv=[*SERVE, str(port)])])
    model.reply("Started.")
    first = await open_session(daemon, workspace, policy=POLICY)
    said = await tool_results(daemon, (await turn(daemon, first, "serve"))["runId"])
    assert "the session's other commands reach the ports it listens on" in said[0]
    [listed] = await processes(daemon, first)
    pid = listed["processId"]
    await eventually(lambda: "Serving HTTP" in printed(daemon, pid), "the server listens")
    assert not host_listens(port)  # its port is the session's, not the host's

    # The session's next command reaches it; the host's own loopback server it does not.
    model.reply("", tool_calls=[call("run_command", argv=fetch(port))])
    model.reply("", tool_calls=[call("run_command", argv=fetch(host_server.port))])
    model.reply("Tested.")
    tested = await turn(daemon, first, "test it")
    own, host = await tool_results(daemon, tested["runId"])
    assert "exit code 0" in own and "got" in own and "inside the session" in own
    assert "unreachable" in host and "exit code 3" in host
    assert host_server.served == 0
    assert "GET / HTTP/1.1" in printed(daemon, pid)

    # Another session, over the same root and with the same walls, has a loopback of its own.
    second = await open_session(daemon, workspace, policy=POLICY)
    model.reply("", tool_calls=[call("run_command", argv=fetch(port))])
    model.reply("Tried.")
    tried = await turn(daemon, second, "reach the other session's server")
    [other] = await tool_results(daemon, tried["runId"])
    assert "unreachable" in other and "exit code 3" in other
    assert printed(daemon, pid).count("GET / HTTP/1.1") == 1


async def test_closing_or_deleting_the_session_leaves_no_process_of_its_network(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    for end in ("session/close", "session/delete"):
        session = await open_session(daemon, workspace, policy=POLICY)
        model.reply("", tool_calls=[call("start_process", argv=[sys.executable, "-c", "input()"])])
        model.reply("", tool_calls=[call("run_command", argv=[sys.executable, "-c", NET_NS])])
        model.reply("", tool_calls=[call("run_command", argv=[sys.executable, "-c", NET_NS])])
        model.reply("Ready.")
        result = await turn(daemon, session, "start one and look")
        _, one, two = await tool_results(daemon, result["runId"])
        namespace = one.split("net:[", 1)[1].split("]", 1)[0]
        assert f"net:[{namespace}]" in two  # both commands ran in the session's network
        assert os.readlink("/proc/self/ns/net") != f"net:[{namespace}]"
        assert in_network(f"net:[{namespace}]")  # the holder, and the process started

        await daemon.call(end, {"sessionId": session["sessionId"]})
        await eventually(
            lambda n=namespace: not in_network(f"net:[{n}]"),  # type: ignore[misc]
            f"no process left in the session's network after {end}",
        )


async def test_the_allowed_hosts_relay_serves_two_programs_of_a_session_at_once(
    daemon: Daemon, model: ModelServer, workspace: Path, host_server: HostServer
) -> None:
    allowed = f"127.0.0.1:{host_server.port}"
    session = await open_session(daemon, workspace, policy={**POLICY, "network": [allowed]})
    through_proxy = (
        "import os, socket, sys\n"
        "proxy = os.environ['HTTP_PROXY'].rsplit(':', 1)[1]\n"
        "s = socket.create_connection(('127.0.0.1', int(proxy)))\n"
        f"s.sendall(b'GET http://{allowed}/ HTTP/1.1\\r\\nHost: {allowed}\\r\\n\\r\\n')\n"
        "answer = b''\n"
        "while chunk := s.recv(4096):\n"
        "    answer += chunk\n"
        "print('relay', proxy, answer.split(b'\\r\\n\\r\\n', 1)[1].decode(), flush=True)\n"
    )
    waits = through_proxy + "input()\n"  # its relay stays up while the other program runs
    model.reply("", tool_calls=[call("start_process", argv=[sys.executable, "-c", waits])])
    model.reply("Started.")
    await turn(daemon, session, "fetch in the background")
    listed = await daemon.call("session/processes", {"sessionId": session["sessionId"]})
    pid = listed["processes"][0]["processId"]
    first = await eventually(lambda: "host answer" in printed(daemon, pid), "the first fetch")
    assert first

    model.reply("", tool_calls=[call("run_command", argv=[sys.executable, "-c", through_proxy])])
    model.reply("Fetched.")
    result = await turn(daemon, session, "fetch again")
    [said] = await tool_results(daemon, result["runId"])
    assert "exit code 0" in said and "host answer" in said
    again = await daemon.call("session/processes", {"sessionId": session["sessionId"]})
    assert again["processes"][0]["running"] is True  # the two ran at once
    ports = {printed(daemon, pid).split()[1], said.split("relay ", 1)[1].split()[0]}
    assert len(ports) == 2  # a relay each, on the one loopback
    assert host_server.served == 2
