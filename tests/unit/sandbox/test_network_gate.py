"""The network gate lets a sandboxed program reach the targets it allows and nothing else.

Real sockets: HTTP servers on 127.0.0.1 that the tests start, clients on the gate's unix
socket, and a real ``bwrap --unshare-net`` running the relay and curl."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from trellisd.sandbox.network import (
    Allowed,
    NetworkGate,
    Resolve,
    Target,
    parse_allowed,
    proxy_env,
    relay_prefix,
)


class Upstream:
    """An HTTP server on 127.0.0.1 that answers each request with the request line it got,
    and counts the connections it accepted."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> Upstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            writer.close()
            return
        if head.startswith(b"ECHO"):  # a tunnel's client: everything until its end of file
            body = head + await reader.read()
        else:
            body = b"upstream got " + head.split(b"\r\n")[0]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()


@pytest_asyncio.fixture
async def allowed() -> AsyncIterator[Upstream]:
    server = await Upstream().start()
    yield server
    await server.close()


@pytest_asyncio.fixture
async def refused() -> AsyncIterator[Upstream]:
    server = await Upstream().start()
    yield server
    await server.close()


async def ask(gate: NetworkGate, request: bytes) -> bytes:
    """Send ``request`` on the gate's socket; everything it answers until it closes."""
    reader, writer = await asyncio.open_unix_connection(gate.socket_path)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


