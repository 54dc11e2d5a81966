"""OpenAI-compatible Chat Completions over SSE: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from ..store.records import ToolCall
from .base import (
    Message,
    ModelRequest,
    ProviderError,
    ProviderEvent,
    Stop,
    TextDelta,
    ToolCallRequested,
    Usage,
)
from .http import HttpSettings, explain_status, transport_error

log = logging.getLogger(__name__)


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
        else:
            out.append({"role": m.role, "content": m.content})
    return out


class OpenAIProvider:
    """Chat Completions with ``stream: true``; tool-call arguments are joined by ``index``."""

    def __init__(
        self, http: HttpSettings, name: str = "openai", extra_headers: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.model = http.model
        self.http = http
        self.extra_headers = extra_headers or {}

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        headers = {**self.extra_headers}
        if self.http.api_key:
            headers["Authorization"] = f"Bearer {self.http.api_key}"
        url = self.http.base_url.rstrip("/") + "/chat/completions"
        calls: dict[int, dict[str, Any]] = {}
        stop = "stop"
        usage: Usage | None = None
        try:
            async with httpx.AsyncClient(timeout=self.http.timeout()) as client:
                async with aconnect_sse(
                    client, "POST", url, json=self.body(request), headers=headers
                ) as source:
                    response = source.response
                    if response.status_code != 200:
                        await response.aread()
                        raise ProviderError(
                            explain_status(response, self.http), response.status_code
                        )
                    async for sse in source.aiter_sse():
                        if sse.data.strip() == "[DONE]":
                            break
                        try:
                            chunk = json.loads(sse.data)
                        except ValueError:
                            log.warning("skipping a malformed SSE data line from %s", url)
                            continue
                        if not isinstance(chunk, dict):
                            continue
                        if chunk.get("error"):
                            raise ProviderError(
                                f"{self.name} reported an error mid-stream:"
                                f" {_error_text(chunk['error'])}"
                            )
                        if chunk.get("usage"):
                            usage = _usage(chunk["usage"])
                        for choice in chunk.get("choices") or []:
                            delta = choice.get("delta") or {}
                            if delta.get("content"):
                                yield TextDelta(delta["content"])
                            for part in delta.get("tool_calls") or []:
                                _merge_call(calls, part)
                            if choice.get("finish_reason"):
                                stop = choice["finish_reason"]
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.http) from exc
        for index in sorted(calls):
            yield ToolCallRequested(_finish_call(calls[index]))
        yield usage or Usage(None, None, None)
        yield Stop(stop)


def _merge_call(calls: dict[int, dict[str, Any]], part: dict[str, Any]) -> None:
    slot = calls.setdefault(int(part.get("index", 0)), {"id": "", "name": "", "arguments": ""})
    if part.get("id"):
        slot["id"] = part["id"]
    function = part.get("function") or {}
    if function.get("name"):
        slot["name"] += function["name"]
    if function.get("arguments"):
        slot["arguments"] += function["arguments"]


def _finish_call(slot: dict[str, Any]) -> ToolCall:
    try:
        arguments = json.loads(slot["arguments"]) if slot["arguments"].strip() else {}
    except ValueError:
        arguments = {"_unparsed": slot["arguments"]}
    if not isinstance(arguments, dict):
        arguments = {"_unparsed": slot["arguments"]}
    return ToolCall(id=slot["id"] or f"call-{slot['name']}", name=slot["name"], arguments=arguments)


def _usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input=raw.get("prompt_tokens"),
        output=raw.get("completion_tokens"),
        cached=details.get("cached_tokens"),
    )


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
