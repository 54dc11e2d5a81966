"""The daemon as a bare subprocess whose pipes a test holds itself: for an editor that dies,
and for what the daemon writes on stderr."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.e2e.conftest import TEST_KEY
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer


class Pipes:
    """Frames written to the daemon's stdin, frames read from its stdout, stderr kept whole."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 0

    @classmethod
    async def start(
        cls, db: Path, model: ModelServer, *args: str, env: dict[str, str] | None = None
    ) -> Pipes:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trellisd",
            "--db",
            str(db),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=hermetic_env(
                db.parent / "home",
                TRELLISD_PROVIDER="openai",
                TRELLISD_BASE_URL=model.url,
                TRELLISD_API_KEY=TEST_KEY,
                TRELLISD_MODEL="test-model",
                **(env or {}),
            ),
        )
        return cls(process)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params: Any = None) -> int:
        self._next_id += 1
        self.send({"id": self._next_id, "method": method, "params": params})
        return self._next_id

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while (line := await self.process.stdout.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if not length:
            raise EOFError("the daemon closed stdout")
        message: dict[str, Any] = json.loads(await self.process.stdout.readexactly(length))
        return message

    async def answer(self, msg_id: int) -> dict[str, Any]:
        """Read until the answer to ``msg_id``; notifications on the way are kept."""
        while True:
            message = await self.read()
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.notifications.append(message)

    async def call(self, method: str, params: Any = None) -> Any:
        answer = await asyncio.wait_for(self.answer(self.request(method, params)), 30)
        assert "error" not in answer, answer
        return answer["result"]

    async def initialize(self, options: dict[str, Any] | None = None) -> None:
        await self.call("initialize", {"capabilities": {}, "initializationOptions": options})

    def hang_up(self) -> None:
        """What the editor's death does: its ends of stdin and stdout close."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        transport: Any = self.process._transport  # type: ignore[attr-defined]
        transport.get_pipe_transport(1).close()

    async def stderr_after_exit(self) -> tuple[int, str]:
        """Wait for the process to end; its exit code and all it wrote on stderr."""
        assert self.process.stderr is not None
        err = await asyncio.wait_for(self.process.stderr.read(), 60)
        code = await asyncio.wait_for(self.process.wait(), 60)
        return code, err.decode()

    async def stop(self) -> tuple[int, str]:
        self.request("shutdown")
        self.send({"method": "exit"})
        assert self.process.stdin is not None
        self.process.stdin.close()
        return await self.stderr_after_exit()
