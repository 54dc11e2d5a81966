"""Anthropic Messages over SSE (``POST {base_url}/v1/messages`` with ``stream: true``).

The conversation changes shape on the way out: system messages become the top-level
``system``, an assistant's tool calls become ``tool_use`` blocks, and tool results go back as
``tool_result`` blocks in a user message (consecutive results share one message). A message
marked ``cache`` (the last pinned turn) ends with a cache breakpoint of its own. A user
message's images follow its text as ``image`` blocks with a base64 source.

Thinking: ``ModelRequest.effort`` turns it on with a token budget (``THINKING_BUDGETS``).
The thinking streams as ``ThoughtDelta``s; each finished ``thinking`` block (its text and
signature) and ``redacted_thinking`` block comes back in ``ReasoningDone``, and an assistant
message carrying them sends them first in its content, unchanged, as the API requires of a
turn that used tools (another provider's reasoning is dropped).

Token figures: Anthropic's ``input_tokens`` leaves out the tokens read from and written to the
prompt cache. ``Usage.input`` here counts all of them (``input_tokens`` +
``cache_read_input_tokens`` + ``cache_creation_input_tokens``) and ``Usage.cached`` is
``cache_read_input_tokens``, so the figures mean the same as on the OpenAI wire. Anthropic
counts the thinking inside ``output_tokens`` and reports no figure of its own for it, so
``Usage.reasoning`` stays None.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from .base import (
    Effort,
    Image,
    Message,
    ModelRequest,
    ProviderError,
    ProviderEvent,
    Reasoning,
    ReasoningDone,
    Stop,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
    says_too_long,
)
from .calls import CALL_COST, CallBytes, PartialCall, as_object, parameters_schema
from .http import HttpSettings
from .http_provider import HttpProvider
from .sse import ServerSentEvent
from .thoughts import Thoughts

log = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
THINKING_BUDGETS: dict[Effort, int] = {"low": 2048, "medium": 8192, "high": 24576}
"""The ``thinking.budget_tokens`` each effort asks for. The budget is part of ``max_tokens``,
which must exceed it: a ``max_tokens`` at or below the budget is raised by the budget, so the
answer keeps the room it was given."""

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
RETRYABLE_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
QUIET_DELTAS = frozenset({"citations_delta"})
UNKNOWN_LOGGED = 16  # unknown event types of one response named in the log; others quietly
MALFORMED_LOGGED = 3  # malformed events of one response logged; the others are skipped quietly
EPHEMERAL = {"type": "ephemeral"}


def mark_cached_prefix(messages: list[dict[str, Any]]) -> int:
    """Put a cache breakpoint on the last block of the request: the next call (the turn's
    next step, or the next turn, which sends the earlier turns as they happened) starts with
    this whole request, and reads all of it from the cache, the newest tool result included
    (the system and the tools carry their own breakpoints). Returns how many messages the
    marked prefix holds."""
    for index in range(len(messages) - 1, -1, -1):
        blocks = messages[index]["content"]
        if blocks:
            blocks[-1] = {**blocks[-1], "cache_control": EPHEMERAL}
            return index + 1
    return 0


def to_anthropic_messages(
    messages: list[Message], provider: str = "anthropic"
) -> tuple[str | None, list[dict[str, Any]]]:
    """The ``system`` text and the ``messages`` of a Messages API request; an assistant
    message's reasoning goes back only when ``provider`` made it."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]], cache: bool) -> None:
        if not blocks:
            return
        if cache:
            blocks[-1] = {**blocks[-1], "cache_control": EPHEMERAL}
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            if m.content:
                system.append(m.content)
        elif m.role == "tool":
            result = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            add("user", [result], m.cache)
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
            if blocks and m.reasoning is not None and m.reasoning.provider == provider:
                # Thinking blocks lead the message and never end it (they take no cache
                # breakpoint), and nothing is sent for a message of thinking alone.
                blocks[:0] = [dict(item) for item in m.reasoning.items]
            add("assistant", blocks, m.cache)
        elif m.content or m.images:
            text = [{"type": "text", "text": m.content}] if m.content else []
            add("user", text + _image_blocks(m.images), m.cache)
    return ("\n\n".join(system) or None), out


def _image_blocks(images: tuple[Image, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": image.mime_type,
                "data": base64.b64encode(image.data).decode("ascii"),
            },
        }
        for image in images
    ]


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": parameters_schema(t)}
        for t in tools
    ]


