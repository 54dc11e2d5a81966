"""The example exchange in protocol/example.md is byte-true and matches the schema."""

from __future__ import annotations

import json
import re

from tests import protocol_schema

EXAMPLE = protocol_schema.SCHEMA_PATH.parent / "example.md"


def frames() -> list[tuple[str, int, dict]]:
    text = EXAMPLE.read_text(encoding="utf-8")
    block = text[text.index("```text\n", text.index("# Example exchange")) :]
    block = block[len("```text\n") : block.index("\n```")]
    lines = block.splitlines()
    out = []
    for head, body in zip(lines[::2], lines[1::2], strict=True):
        length = int(re.search(r"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
        out.append((head[:3], length - len(body.encode()), json.loads(body)))
    return out


def test_every_frame_of_the_example_is_what_the_schema_says() -> None:
    sent: dict[int, str] = {}
    found = frames()
    assert len(found) > 10
    for direction, length_error, message in found:
        assert length_error == 0, message
        if direction == "-->":
            if "id" in message:
                sent[message["id"]] = message["method"]
            continue
        if "method" in message:
            protocol_schema.check("notifications", message["method"], "params", message["params"])
        else:
            protocol_schema.check("requests", sent[message["id"]], "result", message["result"])
