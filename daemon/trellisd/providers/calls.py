"""What every wire shares about tools: a tool call assembled from the pieces it streams in,
and the JSON schema a tool's parameters are sent as.

A call whose pieces never named its tool comes out with an empty name, not dropped: the agent
loop tells the model such a call is an error.

What the tool calls of one response may take is capped (``CallBytes``): their names and
arguments together at most ``STEP_LIMIT`` characters, each call counting ``CALL_COST`` more, so
that a model streaming arguments (or calls) without end is stopped with a ``ProviderError``
instead of running the daemon out of memory. A call's pieces are kept in a list and joined once,
when the call is whole: appending to one string would copy all of it for each piece."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..records import ToolCall
from .base import STEP_LIMIT, ProviderError, ToolSpec, size_words

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
CALL_COST = 256  # what a call counts against the cap besides its name and arguments
NAME_LIMIT = 1024  # a name streamed longer is cut here (no tool has such a name)


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one: a malformed piece of a stream
    reads as a piece that says nothing, never as a crash."""
    return value if isinstance(value, dict) else {}


def parameters_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's parameters; an object with no properties when it declares none."""
    return spec.parameters or dict(EMPTY_SCHEMA)


class CallBytes:
    """What the tool calls of one response have taken so far, against ``limit``; ``what``
    names what is counted, in the message past it (``thoughts`` counts reasoning too)."""

    def __init__(self, limit: int = STEP_LIMIT, what: str = "tool calls") -> None:
        self.limit = limit
        self.what = what
        self.taken = 0

    def take(self, count: int) -> None:
        """Count ``count`` more characters; a ``ProviderError`` past the limit."""
        self.taken += count
        if self.taken > self.limit:
            raise ProviderError(
                f"the model's {self.what} in one step went past {size_words(self.limit)};"
                " the call was ended to bound the memory it may take"
            )


@dataclass
class PartialCall:
    """A tool call whose arguments are still arriving as pieces of JSON text."""

    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)

    def add_name(self, text: str) -> None:
        """A piece of the tool's name; past ``NAME_LIMIT`` characters, the rest is dropped."""
        if len(self.name) < NAME_LIMIT:
            self.name += text[: NAME_LIMIT - len(self.name)]

    def add(self, text: str) -> None:
        """A piece of the arguments' JSON text."""
        self.pieces.append(text)

    def replace(self, text: str) -> None:
        """The arguments' whole JSON text, in place of what came before."""
        self.pieces = [text]

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)

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