class AnthropicProvider(HttpProvider):
    """The Messages API with ``stream: true``."""

    def __init__(self, http: HttpSettings, name: str = "anthropic") -> None:
        super().__init__(http, name)

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.http.api_key:
            headers["x-api-key"] = self.http.api_key
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = to_anthropic_messages(request.messages, self.name)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
            "stream": True,
        }
        if system is not None:
            body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
        if request.tools:
            body["tools"] = to_anthropic_tools(request.tools)
            body["tools"][-1]["cache_control"] = EPHEMERAL
        mark_cached_prefix(messages)
        if request.effort is None:
            if request.temperature is not None:
                body["temperature"] = request.temperature
        else:
            # While thinking, the API takes no temperature but its own.
            budget = THINKING_BUDGETS[request.effort]
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            if body["max_tokens"] <= budget:
                body["max_tokens"] += budget
        return body

    def path(self) -> str:
        """``/v1/messages``, or ``/messages`` when the base URL already ends in ``/v1``."""
        return "/messages" if self.http.base_url.rstrip("/").endswith("/v1") else "/v1/messages"

    def models_path(self) -> str:
        """``GET /v1/models`` (``/models`` below a base URL ending in ``/v1``)."""
        return self.path().replace("/messages", "/models")

    def decoder(self) -> MessagesDecoder:
        return MessagesDecoder(self.http, self.name)


class MessagesDecoder:
    """One response's events: text and thinking as they come, each tool call when its block
    closes, the reasoning (its blocks, to send back), usage and the stop at the end.
    ``provider`` names the provider the reasoning is from."""

    def __init__(self, http: HttpSettings, provider: str = "anthropic") -> None:
        self.http = http
        self.provider = provider
        self.tool_blocks: dict[int, PartialCall] = {}
        self.taken = CallBytes(http.step_limit)
        self.thoughts = Thoughts(http.step_limit)
        self.thinking_blocks: dict[int, ThinkingBlock] = {}
        self.reasoning_items: list[dict[str, Any]] = []
        self.stop_reason: str | None = None
        self.done = False
        self.figures: dict[str, int] = {}
        self.unknown: set[str] = set()
        self.malformed = 0

    @property
    def complete(self) -> bool:
        return self.done or self.stop_reason is not None

    def feed(self, sse: ServerSentEvent) -> list[ProviderEvent]:
        if not sse.data.strip():
            return []
        try:
            data = json.loads(sse.data)
        except ValueError:
            self._skip("a malformed event", sse.data)
            return []
        if not isinstance(data, dict):
            self._skip("an event that is not an object", sse.data)
            return []
        kind = sse.event if sse.event != "message" else str(data.get("type", ""))
        handler = _HANDLERS.get(kind)
        if handler is None:
            kind = kind[:100]
            if len(self.unknown) < UNKNOWN_LOGGED and kind not in self.unknown:
                self.unknown.add(kind)
                log.warning("skipping events of unknown type %r from %s", kind, self.http.base_url)
            return []
        return handler(self, data)

    def _skip(self, what: str, data: str) -> None:
        """Log the first few events skipped; a stream of them costs no log line each."""
        self.malformed += 1
        if self.malformed <= MALFORMED_LOGGED:
            log.warning(
                "skipping %s from %s: %s", what, self.http.base_url, self.http.redact(data[:200])
            )

    def _message_start(self, data: dict[str, Any]) -> list[ProviderEvent]:
        message = as_object(data.get("message"))
        self._take_usage(message.get("usage"), output=False)
        return []

    def _block_start(self, data: dict[str, Any]) -> list[ProviderEvent]:
        block = as_object(data.get("content_block"))
        if block.get("type") == "tool_use":
            call = PartialCall(id=str(block.get("id") or ""))
            call.add_name(str(block.get("name") or ""))
            self.taken.take(CALL_COST + len(call.name))
            if isinstance(block.get("input"), dict) and block["input"]:
                text = json.dumps(block["input"])
                self.taken.take(len(text))
                call.replace(text)
            self.tool_blocks[_index(data)] = call
        elif block.get("type") == "text" and block.get("text"):
            return [TextDelta(str(block["text"]))]
        elif block.get("type") in ("thinking", "redacted_thinking"):
            thinking = self.thinking_blocks[_index(data)] = ThinkingBlock(block, self.thoughts)
            self.thoughts.paragraph()
            return thinking.add(block.get("thinking"))
        return []

    def _block_delta(self, data: dict[str, Any]) -> list[ProviderEvent]:
        delta = as_object(data.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return [TextDelta(text)] if isinstance(text, str) and text else []
        if kind in ("thinking_delta", "signature_delta"):
            thinking = self.thinking_blocks.get(_index(data))
            if thinking is None:
                return []
            if kind == "signature_delta":
                thinking.sign(delta.get("signature"))
                return []
            return thinking.add(delta.get("thinking"))
        if kind == "input_json_delta":
            call = self.tool_blocks.get(_index(data))
            if call is not None and isinstance(delta.get("partial_json"), str):
                self.taken.take(len(delta["partial_json"]))
                call.add(delta["partial_json"])
            return []
        if kind not in QUIET_DELTAS:
            log.debug("ignoring a %s delta from %s", kind, self.http.base_url)
        return []

    def _block_stop(self, data: dict[str, Any]) -> list[ProviderEvent]:
        thinking = self.thinking_blocks.pop(_index(data), None)
        if thinking is not None:
            self._keep(thinking)
        call = self.tool_blocks.pop(_index(data), None)
        return [] if call is None else [ToolCallRequested(call.finish())]

    def _keep(self, thinking: ThinkingBlock) -> None:
        item = thinking.item()
        if item is not None:
            self.reasoning_items.append(item)

    def _message_delta(self, data: dict[str, Any]) -> list[ProviderEvent]:
        delta = as_object(data.get("delta"))
        if isinstance(delta.get("stop_reason"), str):
            self.stop_reason = delta["stop_reason"]
        self._take_usage(data.get("usage"), output=True)
        return []

    def _message_stop(self, data: dict[str, Any]) -> list[ProviderEvent]:
        self.done = True
        return []

    def _ping(self, data: dict[str, Any]) -> list[ProviderEvent]:
        return []

    def _error(self, data: dict[str, Any]) -> list[ProviderEvent]:
        error = as_object(data.get("error"))
        kind = str(error.get("type") or "error")
        message = str(error.get("message") or "no details")
        raise ProviderError(
            f"the provider at {self.http.base_url} reported an error mid-stream: {kind}: {message}",
            retryable=kind in RETRYABLE_ERRORS,
            too_long=says_too_long(message),
        )

    def _take_usage(self, usage: Any, output: bool) -> None:
        """Keep the figures ``usage`` reports; ``message_delta`` repeats them, cumulatively,
        and only its ``output_tokens`` is final (``message_start`` holds a placeholder)."""
        if not isinstance(usage, dict):
            return
        names = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]
        if output:
            names.append("output_tokens")
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                self.figures[name] = value

    def close(self) -> list[ProviderEvent]:
        for index in sorted(self.thinking_blocks):
            self._keep(self.thinking_blocks[index])
        self.thinking_blocks.clear()
        events: list[ProviderEvent] = []
        if self.thoughts.pieces or self.reasoning_items:
            items = tuple(self.reasoning_items)
            events.append(ReasoningDone(Reasoning(self.provider, self.thoughts.text, items)))
        events += [
            ToolCallRequested(self.tool_blocks[i].finish()) for i in sorted(self.tool_blocks)
        ]
        self.tool_blocks.clear()
        events.append(self.usage())
        reason = self.stop_reason or "stop"
        events.append(Stop(STOP_REASONS.get(reason, reason)))
        return events

    def usage(self) -> Usage:
        f = self.figures
        written = f.get("cache_creation_input_tokens", 0)
        read = f.get("cache_read_input_tokens")
        total = None if "input_tokens" not in f else f["input_tokens"] + (read or 0) + written
        return Usage(input=total, output=f.get("output_tokens"), cached=read)


