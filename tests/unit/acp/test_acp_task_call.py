"""A ``task`` call (a child session) as ACP shows it: a ``think`` call titled with the
child's prompt, whose content is the child's reply."""

from __future__ import annotations

from trellisd.acp import updates
from trellisd.acp import wire as acp_wire
from trellisd.records import Step, Tokens, ToolCall

CALL = ToolCall("call_0", "task", {"prompt": "count the files"})


def test_a_task_call_is_a_think_call_titled_with_its_prompt() -> None:
    update = updates.announced("r-1", 2, CALL, [])

    assert isinstance(update, acp_wire.ToolCallStart)
    assert update.kind == "think" and update.title == "task count the files"


def test_a_finished_task_call_shows_the_childs_reply() -> None:
    step = Step(2, "tool", None, "", CALL, "There are two files.", Tokens(0, 0, 0))

    update = updates.finished("r-1", step, updates.result_content(step, [], "/w"), known=False)

    assert isinstance(update, acp_wire.ToolCallStart)
    assert update.kind == "think" and update.status == "completed"
    assert update.content == (updates.tool_content(updates.text_block("There are two files.")),)
