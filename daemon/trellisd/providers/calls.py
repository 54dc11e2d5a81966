"""What every wire shares about tools: a tool call assembled from the pieces it streams in,
and the JSON schema a tool's parameters are sent as.

A call whose pieces never named its tool comes out with an empty name, not dropped: the agent
loop tells the model such a call is an error."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from ..records import ToolCall
from .base import ToolSpec

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one: a malformed piece of a stream
    reads as a piece that says nothing, never as a crash."""
    return value if isinstance(value, dict) else {}


def parameters_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's parameters; an object with no properties when it declares none."""
    return spec.parameters or dict(EMPTY_SCHEMA)


@dataclass
class PartialCall:
    """A tool call whose arguments are still arriving as pieces of JSON text."""

    id: str = ""
    name: str = ""
    arguments: str = ""

    def finish(self) -> ToolCall:
        """The call. Arguments that are not a JSON object are kept as ``{"_unparsed": text}``,
        which the agent loop reports back to the model; a call without an id gets one."""
        raw = self.arguments
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError:
            arguments = {"_unparsed": raw}
        if not isinstance(arguments, dict):
            arguments = {"_unparsed": raw}
        call_id = self.id or f"call_{uuid.uuid4().hex[:24]}"
        return ToolCall(id=call_id, name=self.name, arguments=arguments)
