"""OpenAI Chat Completions over SSE: OpenAI and OpenRouter, and the servers that copy the format
(Ollama, vLLM, llama.cpp, LM Studio).

Token figures: ``prompt_tokens`` already counts the prompt tokens read from the cache, so
``Usage.input`` is ``prompt_tokens`` and ``Usage.cached`` is
``prompt_tokens_details.cached_tokens`` (None when the server does not report it);
``Usage.reasoning`` is ``completion_tokens_details.reasoning_tokens``, part of the output.

A user message's images go as ``image_url`` parts holding a ``data:`` URL, after its text.
Reasoning comes back from the servers that show it (not OpenAI's own, which keeps it to
the Responses API) as a field of the delta beside ``content``: ``reasoning_content``
(DeepSeek, vLLM), ``reasoning`` (OpenRouter, Ollama) or the text entries of OpenRouter's
``reasoning_details``. None of them wants it sent back, so an assistant message's reasoning
stays home. ``ModelRequest.effort`` is sent as ``reasoning_effort``.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import httpx

from .base import (
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
from .retry import retryable_status
from .sse import ServerSentEvent
from .thoughts import Thoughts

log = logging.getLogger(__name__)

_parse = (
    json.JSONDecoder().raw_decode
)  # a chunk's JSON and where it ends, without json.loads' checks
MALFORMED_LOGGED = 3  # malformed events of one response logged; the others are skipped quietly


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif m.role == "user" and m.images:
            out.append({"role": "user", "content": _with_images(m.content, m.images)})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _with_images(text: str, images: tuple[Image, ...]) -> list[dict[str, Any]]:
    """A user message's content as parts: its text, then each image as a data URL."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for image in images:
        data = base64.b64encode(image.data).decode("ascii")
        url = f"data:{image.mime_type};base64,{data}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": parameters_schema(t),
            },
        }
        for t in tools
    ]


