"""The network gate: the one way out for a program whose network is its own loopback.

A program inside the walls has a loopback of its own and no DNS. The relay
(:mod:`trellisd.sandbox.relay`, started inside the walls before the program) carries each TCP
connection made to ``127.0.0.1:<port>`` to a unix socket; :class:`NetworkGate` listens on that
socket, outside the walls, and speaks HTTP proxy:

    CONNECT host:port HTTP/1.1             a tunnel: HTTPS, and any other TCP
    GET http://host:port/path HTTP/1.1     plain HTTP (any method), forwarded as one request

:func:`proxy_env` points the usual variables at the relay (the relay sets them itself to
the port the kernel gave it), so curl, pip, git, npm and the
language runtimes find it.

The gate lets through only the targets of its allowed list; anything else gets ``403`` and a
one-line reason, and the gate opens no connection to it. It resolves names itself. A name
(neither an address nor ``localhost``) that resolves to an address of this machine or its link
(loopback, unspecified, link-local such as a cloud's metadata service, multicast) is refused
as well: an allowed domain must not lead back to the host's own services. Request headers are
bounded (``max_header_bytes``), and so are the connections open at once (``max_connections``,
``503`` beyond).

Allowed entries (:func:`parse_allowed`):

    api.example.com:443     that host, case aside, on that port
    *.example.com:443       any subdomain of example.com (not example.com itself)
    127.0.0.1:8080          an address; [::1]:8080 for IPv6
    localhost:8080          the host's loopback, on purpose

An entry without a port is refused: a wall that opens every port of a host is not one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import re
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from .relay import proxy_variables

log = logging.getLogger(__name__)

#: Resolves a host name to the addresses to try, in order (the gate's default asks the system).
Resolve = Callable[[str, int], Awaitable[list[str]]]

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_STATUS = {
    200: "Connection established",
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
# Headers for the proxy itself or this one hop, never sent on to the target.
_HOP = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization"})
_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the trailing NUL
_CHUNK = 64 * 1024
_LINGER_CHUNKS = 16


@dataclass(frozen=True)
class Target:
    """A host (lower case, IPv6 without brackets) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Allowed:
    """One entry of the allowed list; ``wildcard`` entries admit the subdomains of ``host``."""

    host: str
    port: int
    wildcard: bool = False

    def admits(self, target: Target) -> bool:
        if target.port != self.port:
            return False
        if self.wildcard:  # a name's subdomains; never an address that ends alike
            return not _is_address(target.host) and target.host.endswith("." + self.host)
        return target.host == self.host

    def __str__(self) -> str:
        shown = str(Target(self.host, self.port))
        return f"*.{shown}" if self.wildcard else shown


def _host(text: str) -> str:
    """``text`` as a host: an IPv4 address, a bracketed IPv6 address or a DNS name."""
    if text.startswith("[") and text.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            raise ValueError(f"{text} is not an IPv6 address") from None
    name = text.lower().removesuffix(".")
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    if ":" in name:
        raise ValueError(f"{text} is not a host name: write an IPv6 address in brackets")
    if not name.isascii():  # as it goes on the wire: bücher.example is xn--bcher-kva.example
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f"{text!r} is not a host name") from None
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{text!r} is not a host name")
    return name


def _port(text: str, entry: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r} has no valid port: write a number from 1 to 65535")
    return int(text)


def parse_target(authority: str) -> Target:
    """``host:port`` as a :class:`Target`; ``ValueError`` says what is wrong."""
    host, sep, port = authority.rpartition(":")
    if not sep or not host or host.endswith(":"):
        raise ValueError(f"{authority!r} is not host:port")
    return Target(_host(host), _port(port, authority))


def parse_allowed(entry: str) -> Allowed:
    """One allowed-list entry (``host:port``, ``*.domain:port``, ``[v6]:port``) as an
    :class:`Allowed`; ``ValueError`` with a one-line reason otherwise."""
    text = entry.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or text.endswith("]") or (":" in host and not host.endswith("]")):
        raise ValueError(
            f"allowed network entry {entry!r} has no port: write host:port, as example.com:443"
        )
    if host.startswith("*."):
        domain = _host(host[2:])
        if _is_address(domain):
            raise ValueError(f"allowed network entry {entry!r}: a wildcard names a domain")
        return Allowed(domain, _port(port, entry), wildcard=True)
    if "*" in host:
        raise ValueError(
            f"allowed network entry {entry!r}: a wildcard stands only first, as *.example.com:443"
        )
    return Allowed(_host(host), _port(port, entry))


proxy_env = proxy_variables


def relay_prefix(inside_socket: str, port: int) -> list[str]:
    """The argv prefix that starts the relay inside the walls before the program itself
    (``port`` 0: one the kernel picks, and the relay sets the proxy variables to it).

    ``-P``: the program's folder (the repository) is not searched for ``trellisd``."""
    return [
        sys.executable,
        "-P",
        "-m",
        "trellisd.sandbox.relay",
        "--unix",
        inside_socket,
        "--port",
        str(port),
        "--",
    ]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_own(address: str) -> bool:
    """Whether ``address`` names this machine or its link rather than a host on a network."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast


async def _system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Answer(Exception):
    """An answer the gate gives instead of a connection."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class _Request:
    method: str
    target: Target
    # For a forwarded request, the head to send on; None for CONNECT.
    head: bytes | None


