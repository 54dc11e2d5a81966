"""The relay: inside the walls, the program's loopback port that leads to the network gate.

    python -m trellisd.sandbox.relay --unix SOCK --port PORT -- argv...

Run as the first program inside a network namespace that has only its loopback. It listens on
``127.0.0.1:PORT`` (``--port 0``: a port the kernel picks, which the relay then sets the
program's proxy variables to, ``proxy_variables``: the programs of a session share one loopback,
each with a relay of its own), carries each connection made there to the unix socket ``SOCK``
(the :class:`~trellisd.sandbox.network.NetworkGate` outside, bound into the walls) byte for byte
in both directions, passing a half-close on as a half-close, and starts ``argv`` with the same
stdio. SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to the relay go to the program. When the program
exits the relay exits with its status (a signal ``n`` as ``128 + n``), dropping the connections
still open. It listens before the program starts, so the program's first connection finds it.

Exit status otherwise: 2 for bad arguments, 126 when the port cannot be taken, 127 when the
program cannot be started; each with a line on stderr.

Standard library only, and its C modules where the Python ones import more (``_socket`` and
``_signal``: ``socket`` and ``signal`` import enum and selectors), so that the relay costs
little more than an interpreter's start.
"""

from __future__ import annotations

import _socket
import os
import select
import sys

TYPE_CHECKING = False  # as typing's, without importing typing (a few milliseconds)
if TYPE_CHECKING:  # the C module has no stubs of its own; ``signal`` re-exports it
    import signal as _signal
else:
    import _signal

USAGE = "usage: python -m trellisd.sandbox.relay --unix SOCK --port PORT -- argv..."
FORWARDED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGQUIT)
_CHUNK = 64 * 1024
_AGAIN = (BlockingIOError, InterruptedError)
PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def proxy_variables(port: int) -> dict[str, str]:
    """The variables that send a program's HTTP, HTTPS and other traffic to the relay on its
    loopback ``port``; its own loopback stays direct."""
    url = f"http://127.0.0.1:{port}"
    env: dict[str, str] = {}
    for name in PROXY_NAMES:
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    return env


def _arguments(argv: list[str]) -> tuple[str, int, list[str]]:
    """``--unix SOCK --port PORT -- argv...``; ``ValueError`` says what is wrong."""
    if "--" not in argv:
        raise ValueError("no -- before the program")
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    if len(options) % 2:
        raise ValueError(f"{options[-1]} wants a value")
    given = dict(zip(options[::2], options[1::2], strict=True))
    unknown = set(given) - {"--unix", "--port"}
    if unknown:
        raise ValueError(f"unknown option {sorted(unknown)[0]}")
    if "--unix" not in given or "--port" not in given:
        raise ValueError("--unix and --port are both needed")
    port = given["--port"]
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--port {port}: not a port")
    if not command:
        raise ValueError("no program after --")
    return given["--unix"], int(port), command


class _Direction:
    """Bytes read from ``source`` and not yet written to ``sink``."""

    def __init__(self, source: _socket.socket, sink: _socket.socket) -> None:
        self.source = source
        self.sink = sink
        self.pending = b""
        self.ended = False  # the source sent its end of file
        self.passed = False  # ... and it reached the sink as a half-close

    def wants_read(self) -> bool:
        return not self.ended and not self.pending

    def read(self) -> None:
        data = self.source.recv(_CHUNK)
        if data:
            self.pending = data
        else:
            self.ended = True

    def write(self) -> None:
        sent = self.sink.send(self.pending)
        self.pending = self.pending[sent:]

    def pass_end(self) -> None:
        if self.ended and not self.pending and not self.passed:
            self.passed = True
            self.sink.shutdown(_socket.SHUT_WR)