class OpenAIProvider(HttpProvider):
    """Chat Completions with ``stream: true``; tool-call arguments are joined by ``index``."""

    def __init__(
        self, http: HttpSettings, name: str = "openai", extra_headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(http, name)
        self.extra_headers = extra_headers or {}

    def path(self) -> str:
        return "/chat/completions"

    def headers(self) -> dict[str, str]:
        headers = {**self.extra_headers}
        if self.http.api_key:
            headers["Authorization"] = f"Bearer {self.http.api_key}"
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            # OpenAI's reasoning models refuse ``max_tokens``; the servers that copy the
            # format do not all know its successor.
            key = "max_completion_tokens" if self._is_openai() else "max_tokens"
            body[key] = request.max_tokens
        if request.effort is not None:
            body["reasoning_effort"] = request.effort
        return body

    def _is_openai(self) -> bool:
        try:
            return httpx.URL(self.http.base_url).host == "api.openai.com"
        except httpx.InvalidURL:
            return False

    def decoder(self) -> ChatDecoder:
        return ChatDecoder(self.http, self.name)


class ChatDecoder:
    """One response's chunks: text and reasoning as they come; the whole reasoning, tool calls,
    usage and the stop at the end. ``provider`` names the provider the reasoning is from."""

    def __init__(self, http: HttpSettings, provider: str = "openai") -> None:
        self.http = http
        self.provider = provider
        self.calls: dict[int, PartialCall] = {}
        self.taken = CallBytes(http.step_limit)
        self.thoughts = Thoughts(http.step_limit)
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self.malformed = 0

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def feed(self, sse: ServerSentEvent) -> list[ProviderEvent]:
        data = sse.data
        if data[:1] != "{":
            data = data.strip()
            if not data:
                return []
            if data == "[DONE]":
                self.done = True
                return []
        try:
            chunk, end = _parse(data)
            if end != len(data) and data[end:].strip():
                raise ValueError("text after the JSON value")
        except ValueError:
            self._skip("a malformed event", data)
            return []
        if type(chunk) is not dict:
            self._skip("an event that is not an object", data)
            return []
        if sse.event == "error" or chunk.get("error"):
            raise _stream_error(chunk.get("error") or chunk, self.http)
        usage = chunk.get("usage")
        if type(usage) is dict:
            self.usage = _usage(usage)
        choices = chunk.get("choices")
        if not choices or type(choices) is not list:
            return []
        events: list[ProviderEvent] = []
        for choice in choices:
            if type(choice) is not dict or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if type(delta) is dict:
                thought = _reasoning_piece(delta)
                if thought:
                    events.append(self.thoughts.add(thought))
                content = delta.get("content")
                if content and type(content) is str:
                    events.append(TextDelta(content))
                parts = delta.get("tool_calls")
                if parts and type(parts) is list:
                    for part in parts:
                        if type(part) is dict:
                            self._merge(part)
            reason = choice.get("finish_reason")
            if type(reason) is str:
                self.finish_reason = reason
        return events

    def _merge(self, part: dict[str, Any]) -> None:
        index = part.get("index")
        if not isinstance(index, int):
            # Without an index, a new id starts a new call and anything else continues one.
            known = {c.id for c in self.calls.values()}
            if not self.calls or (part.get("id") and part["id"] not in known):
                index = max(self.calls, default=-1) + 1
            else:
                index = max(self.calls)
        call = self.calls.get(index)
        if call is None:
            self.taken.take(CALL_COST)
            call = self.calls[index] = PartialCall()
        _add_piece(call, part, self.taken)

    def _skip(self, what: str, data: str) -> None:
        """Log the first few events skipped; a stream of them costs no log line each."""
        self.malformed += 1
        if self.malformed <= MALFORMED_LOGGED:
            log.warning(
                "skipping %s from %s: %s", what, self.http.base_url, self.http.redact(data[:200])
            )

    def close(self) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        if self.thoughts.pieces:
            # Nothing to send back: these servers want the reasoning left out of the history.
            events.append(ReasoningDone(Reasoning(self.provider, self.thoughts.text)))
        events += [ToolCallRequested(self.calls[i].finish()) for i in sorted(self.calls)]
        events.append(self.usage or Usage(None, None, None))
        reason = self.finish_reason or "stop"
        if reason == "function_call" or (self.calls and reason == "stop"):
            reason = "tool_calls"
        events.append(Stop(reason))
        return events


def _reasoning_piece(delta: dict[str, Any]) -> str:
    """The reasoning a delta carries, from the first of the fields that has some: a server
    sending ``reasoning`` and ``reasoning_details`` sends the same text in both."""
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if isinstance(value, str) and value:
            return value
    details = delta.get("reasoning_details")
    if not isinstance(details, list):
        return ""
    pieces = []
    for detail in details:
        entry = as_object(detail)
        # ``reasoning.text`` holds the text, ``reasoning.summary`` a summary of it;
        # ``reasoning.encrypted`` holds nothing a person can read.
        for key in ("text", "summary"):
            value = entry.get(key)
            if isinstance(value, str):
                pieces.append(value)
                break
    return "".join(pieces)


def _add_piece(call: PartialCall, part: dict[str, Any], taken: CallBytes) -> None:
    if isinstance(part.get("id"), str) and part["id"]:
        call.id = part["id"]
    function = as_object(part.get("function"))
    name = function.get("name")
    # The name comes once; some servers repeat it in every piece.
    if isinstance(name, str) and name and name != call.name:
        taken.take(len(name))
        call.add_name(name)
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # a few servers send the object itself
        text = json.dumps(arguments)
        taken.take(len(text))
        call.replace(text)
    elif isinstance(arguments, str):
        taken.take(len(arguments))
        call.add(arguments)


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = as_object(raw.get("prompt_tokens_details"))
    completion = as_object(raw.get("completion_tokens_details"))
    return Usage(
        input=_count(raw.get("prompt_tokens")),
        output=_count(raw.get("completion_tokens")),
        cached=_count(prompt.get("cached_tokens")),
        reasoning=_count(completion.get("reasoning_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _stream_error(error: Any, http: HttpSettings) -> ProviderError:
    message = (error.get("message") or json.dumps(error)) if isinstance(error, dict) else error
    code = error.get("code") if isinstance(error, dict) else None
    return ProviderError(
        f"the provider at {http.base_url} reported an error mid-stream: {message}",
        retryable=isinstance(code, int) and retryable_status(code),
        too_long=says_too_long(json.dumps(error)),
    )