def _parse_request(raw: bytes) -> _Request:
    lines = raw.decode("latin-1").split("\r\n")[:-2]
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Answer(400, "not an HTTP/1 request line")
    method, uri, version = parts
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _Answer(400, f"malformed header line {line[:40]!r}")
        headers.append((name, value.strip()))
    try:
        if method == "CONNECT":
            return _Request(method, parse_target(uri), None)
        if not uri.lower().startswith("http://"):
            raise _Answer(
                400,
                "this is an HTTP proxy: send CONNECT host:port, or an absolute http:// URL",
            )
        url = urlsplit(uri)
        if url.hostname is None or url.username is not None or url.password is not None:
            raise ValueError(f"{uri[:80]!r} names no host")
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
        port = 80 if url.port is None else _port(str(url.port), uri)
        target = Target(_host(host), port)
    except ValueError as error:
        raise _Answer(400, str(error)) from None
    dropped = _HOP | {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    kept = [(name, value) for name, value in headers if name.lower() not in dropped]
    if not any(name.lower() == "host" for name, _ in kept):
        kept.insert(0, ("Host", url.netloc))
    path = url.path or "/"
    if url.query:
        path = f"{path}?{url.query}"
    head = "".join(
        [f"{method} {path} {version}\r\n"]
        + [f"{name}: {value}\r\n" for name, value in kept]
        + ["Connection: close\r\n\r\n"]
    )
    return _Request(method, target, head.encode("latin-1"))


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"{reason}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {_STATUS[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


async def _carry(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, both: list[asyncio.StreamWriter]
) -> None:
    """Bytes from ``source`` to ``sink`` until end of file, which is passed on as a
    half-close; a broken side breaks both."""
    try:
        while data := await source.read(_CHUNK):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        for writer in both:
            writer.transport.abort()


class NetworkGate:
    """The HTTP proxy on ``folder / "net.sock"`` that lets a sandboxed program reach the
    targets of ``allowed`` and nothing else. Use as ``async with NetworkGate(...) as gate``."""

    def __init__(
        self,
        allowed: Sequence[str],
        folder: Path,
        *,
        max_connections: int = 64,
        max_header_bytes: int = 16 * 1024,
        header_timeout: float = 30.0,
        connect_timeout: float = 30.0,
        resolve: Resolve = _system_resolve,
    ) -> None:
        if isinstance(allowed, str):
            raise TypeError("allowed is a list of host:port entries, not one string")
        self.allowed = tuple(parse_allowed(entry) for entry in allowed)
        self.folder = folder
        self.socket_path = folder / "net.sock"
        if len(os.fsencode(self.socket_path)) > _SOCKET_PATH_MAX:
            raise ValueError(f"socket path {self.socket_path} is longer than a unix socket allows")
        self.max_connections = max_connections
        self.max_header_bytes = max_header_bytes
        self._header_timeout = header_timeout
        self._connect_timeout = connect_timeout
        self._resolve = resolve
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def admits(self, target: Target) -> bool:
        return any(entry.admits(target) for entry in self.allowed)

    async def __aenter__(self) -> NetworkGate:
        try:
            self.folder.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
        else:
            self.folder.chmod(0o700)
        self._server = await asyncio.start_unix_server(
            self._serve, path=self.socket_path, limit=self.max_header_bytes
        )
        self.socket_path.chmod(0o600)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        self.socket_path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            if len(self._tasks) > self.max_connections:
                raise _Answer(503, f"more than {self.max_connections} connections at once")
            request = await self._read_request(reader)
            if not self.admits(request.target):
                log.info("network gate: refused %s %s", request.method, request.target)
                raise _Answer(403, f"{request.target} is not an allowed network target")
            upstream_reader, upstream = await self._connect(request.target)
            log.info("network gate: %s %s", request.method, request.target)
            if request.head is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.write(request.head)
            both = [writer, upstream]
            await asyncio.gather(
                _carry(reader, upstream, both), _carry(upstream_reader, writer, both)
            )
        except _Answer as answer:
            await self._refuse(reader, writer, answer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            for side in (upstream, writer):
                if side is not None:
                    side.close()

    async def _refuse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: _Answer
    ) -> None:
        """Answer, then read what the client still sends (a bounded amount) until it closes,
        so that closing with unread bytes does not reset the connection before the answer."""
        try:
            await _answer(writer, answer.status, answer.reason)
            writer.write_eof()
            async with asyncio.timeout(self._header_timeout):
                for _ in range(_LINGER_CHUNKS):
                    if not await reader.read(_CHUNK):
                        break
        except (OSError, TimeoutError):
            pass

    async def _read_request(self, reader: asyncio.StreamReader) -> _Request:
        try:
            async with asyncio.timeout(self._header_timeout):
                raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise _Answer(431, f"request header over {self.max_header_bytes} bytes") from None
        except TimeoutError:
            raise _Answer(408, "no complete request header in time") from None
        return _parse_request(raw)

    async def _connect(self, target: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if _is_address(target.host):
            addresses = [target.host]
        else:
            try:
                addresses = await self._resolve(target.host, target.port)
            except OSError as error:
                raise _Answer(502, f"cannot resolve {target.host}: {error}") from None
            own = [a for a in addresses if _is_own(a)]
            if own and target.host != "localhost":
                raise _Answer(
                    403,
                    f"{target.host} resolves to {own[0]}, an address of this machine or its link",
                )
        failure = "no address"
        for address in addresses:
            try:
                async with asyncio.timeout(self._connect_timeout):
                    reader, writer = await asyncio.open_connection(address, target.port)
            except (OSError, TimeoutError) as error:
                failure = str(error) or type(error).__name__
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return reader, writer
        raise _Answer(502, f"cannot reach {target}: {failure}")