class ThinkingBlock:
    """A ``thinking`` block as it streams (its text and signature), or a
    ``redacted_thinking`` block (its encrypted ``data``), counted against the call's
    reasoning limit."""

    def __init__(self, start: dict[str, Any], thoughts: Thoughts) -> None:
        self.thoughts = thoughts
        self.redacted = start.get("type") == "redacted_thinking"
        self.texts: list[str] = []
        self.signature: list[str] = []
        data = start.get("data")
        self.data = data if isinstance(data, str) else ""
        thoughts.take(len(self.data))
        self.sign(start.get("signature"))

    def add(self, text: Any) -> list[ProviderEvent]:
        """A piece of the thinking, kept, and as the event that streams it."""
        if not isinstance(text, str) or not text or self.redacted:
            return []
        self.texts.append(text)
        return [self.thoughts.add(text)]

    def sign(self, signature: Any) -> None:
        if isinstance(signature, str) and signature:
            self.thoughts.take(len(signature))
            self.signature.append(signature)

    def item(self) -> dict[str, Any] | None:
        """The block as the API takes it back; None for a thinking block left unsigned (the
        API would refuse it), whose text was shown all the same."""
        if self.redacted:
            return {"type": "redacted_thinking", "data": self.data} if self.data else None
        if not self.signature:
            return None
        return {
            "type": "thinking",
            "thinking": "".join(self.texts),
            "signature": "".join(self.signature),
        }


def _index(data: dict[str, Any]) -> int:
    index = data.get("index")
    return index if isinstance(index, int) else -1


_HANDLERS = {
    "message_start": MessagesDecoder._message_start,
    "content_block_start": MessagesDecoder._block_start,
    "content_block_delta": MessagesDecoder._block_delta,
    "content_block_stop": MessagesDecoder._block_stop,
    "message_delta": MessagesDecoder._message_delta,
    "message_stop": MessagesDecoder._message_stop,
    "ping": MessagesDecoder._ping,
    "error": MessagesDecoder._error,
}
