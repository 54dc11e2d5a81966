"""The ACP connection (``trellisd.acp.rpc``) in-process, over an ``asyncio.StreamReader`` the
test feeds and a writer it reads back: requests and notifications reach ``dispatch``, errors
answer with their JSON-RPC codes, bad lines are answered and the connection serves on, and
the agent's own requests find their answers by id."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests import acp_schema
from trellisd.acp.rpc import Connection, RpcError


class Wire:
    """The client's end: what it sends the agent, and what the agent wrote back."""

    def __init__(self, limit: int = 2**16) -> None:
        self.reader = asyncio.StreamReader(limit=limit)
        self.written: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def send(self, message: dict[str, Any] | bytes) -> None:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.reader.feed_data(line + b"\n")

    async def received(self) -> dict[str, Any]:
        message = await self.written.get()
        if acp_schema.available():
            acp_schema.check(message)
        return message

    # the agent's writer
    def write(self, data: bytes) -> None:
        for line in data.splitlines():
            self.written.put_nowait(json.loads(line))

    async def drain(self) -> None:
        pass


class Agent:
    """A ``dispatch`` with a method of each kind: one that needs ``sessionId``, one that
    fails unexpectedly, one that waits on the client's answer, and a notification."""

    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.notified: asyncio.Queue[Any] = asyncio.Queue()
        self.asked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def dispatch(self, method: str, raw: Any, is_notification: bool) -> Any:
        if is_notification and method == "session/cancel":
            self.notified.put_nowait(raw)
            return None
        if method == "session/list":
            return {"sessions": [], "cwd": raw.get("cwd")}
        if method == "session/prompt":
            raise ValueError("the store went away")
        if method == "session/load":  # asks the client, answers with what it said
            assert self.conn is not None
            try:
                answer = await self.conn.request("fs/read_text_file", {"path": "/a"})
            except RpcError as exc:
                return {"code": exc.code, "message": exc.message, "data": exc.data}
            return {"read": answer}
        raise RpcError.method_not_found(method)


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[Wire, Agent, Connection]]:
    wire, agent = Wire(limit=256), Agent()
    conn = agent.conn = Connection(wire.reader, wire, agent.dispatch, limit=256)
    serving = asyncio.ensure_future(conn.serve())
    yield wire, agent, conn
    wire.reader.feed_eof()
    await serving


def request(ident: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


async def test_a_malformed_line_is_a_parse_error_and_the_connection_serves_on(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, _, _ = served
    wire.send(b'{"jsonrpc": "2.0", "id": 1, "method"')
    error = await wire.received()
    assert error["id"] is None and error["error"]["code"] == -32700
    assert error["error"]["message"] == "Parse error"
    wire.send(b"[1, 2]")
    assert (await wire.received())["error"]["code"] == -32600
    wire.send(b"   ")  # a blank line is nothing to answer
    wire.send(request(2, "session/list", {"cwd": "/w"}))
    assert await wire.received() == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"sessions": [], "cwd": "/w"},
    }


async def test_a_line_over_the_limit_is_dropped_with_a_parse_error(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, _, _ = served
    wire.send(request(1, "session/list", {"cwd": "x" * 1000}))
    error = await wire.received()
    assert error["id"] is None and error["error"]["code"] == -32700
    assert error["error"]["data"] == {"limit": 256}
    wire.send(request(2, "session/list", {}))
    assert (await wire.received())["result"] == {"sessions": [], "cwd": None}


async def test_an_unknown_method_is_method_not_found_naming_it(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, _, _ = served
    wire.send(request(7, "session/teleport", {}))
    assert await wire.received() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32601,
            "message": "Method not found",
            "data": {"method": "session/teleport"},
        },
    }


async def test_an_unexpected_failure_is_an_internal_error_without_a_traceback(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, _, _ = served
    wire.send(request(1, "session/prompt", {}))
    error = (await wire.received())["error"]
    assert error == {
        "code": -32603,
        "message": "Internal error",
        "data": {"details": "the store went away"},
    }


async def test_a_notification_is_served_and_never_answered(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, agent, _ = served
    wire.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
    wire.send({"jsonrpc": "2.0", "method": "session/unheard", "params": {}})
    assert await agent.notified.get() == {"sessionId": "s"}
    wire.send(request(1, "session/list", {}))
    assert (await wire.received())["id"] == 1  # the first thing written: no answers before


async def test_the_agents_request_finds_its_answer_by_id_result_or_error(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, _, _ = served
    wire.send(request(1, "session/load", {}))
    asked = await wire.received()
    assert asked["method"] == "fs/read_text_file" and asked["params"] == {"path": "/a"}
    wire.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": "text"}})
    assert (await wire.received())["result"] == {"read": {"content": "text"}}

    wire.send(request(2, "session/load", {}))
    asked = await wire.received()
    refusal = {"code": -32002, "message": "Resource not found", "data": {"uri": "/a"}}
    wire.send({"jsonrpc": "2.0", "id": asked["id"], "error": refusal})
    assert (await wire.received())["result"] == refusal


async def test_a_cancelled_request_is_withdrawn_and_a_late_answer_is_ignored(
    served: tuple[Wire, Agent, Connection],
) -> None:
    wire, _, conn = served
    asking = asyncio.ensure_future(conn.request("session/request_permission", {"n": 1}))
    first = await wire.received()
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    withdrawn = await wire.received()
    assert withdrawn == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": first["id"]},
    }
    wire.send({"jsonrpc": "2.0", "id": first["id"], "result": {"late": True}})
    asking = asyncio.ensure_future(conn.request("session/request_permission", {"n": 2}))
    second = await wire.received()
    assert second["id"] != first["id"]
    wire.send({"jsonrpc": "2.0", "id": second["id"], "result": {"outcome": "x"}})
    assert await asking == {"outcome": "x"}


async def test_when_the_client_goes_its_requests_fail_and_handlers_stop() -> None:
    wire, agent = Wire(), Agent()
    conn = agent.conn = Connection(wire.reader, wire, agent.dispatch)
    serving = asyncio.ensure_future(conn.serve())
    asking = asyncio.ensure_future(conn.request("session/request_permission", {}))
    await wire.received()
    wire.send(request(1, "session/load", {}))  # its handler waits on the client too
    await wire.received()
    wire.reader.feed_eof()
    await serving
    assert wire.written.empty()  # the load was stopped, not answered
    with pytest.raises(ConnectionError):
        await asking
    with pytest.raises(ConnectionError):
        await conn.notify("session/update", {})
