"""A frame nested deeper than Python can read is the client's mistake: it is answered, and
the daemon reads on."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Pipes
from tests.fixtures.model_server import ModelServer


async def test_a_frame_nested_200000_deep_is_answered_and_reading_goes_on(
    tmp_path: Path, model: ModelServer
) -> None:
    pipes = await Pipes.start(tmp_path / "store" / "trellisd.db", model)
    await pipes.initialize()
    depth = 200_000
    body = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {"query": '
        + b"[" * depth
        + b"]" * depth
        + b"}}"
    )
    assert pipes.process.stdin is not None
    pipes.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    answer = await pipes.read()

    assert answer == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32700,
            "message": "the frame nests arrays and objects too deep to be read",
        },
    }
    assert "sessions" in await pipes.call("session/list", {})
    code, stderr = await pipes.stop()
    assert code == 0 and "Traceback" not in stderr, stderr
