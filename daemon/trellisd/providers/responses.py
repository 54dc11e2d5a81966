"""OpenAI Responses over SSE (``POST {base_url}/responses`` with ``stream: true``).

The conversation goes out as ``input`` items: the leading system messages as ``instructions``
(a later one as a ``system`` message in its place), a user message's text as ``input_text``
and its images as ``input_image`` data URLs, the assistant's text as an assistant message and
its tool calls as ``function_call`` items, tool results as ``function_call_output`` items with
the same ``call_id``. Nothing is kept on the server (``store: false``): with an effort set,
the request asks for the reasoning's encrypted content, and the ``reasoning`` items a call
produced come back in ``Reasoning.items``, to be sent again, unchanged, before the assistant's
output in later calls (and to no other wire).

Events: ``response.output_text.delta`` is text, ``response.reasoning_summary_text.delta`` a
piece of the reasoning's summary; a function call starts with ``response.output_item.added``,
takes its arguments from ``response.function_call_arguments.delta`` (whole in ``.done``) and
is requested when its item is done. ``response.completed`` (or ``response.incomplete``) ends
the call with its usage; ``response.failed`` and ``error`` end it with a ``ProviderError``.

Token figures: ``input_tokens`` already counts the tokens read from the prompt cache, as the
Chat Completions' ``prompt_tokens`` does, so ``Usage.input`` is ``input_tokens``,
``Usage.cached`` is ``input_tokens_details.cached_tokens`` and ``Usage.reasoning``
``output_tokens_details.reasoning_tokens``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .base import (
    Message,
    ModelRequest,
    ProviderError,
    ProviderEvent,
    Reasoning,
    ReasoningDone,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
    says_too_long,
)
from .calls import CALL_COST, CallBytes, PartialCall, as_object, parameters_schema
from .http import EventObjects, HttpSettings
from .http_provider import HttpProvider
from .sse import ServerSentEvent

NAME = "openai-responses"
INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}
# The codes of a failed response that another attempt may not meet.
RETRYABLE_CODES = frozenset({"server_error", "rate_limit_exceeded", "overloaded"})


def to_responses_input(
    messages: list[Message], provider: str = NAME
) -> tuple[str | None, list[dict[str, Any]]]:
    """The ``instructions`` and the ``input`` items of a request. An assistant message's
    reasoning items go out only when ``provider`` made them."""
    leading: list[str] = []
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if not items:
                if m.content:
                    leading.append(m.content)
            elif m.content:
                items.append({"type": "message", "role": "system", "content": m.content})
        elif m.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
        elif m.role == "assistant":
            if m.reasoning is not None and m.reasoning.provider == provider:
                items += [dict(item) for item in m.reasoning.items]
            if m.content:
                items.append({"type": "message", "role": "assistant", "content": m.content})
            items += [
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": json.dumps(c.arguments),
                }
                for c in m.tool_calls
            ]
        else:
            parts: list[dict[str, Any]] = []
            if m.content:
                parts.append({"type": "input_text", "text": m.content})
            parts += [
                {
                    "type": "input_image",
                    "image_url": f"data:{image.mime_type};base64,"
                    + base64.b64encode(image.data).decode("ascii"),
                    "detail": "auto",
                }
                for image in m.images
            ]
            if parts:
                items.append({"type": "message", "role": "user", "content": parts})
    return ("\n\n".join(leading) or None), items


def to_responses_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": parameters_schema(t),
            "strict": False,  # a strict schema must list every property as required
        }
        for t in tools
    ]


class ResponsesProvider(HttpProvider):
    """The Responses API with ``stream: true`` and ``store: false``."""

    def __init__(self, http: HttpSettings, name: str = NAME) -> None:
        super().__init__(http, name)

    def path(self) -> str:
        return "/responses"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.http.api_key}"} if self.http.api_key else {}

    def body(self, request: ModelRequest) -> dict[str, Any]:
        instructions, items = to_responses_input(request.messages, self.name)
        body: dict[str, Any] = {
            "model": self.model,
            "input": items,
            "stream": True,
            "store": False,
        }
        if instructions is not None:
            body["instructions"] = instructions
        if request.tools:
            body["tools"] = to_responses_tools(request.tools)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.effort is not None:
            body["reasoning"] = {"effort": request.effort, "summary": "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        return body

    def decoder(self) -> ResponsesDecoder:
        return ResponsesDecoder(self.http, self.name)


class ResponsesDecoder:
    """One response's events: text and the reasoning's summary as they come, each function
    call when its item is done; the reasoning, usage and stop at the end."""

    def __init__(self, http: HttpSettings, provider: str = NAME) -> None:
        self.http = http
        self.provider = provider
        self.calls: dict[int, PartialCall] = {}  # by output index, until their item is done
        self.called = False
        self.taken = CallBytes(http.step_limit)
        self.summaries: list[str] = []  # the reasoning's summary, a text per part
        self.part: tuple[Any, Any] | None = None  # the part the last summary text was of
        self.streamed: set[str] = set()  # the reasoning items whose summary streamed
        self.reasoning_items: list[dict[str, Any]] = []
        self.reasoned = False
        self.usage: Usage | None = None
        self.reason: str | None = None
        self.objects = EventObjects(http)

    @property
    def done(self) -> bool:
        return self.reason is not None

    @property
    def complete(self) -> bool:
        return self.reason is not None

    def feed(self, sse: ServerSentEvent) -> list[ProviderEvent]:
        data = self.objects.read(sse)
        if data is None:
            return []
        kind = data.get("type")
        handler = _HANDLERS.get(kind if isinstance(kind, str) else sse.event)
        if handler is None:
            return []  # the many events that repeat what the others say
        return handler(self, data)

    def _text(self, data: dict[str, Any]) -> list[ProviderEvent]:
        delta = data.get("delta")
        return [TextDelta(delta)] if isinstance(delta, str) and delta else []

    def _thought(self, data: dict[str, Any]) -> list[ProviderEvent]:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        item = data.get("item_id")
        if isinstance(item, str):
            self.streamed.add(item)
        return self._summary((item, data.get("summary_index")), delta)

    def _summary(self, part: tuple[Any, Any], text: str) -> list[ProviderEvent]:
        """``text`` added to the summary's ``part`` (a reasoning item's summary, by index);
        a new part starts a paragraph of its own."""
        self.reasoned = True
        events: list[ProviderEvent] = []
        if part != self.part or not self.summaries:
            if self.summaries:
                events.append(ThoughtDelta("\n\n"))
            self.summaries.append("")
            self.part = part
        self.summaries[-1] += text
        events.append(ThoughtDelta(text))
        return events

    def _item_added(self, data: dict[str, Any]) -> list[ProviderEvent]:
        item = as_object(data.get("item"))
        if item.get("type") == "function_call":
            call = PartialCall(id=str(item.get("call_id") or ""))
            call.add_name(str(item.get("name") or ""))
            self.taken.take(CALL_COST + len(call.name))
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments:
                self.taken.take(len(arguments))
                call.add(arguments)
            self.calls[_index(data)] = call
        return []

    def _arguments(self, data: dict[str, Any]) -> list[ProviderEvent]:
        call = self.calls.get(_index(data))
        delta = data.get("delta")
        if call is not None and isinstance(delta, str):
            self.taken.take(len(delta))
            call.add(delta)
        return []

    def _arguments_done(self, data: dict[str, Any]) -> list[ProviderEvent]:
        call = self.calls.get(_index(data))
        arguments = data.get("arguments")
        if call is not None and isinstance(arguments, str) and arguments != call.arguments:
            self.taken.take(len(arguments))
            call.replace(arguments)
        return []

    def _item_done(self, data: dict[str, Any]) -> list[ProviderEvent]:
        item = as_object(data.get("item"))
        kind = item.get("type")
        if kind == "function_call":
            call = self.calls.pop(_index(data), None)
            if call is None:  # its item was never announced: it comes whole here
                call = PartialCall()
                self.taken.take(CALL_COST)
            if isinstance(item.get("call_id"), str) and item["call_id"]:
                call.id = item["call_id"]
            if not call.name and isinstance(item.get("name"), str):
                self.taken.take(len(item["name"]))
                call.add_name(item["name"])
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments != call.arguments:
                self.taken.take(len(arguments))
                call.replace(arguments)
            self.called = True
            return [ToolCallRequested(call.finish())]
        if kind == "reasoning":
            self.reasoned = True
            return self._keep_reasoning(item)
        return []

    def _keep_reasoning(self, item: dict[str, Any]) -> list[ProviderEvent]:
        """Keep a finished reasoning item to send back, and its summary, when that did not
        stream. An item without its encrypted content cannot be sent back (the server keeps
        nothing): only its summary is kept. A null field is left out, as a request may not
        carry one."""
        if isinstance(item.get("encrypted_content"), str) and item["encrypted_content"]:
            self.reasoning_items.append({k: v for k, v in item.items() if v is not None})
        streamed = isinstance(item.get("id"), str) and item["id"] in self.streamed
        if streamed or not isinstance(item.get("summary"), list):
            return []
        events: list[ProviderEvent] = []
        for index, part in enumerate(item["summary"]):
            text = as_object(part).get("text")
            if isinstance(text, str) and text:
                events += self._summary((item.get("id"), index), text)
        return events

    def _finished(self, data: dict[str, Any]) -> list[ProviderEvent]:
        response = as_object(data.get("response"))
        self.usage = _usage(as_object(response.get("usage")))
        status = response.get("status")
        if data.get("type") == "response.incomplete" or status == "incomplete":
            reason = as_object(response.get("incomplete_details")).get("reason")
            word = reason if isinstance(reason, str) and reason else "incomplete"
            self.reason = INCOMPLETE_REASONS.get(word, word)
        else:
            self.reason = "stop"
        return []

    def _failed(self, data: dict[str, Any]) -> list[ProviderEvent]:
        raise self._error(as_object(as_object(data.get("response")).get("error")))

    def _error_event(self, data: dict[str, Any]) -> list[ProviderEvent]:
        raise self._error(as_object(data.get("error")) or data)

    def _error(self, error: dict[str, Any]) -> ProviderError:
        code = error.get("code") if isinstance(error.get("code"), str) else None
        message = error.get("message") if isinstance(error.get("message"), str) else None
        words = ": ".join(part for part in (code, message) if part) or "no details"
        return ProviderError(
            f"the provider at {self.http.base_url} reported an error mid-stream: {words}",
            retryable=code in RETRYABLE_CODES,
            too_long=says_too_long(words),
        )

    def close(self) -> list[ProviderEvent]:
        events: list[ProviderEvent] = [
            ToolCallRequested(self.calls[i].finish()) for i in sorted(self.calls)
        ]
        called = self.called or bool(self.calls)
        self.calls.clear()
        if self.reasoned:
            text = "\n\n".join(part for part in self.summaries if part)
            reasoning = Reasoning(self.provider, text, tuple(self.reasoning_items))
            events.append(ReasoningDone(reasoning))
        events.append(self.usage or Usage(None, None))
        reason = self.reason or "stop"
        events.append(Stop("tool_calls" if called and reason == "stop" else reason))
        return events


def _index(data: dict[str, Any]) -> int:
    index = data.get("output_index")
    return index if isinstance(index, int) else -1


def _usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        input=_count(raw.get("input_tokens")),
        output=_count(raw.get("output_tokens")),
        cached=_count(as_object(raw.get("input_tokens_details")).get("cached_tokens")),
        reasoning=_count(as_object(raw.get("output_tokens_details")).get("reasoning_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_HANDLERS = {
    "response.output_text.delta": ResponsesDecoder._text,
    "response.refusal.delta": ResponsesDecoder._text,
    "response.reasoning_summary_text.delta": ResponsesDecoder._thought,
    "response.output_item.added": ResponsesDecoder._item_added,
    "response.function_call_arguments.delta": ResponsesDecoder._arguments,
    "response.function_call_arguments.done": ResponsesDecoder._arguments_done,
    "response.output_item.done": ResponsesDecoder._item_done,
    "response.completed": ResponsesDecoder._finished,
    "response.incomplete": ResponsesDecoder._finished,
    "response.failed": ResponsesDecoder._failed,
    "error": ResponsesDecoder._error_event,
}
