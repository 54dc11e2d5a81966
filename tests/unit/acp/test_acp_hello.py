"""The answer ``trellisd acp`` gives to ``initialize`` before the store is loaded is one the
ACP SDK reads, and anything but a well-formed ``initialize`` is left to the connection."""

from __future__ import annotations

import json

import acp
import pytest
from acp import schema

from trellisd.acp.hello import PROTOCOL_VERSION, answer_early, capabilities
from trellisd.convert import unstructure


def test_the_early_answer_is_what_the_sdk_reads() -> None:
    assert PROTOCOL_VERSION == acp.PROTOCOL_VERSION
    request = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True},
        },
    }
    early = answer_early(json.dumps(request).encode() + b"\n")
    assert early is not None
    line, asked = early
    answer = json.loads(line)
    assert line.endswith(b"\n") and answer["id"] == 0 and asked.files == (True, False)
    assert asked.client_capabilities.terminal
    typed = schema.InitializeResponse.model_validate(answer["result"])
    assert typed.model_dump(by_alias=True, exclude_none=True) == unstructure(capabilities())


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n',
        b'{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1"}}\n',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize","params":{"protocolVersion":1}}\n',
        b"",
    ],
)
def test_anything_else_is_left_to_the_connection(line: bytes) -> None:
    assert answer_early(line) is None