def test_an_entry_names_a_host_and_a_port() -> None:
    assert parse_allowed("API.Example.com:443") == Allowed("api.example.com", 443)
    assert parse_allowed("*.example.com:443") == Allowed("example.com", 443, wildcard=True)
    assert parse_allowed("[::1]:8080") == Allowed("::1", 8080)
    assert parse_allowed("Bücher.example:443") == Allowed("xn--bcher-kva.example", 443)
    assert str(parse_allowed("[::1]:8080")) == "[::1]:8080"
    wildcard = parse_allowed("*.example.com:443")
    assert wildcard.admits(Target("a.b.example.com", 443))
    assert not wildcard.admits(Target("example.com", 443))
    assert not wildcard.admits(Target("badexample.com", 443))
    assert not wildcard.admits(Target("a.example.com", 80))
    assert not parse_allowed("*.0.0.1:80").admits(Target("127.0.0.1", 80))


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("example.com", "has no port: write host:port"),
        ("::1", "has no port"),
        ("[::1]", "has no port"),
        ("example.com:0", "no valid port"),
        ("example.com:https", "no valid port"),
        ("a.*.example.com:443", "a wildcard stands only first"),
        ("*.10.0.0.1:443", "a wildcard names a domain"),
        ("exa mple.com:80", "is not a host name"),
    ],
)
def test_an_entry_without_a_port_or_with_a_bad_one_is_refused(entry: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_allowed(entry)
    with pytest.raises(ValueError, match=says):
        NetworkGate([entry], Path("/unused"))


def test_the_program_is_pointed_at_the_relay_and_keeps_its_own_loopback() -> None:
    env = proxy_env(3128)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        assert env[name] == "http://127.0.0.1:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1"
    assert relay_prefix("/run/net.sock", 3128) == [
        sys.executable,
        "-P",
        "-m",
        "trellisd.sandbox.relay",
        "--unix",
        "/run/net.sock",
        "--port",
        "3128",
        "--",
    ]


async def test_an_allowed_target_answers_and_a_refused_one_is_never_reached(
    tmp_path: Path, allowed: Upstream, refused: Upstream
) -> None:
    async with NetworkGate([f"127.0.0.1:{allowed.port}"], tmp_path / "gate") as gate:
        answer = await ask(
            gate,
            b"GET http://127.0.0.1:%d/status?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Proxy-Connection: keep-alive\r\n\r\n" % allowed.port,
        )
        assert answer.startswith(b"HTTP/1.1 200 OK")
        assert answer.endswith(b"upstream got GET /status?x=1 HTTP/1.1")

        answer = await ask(
            gate, b"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % refused.port
        )
        assert answer.startswith(b"HTTP/1.1 403 Forbidden")
        assert answer.endswith(b"127.0.0.1:%d is not an allowed network target\n" % refused.port)

        answer = await ask(gate, b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % refused.port)
        assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert (allowed.connections, refused.connections) == (1, 0)


async def test_a_tunnel_carries_bytes_both_ways_and_passes_a_half_close_on(
    tmp_path: Path, allowed: Upstream
) -> None:
    async with NetworkGate([f"LOCALHOST:{allowed.port}"], tmp_path) as gate:
        reader, writer = await asyncio.open_unix_connection(gate.socket_path)
        writer.write(b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % allowed.port)
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
        writer.write(b"ECHO\r\n\r\nsome bytes, then the end of them")
        writer.write_eof()  # the server answers only once this end of file reaches it
        answer = await reader.read()
        writer.close()
    assert answer.endswith(b"ECHO\r\n\r\nsome bytes, then the end of them")


async def test_a_name_that_leads_back_to_this_machine_is_refused(
    tmp_path: Path, allowed: Upstream
) -> None:
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return {"rebound.example": ["::ffff:127.0.0.1"], "meta.example": ["169.254.169.254"]}[host]

    rebinding: Resolve = resolve
    entries = [f"rebound.example:{allowed.port}", "*.example:80"]
    async with NetworkGate(entries, tmp_path, resolve=rebinding) as gate:
        answer = await ask(gate, b"CONNECT rebound.example:%d HTTP/1.1\r\n\r\n" % allowed.port)
        assert b"403 Forbidden" in answer
        assert answer.endswith(
            b"rebound.example resolves to ::ffff:127.0.0.1, an address of "
            b"this machine or its link\n"
        )
        answer = await ask(gate, b"GET http://meta.example/latest HTTP/1.1\r\n\r\n")
        assert b"403 Forbidden" in answer
    assert asked == ["rebound.example", "meta.example"]
    assert allowed.connections == 0


async def test_a_header_flood_is_cut_off_at_the_bound(tmp_path: Path) -> None:
    async with NetworkGate(["example.com:80"], tmp_path, max_header_bytes=4096) as gate:
        reader, writer = await asyncio.open_unix_connection(gate.socket_path)
        writer.write(b"GET http://example.com/ HTTP/1.1\r\nX-Flood: " + b"a" * 64 * 1024)
        answer = await reader.read()
        writer.close()
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
    assert answer.endswith(b"request header over 4096 bytes\n")


async def test_connections_beyond_the_bound_are_turned_away(tmp_path: Path) -> None:
    async with NetworkGate(["example.com:80"], tmp_path, max_connections=2) as gate:
        held = [await asyncio.open_unix_connection(gate.socket_path) for _ in range(2)]
        for _, writer in held:
            writer.write(b"GET http://exa")  # an unfinished header keeps each one waiting
        answer = await ask(gate, b"GET http://example.com/ HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")
        assert answer.endswith(b"more than 2 connections at once\n")
    for reader, writer in held:  # the gate closed them on its way out
        assert await reader.read() == b""
        writer.close()


async def test_bad_requests_get_a_reason(tmp_path: Path) -> None:
    async with NetworkGate(["example.com:80"], tmp_path) as gate:
        for request, says in [
            (b"GET / HTTP/1.1\r\n\r\n", b"send CONNECT host:port, or an absolute http:// URL"),
            (b"CONNECT example.com HTTP/1.1\r\n\r\n", b"'example.com' is not host:port"),
            (b"hello\r\n\r\n", b"not an HTTP/1 request line"),
            (
                b"GET http://example.com:0/ HTTP/1.1\r\n\r\n",
                b"has no valid port: write a number from 1 to 65535",
            ),
        ]:
            answer = await ask(gate, request)
            assert answer.startswith(b"HTTP/1.1 400 Bad Request")
            assert answer.endswith(says + b"\n")


async def test_the_socket_is_private_and_gone_after(tmp_path: Path) -> None:
    folder = tmp_path / "new"
    async with NetworkGate([], folder) as gate:
        assert gate.socket_path == folder / "net.sock"
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(gate.socket_path.stat().st_mode)
        assert stat.S_IMODE(gate.socket_path.stat().st_mode) == 0o600
    assert not gate.socket_path.exists()


BWRAP = shutil.which("bwrap")
PROXY = ("--noproxy", "", "-x", "http://127.0.0.1:3128")


@pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed")
async def test_curl_inside_the_walls_reaches_only_what_the_gate_allows(
    tmp_path: Path, allowed: Upstream, refused: Upstream
) -> None:
    async def curl(*args: str) -> tuple[int, str]:
        """curl in the walls with the proxy variables the program gets; loopback names go
        to the walls' own loopback unless ``-x`` names the relay."""
        walls = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        walls += ["--unshare-net", "--die-with-parent", "--"]
        done = await asyncio.create_subprocess_exec(
            *walls,
            *relay_prefix(str(gate.socket_path), 3128),
            *["curl", "-sS", *args],
            stdout=asyncio.subprocess.PIPE,
            env={"PATH": os.environ["PATH"], **proxy_env(3128)},
        )
        out, _ = await done.communicate()
        return await done.wait(), out.decode()

    entries = [f"127.0.0.1:{allowed.port}", f"localhost:{allowed.port}"]
    async with NetworkGate(entries, tmp_path) as gate:
        # The variables alone send it to the gate, which refuses and resolves nothing.
        code, out = await curl("-w", "%{http_code}", "http://example.invalid/")
        assert out == "example.invalid:80 is not an allowed network target\n403"
        code, out = await curl("-w", "%{http_code}", f"http://127.0.0.1:{allowed.port}/")
        assert code == 7  # its own loopback, where nothing listens: NO_PROXY kept it there
        code, out = await curl(*PROXY, f"http://127.0.0.1:{allowed.port}/inside")
        assert (code, out) == (0, "upstream got GET /inside HTTP/1.1")
        # The name is resolved by the gate: the walls have no DNS.
        code, out = await curl(*PROXY, "-p", f"http://localhost:{allowed.port}/tunnel")
        assert (code, out) == (0, "upstream got GET /tunnel HTTP/1.1")
        code, out = await curl(*PROXY, "-w", "%{http_code}", f"http://127.0.0.1:{refused.port}/")
        assert out.endswith("is not an allowed network target\n403")
        code, out = await curl(*PROXY, "-p", f"http://127.0.0.1:{refused.port}/")
        assert code != 0  # curl: CONNECT tunnel failed, response 403
    assert (allowed.connections, refused.connections) == (2, 0)