class _Connection:
    def __init__(self, outside: _socket.socket, inside: _socket.socket) -> None:
        self.sockets = (outside, inside)
        self.directions = (_Direction(outside, inside), _Direction(inside, outside))

    def events(self) -> dict[int, int]:
        wanted: dict[int, int] = {sock.fileno(): 0 for sock in self.sockets}
        for direction in self.directions:
            if direction.wants_read():
                wanted[direction.source.fileno()] |= select.POLLIN
            if direction.pending:
                wanted[direction.sink.fileno()] |= select.POLLOUT
        return wanted

    def ready(self, fd: int, events: int) -> None:
        """Move what ``events`` on ``fd`` allow; ``OSError`` when either side broke."""
        for direction in self.directions:
            if direction.source.fileno() == fd and events & ~select.POLLOUT:
                if direction.wants_read():
                    try:
                        direction.read()
                    except _AGAIN:
                        pass
            if direction.sink.fileno() == fd and events & (select.POLLOUT | select.POLLERR):
                if direction.pending:
                    try:
                        direction.write()
                    except _AGAIN:
                        pass
            direction.pass_end()

    def done(self) -> bool:
        return all(direction.passed for direction in self.directions)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


class _Relay:
    def __init__(self, unix: str, port: int) -> None:
        self.unix = unix
        self.listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        self.listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.connections: dict[int, _Connection] = {}

    def accept(self) -> None:
        while True:
            try:
                # The C socket's accept: ``socket.accept`` wraps it in the Python class.
                fd, _ = self.listener._accept()  # type: ignore[attr-defined]
            except _AGAIN:
                return
            except OSError:
                return  # the client left before it was accepted, or out of descriptors
            outside = _socket.socket(fileno=fd)
            outside.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            inside = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                inside.connect(self.unix)
            except OSError as error:
                print(f"trellisd relay: cannot reach {self.unix}: {error}", file=sys.stderr)
                inside.close()
                outside.close()
                continue
            outside.setblocking(False)
            inside.setblocking(False)
            connection = _Connection(outside, inside)
            for sock in connection.sockets:
                self.connections[sock.fileno()] = connection

    def poller(self, wake: int) -> select.poll:
        poller = select.poll()
        poller.register(self.listener.fileno(), select.POLLIN)
        poller.register(wake, select.POLLIN)
        for fd, connection in self.connections.items():
            # A socket with nothing to do now is left out: poll would report its hang-up
            # at every turn while the other side is still being written.
            if events := connection.events()[fd]:
                poller.register(fd, events)
        return poller

    def ready(self, fd: int, events: int) -> None:
        if fd == self.listener.fileno():
            self.accept()
            return
        connection = self.connections.get(fd)
        if connection is None:
            return
        try:
            connection.ready(fd, events)
        except OSError:
            connection.close()
            self._forget(connection)
            return
        if connection.done():
            self._forget(connection)
            connection.close()

    def _forget(self, connection: _Connection) -> None:
        for key in [fd for fd, held in self.connections.items() if held is connection]:
            del self.connections[key]


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except _AGAIN:
        pass


def run(unix: str, port: int, command: list[str]) -> int:
    child: list[int] = []
    pending: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if child:
            try:
                os.kill(child[0], signum)
            except ProcessLookupError:
                pass
        else:
            pending.append(signum)

    wake, woken = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    _signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, lambda signum, frame: None)
    for signum in FORWARDED:
        _signal.signal(signum, forward)
    try:
        relay = _Relay(unix, port)
    except OSError as error:
        print(f"trellisd relay: cannot listen on 127.0.0.1:{port}: {error}", file=sys.stderr)
        return 126
    if port == 0:
        os.environ.update(proxy_variables(relay.listener.getsockname()[1]))
    try:
        # The program gets the dispositions a shell would give it, not Python's SIGPIPE ignore.
        pid = os.posix_spawnp(
            command[0], command, os.environ, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ)
        )
    except OSError as error:
        print(f"trellisd relay: cannot start {command[0]}: {error}", file=sys.stderr)
        return 127
    child.append(pid)
    for early in pending:
        os.kill(pid, early)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code
        for fd, events in relay.poller(wake).poll():
            if fd == wake:
                _drain(wake)
            else:
                relay.ready(fd, events)


def main(argv: list[str]) -> int:
    try:
        unix, port, command = _arguments(argv)
    except ValueError as error:
        print(f"trellisd relay: {error}\n{USAGE}", file=sys.stderr)
        return 2
    return run(unix, port, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
