"""The processes of a session (``start_process``) in the ACP client's terminals, when it offers
``terminal``: the editor shows each one running. The session's policy has judged the command
line, and the walls are built around it here, before the client is asked to run it."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any, Protocol

from ..convert import structure, unstructure
from ..services.processes import TerminalHeld
from . import wire


class TerminalPeer(Protocol):
    """What this needs of the ACP connection (``rpc.Connection``)."""

    async def request(self, method: str, params: Any) -> Any: ...


class ClientTerminals:
    """``services.processes.Terminals`` over one session's ACP client; ``shown`` is told each
    terminal made, for the running call to embed it."""

    def __init__(
        self, peer: TerminalPeer, session_id: str, shown: Callable[[str], None] | None = None
    ) -> None:
        self.peer, self.session_id, self.shown = peer, session_id, shown

    async def create(self, argv: list[str], cwd: str, env: dict[str, str], limit: int) -> str:
        variables = [wire.EnvVariable(name, value) for name, value in env.items()]
        asked = wire.CreateTerminal(self.session_id, argv[0], argv[1:], variables, cwd, limit)
        answer = await self.peer.request("terminal/create", unstructure(asked))
        terminal_id = structure(answer, wire.TerminalCreated).terminal_id
        if self.shown is not None:
            self.shown(terminal_id)
        return terminal_id

    async def output(self, terminal_id: str) -> TerminalHeld:
        answer = await self.peer.request("terminal/output", self._ref(terminal_id))
        held = structure(answer, wire.TerminalOutput)
        status = held.exit_status
        code = None if status is None else _exit_code(status)
        return TerminalHeld(held.output, held.truncated, status is not None, code)

    async def wait_for_exit(self, terminal_id: str) -> int | None:
        answer = await self.peer.request("terminal/wait_for_exit", self._ref(terminal_id))
        return _exit_code(structure(answer, wire.TerminalExitStatus))

    async def kill(self, terminal_id: str) -> None:
        await self.peer.request("terminal/kill", self._ref(terminal_id))

    async def release(self, terminal_id: str) -> None:
        await self.peer.request("terminal/release", self._ref(terminal_id))

    def _ref(self, terminal_id: str) -> Any:
        return unstructure(wire.TerminalRef(self.session_id, terminal_id))


def _exit_code(status: wire.TerminalExitStatus) -> int | None:
    """The exit code, or minus the number of the signal that ended the command; None when
    the client told neither."""
    if status.exit_code is not None:
        return status.exit_code
    name = status.signal or ""
    try:
        return -signal.Signals[name if name.startswith("SIG") else f"SIG{name}"].value
    except KeyError:
        return None
