"""trellisd's records as ACP updates: stop reasons, tool calls and their content, a turn's
replay and the session's usage, each checked against the ACP schema's shape."""

from __future__ import annotations

from typing import Any

from acp import schema

from trellisd.acp import updates
from trellisd.acp import wire as acp_wire
from trellisd.convert import structure, unstructure
from trellisd.daemon_settings import acp_context_window
from trellisd.records import Step, Tokens, ToolCall, Turn
from trellisd.services.changes import StepEdit
from trellisd.services.running import LiveCall
from trellisd.vocabulary import Outcome


def wire(value: Any) -> dict[str, Any]:
    """An update or a tool call's content as sent, after checking it is the shape the ACP
    SDK's type for it reads."""
    update: dict[str, Any] = unstructure(value)
    typed: Any
    if "sessionUpdate" in update:
        notification = {"sessionId": "s1", "update": update}
        typed = schema.SessionNotification.model_validate(notification).update
    else:  # a tool call's content
        call = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [update]}
        [typed] = schema.ToolCallProgress.model_validate(call).content or []
    assert typed.model_dump(by_alias=True, exclude_none=True) == update
    return update


def turn(prompt: str = "p", reply: str = "", model: str | None = "gpt-4o") -> Turn:
    return Turn(
        "t1", "s1", None, "r1", prompt, reply, "finished", None, Tokens(10, 5, 0), "", model
    )


def test_every_ended_outcome_but_error_has_a_stop_reason() -> None:
    assert updates.STOP_REASONS[Outcome.FINISHED] == "end_turn"
    assert updates.STOP_REASONS[Outcome.SUCCESS] == "end_turn"
    assert updates.STOP_REASONS[Outcome.EXHAUSTED] == "max_turn_requests"
    assert updates.STOP_REASONS[Outcome.CANCELLED] == "cancelled"
    assert Outcome.ERROR not in updates.STOP_REASONS


def test_a_written_file_is_a_diff_and_another_result_is_text() -> None:
    call = ToolCall("c", "write_file", {"path": "a.txt", "content": "new\n"})
    step = Step(2, "tool", None, "", call, "wrote a.txt", Tokens())
    edits = [StepEdit(2, "a.txt", "old\n", "new\n"), StepEdit(3, "b.txt", None, "x")]
    [diff] = updates.result_content(step, edits, "/w")
    assert wire(diff) == {
        "type": "diff",
        "path": "/w/a.txt",
        "oldText": "old\n",
        "newText": "new\n",
    }
    read = Step(1, "tool", None, "", ToolCall("c", "read_file", {"path": "a"}), "text", Tokens())
    [content] = updates.result_content(read, edits, "/w")
    assert wire(content) == {"type": "content", "content": {"type": "text", "text": "text"}}


def test_a_refused_or_failing_tool_call_is_failed() -> None:
    call = ToolCall("c", "run_command", {"argv": ["make"]})
    for result, status in (
        ("refused: the user did not approve", "failed"),
        ("error: no such file", "failed"),
        ("ok", "completed"),
    ):
        step = Step(1, "tool", None, "", call, result, Tokens())
        out = wire(updates.finished("r1", step, [], known=False))
        assert out["status"] == status and out["toolCallId"] == "r1/1"
        assert out["kind"] == "execute" and out["title"] == "run_command make"


def test_a_turn_replays_as_it_was_seen_live() -> None:
    steps = [
        Step(
            1, "tool", "p", "let me look", ToolCall("c", "list_dir", {"path": "."}), "a", Tokens()
        ),
        Step(2, "reply", "a steer", "done", None, None, Tokens()),
    ]
    kinds = [wire(u)["sessionUpdate"] for u in updates.replayed(turn(), steps, [], "/w")]
    assert kinds == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "user_message_chunk",
        "agent_message_chunk",
    ]


def test_usage_is_the_last_call_and_the_cost_of_known_models() -> None:
    out = wire(updates.usage([turn(), turn(model="unknown-model")], 1234, 8000))
    assert out["used"] == 1234 and out["size"] == 8000
    assert out["cost"]["currency"] == "USD" and out["cost"]["amount"] > 0
    assert "cost" not in wire(updates.usage([turn(model=None)], None, 8000))


def test_context_window_comes_from_the_environment() -> None:
    assert acp_context_window({"TRELLISD_CONTEXT_WINDOW": "200000"}) == 200000
    assert acp_context_window({"TRELLISD_CONTEXT_WINDOW": "lots"}) == 128_000


def test_prompt_blocks_become_the_prompt_text() -> None:
    blocks = [
        schema.TextContentBlock(type="text", text="fix it"),
        schema.EmbeddedResourceContentBlock(
            type="resource", resource=schema.TextResourceContents(uri="file:///a.py", text="x=1")
        ),
        schema.ResourceContentBlock(type="resource_link", uri="file:///b.py", name="b.py"),
    ]
    raw = [b.model_dump(by_alias=True, exclude_none=True) for b in blocks]
    prompt = structure({"sessionId": "s", "prompt": raw}, acp_wire.Prompt)
    text = acp_wire.prompt_text(prompt.prompt)
    assert text.startswith("fix it") and "x=1" in text and "file:///b.py" in text


def test_a_call_in_flight_is_a_tool_call_with_its_status_and_output_so_far() -> None:
    argv = {"argv": ["make"]}
    running = LiveCall(2, "call_1", "run_command", argv, "running")
    writing = LiveCall(3, "call_2", "write_file", {"path": "a.txt"}, "proposed")
    diff = [updates.tool_diff_content("/w/a.txt", "new")]

    shown = wire(updates.in_flight("r1", running, "halfway\n", diff))
    proposed = wire(updates.in_flight("r1", writing, "", diff))

    assert shown["toolCallId"] == "r1/2" and shown["status"] == "in_progress"
    assert shown["kind"] == "execute" and shown["title"] == "run_command make"
    assert shown["content"] == [unstructure(updates.tool_content(updates.text_block("halfway\n")))]
    assert proposed["status"] == "pending" and proposed["content"] == unstructure(diff)
