"""One golden file per ACP message ``trellisd acp`` reads or writes (``tests/golden/acp/``),
round-tripped through its type in ``trellisd.acp.wire``: structured from the JSON and written
back, nothing is lost or added. Each is checked against the ACP schema the TypeScript SDK
ships, and what the agent writes is compared with what its code produces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests import acp_schema
from trellisd import __version__
from trellisd.acp import hello, notifier, updates, wire
from trellisd.commands import parse
from trellisd.convert import structure, unstructure
from trellisd.plans import PlanEntry
from trellisd.records import ToolCall
from trellisd.services.images import ImageInput
from trellisd.vocabulary import PlanStatus

GOLDEN = Path(__file__).parents[2] / "golden" / "acp"

MESSAGES: dict[str, tuple[Any, str]] = {
    "initialize.request": (wire.Initialize, "InitializeRequest"),
    "initialize.response": (wire.InitializeResult, "InitializeResponse"),
    "authenticate.request": (wire.Authenticate, "AuthenticateRequest"),
    "session_new.request": (wire.NewSession, "NewSessionRequest"),
    "session_new.response": (wire.NewSessionResult, "NewSessionResponse"),
    "session_load.request": (wire.LoadSession, "LoadSessionRequest"),
    "session_load.response": (wire.SessionState, "LoadSessionResponse"),
    "session_resume.request": (wire.ResumeSession, "ResumeSessionRequest"),
    "session_resume.response": (wire.SessionState, "ResumeSessionResponse"),
    "session_fork.request": (wire.ForkSession, "ForkSessionRequest"),
    "session_fork.response": (wire.NewSessionResult, "ForkSessionResponse"),
    "session_list.request": (wire.ListSessions, "ListSessionsRequest"),
    "session_list.response": (wire.ListSessionsResult, "ListSessionsResponse"),
    "session_close.request": (wire.CloseSession, "CloseSessionRequest"),
    "session_close.response": (wire.Empty, "CloseSessionResponse"),
    "session_set_mode.request": (wire.SetSessionMode, "SetSessionModeRequest"),
    "session_set_mode.response": (wire.Empty, "SetSessionModeResponse"),
    "session_set_config_option.request": (wire.SetConfigOption, "SetSessionConfigOptionRequest"),
    "session_set_config_option.boolean.request": (
        wire.SetConfigOption,
        "SetSessionConfigOptionRequest",
    ),
    "session_set_config_option.response": (wire.ConfigOptions, "SetSessionConfigOptionResponse"),
    "session_prompt.request": (wire.Prompt, "PromptRequest"),
    "session_prompt.response": (wire.PromptResult, "PromptResponse"),
    "session_cancel.notification": (wire.Cancel, "CancelNotification"),
    "session_update.user_message_chunk": (wire.SessionNotification, "SessionNotification"),
    "session_update.agent_message_chunk": (wire.SessionNotification, "SessionNotification"),
    "session_update.agent_thought_chunk": (wire.SessionNotification, "SessionNotification"),
    "session_update.tool_call": (wire.SessionNotification, "SessionNotification"),
    "session_update.tool_call_update": (wire.SessionNotification, "SessionNotification"),
    "session_update.current_mode_update": (wire.SessionNotification, "SessionNotification"),
    "session_update.plan": (wire.SessionNotification, "SessionNotification"),
    "session_update.usage_update": (wire.SessionNotification, "SessionNotification"),
    "session_update.session_info_update": (wire.SessionNotification, "SessionNotification"),
    "session_update.available_commands_update": (
        wire.SessionNotification,
        "SessionNotification",
    ),
    "session_request_permission.request": (wire.RequestPermission, "RequestPermissionRequest"),
    "session_request_permission.response": (wire.PermissionAnswer, "RequestPermissionResponse"),
    "session_request_permission.cancelled.response": (
        wire.PermissionAnswer,
        "RequestPermissionResponse",
    ),
    "fs_read_text_file.request": (wire.ReadTextFile, "ReadTextFileRequest"),
    "fs_read_text_file.response": (wire.FileText, "ReadTextFileResponse"),
    "fs_write_text_file.request": (wire.WriteTextFile, "WriteTextFileRequest"),
}
"""Each golden file's type, and the message's definition in the ACP schema."""


def golden(name: str) -> Any:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def test_every_golden_file_has_its_message_and_every_message_its_file() -> None:
    assert sorted(p.name.removesuffix(".json") for p in GOLDEN.glob("*.json")) == sorted(MESSAGES)


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_a_golden_message_round_trips_through_its_type(name: str) -> None:
    kind, _ = MESSAGES[name]
    raw = golden(name)
    assert unstructure(structure(raw, kind)) == raw


@pytest.mark.skipif(not acp_schema.available(), reason=acp_schema.MISSING)
@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_a_golden_message_fits_the_acp_schema(name: str) -> None:
    _, definition = MESSAGES[name]
    errors = list(_validator(definition).iter_errors(golden(name)))
    assert not errors, f"{name} does not fit {definition}: {errors[0].message}"


def _validator(definition: str) -> Any:
    schema = json.loads(acp_schema.SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


SID = "3f0c9a6e1b2d4c5f8a7e6d5c4b3a2918"
WRITE = ToolCall("", "write_file", {"path": "app.py", "text": "def app():\n    return 2\n"})
WRITTEN = updates.tool_diff_content(
    "/home/me/project/app.py", "def app():\n    return 2\n", "def app():\n    return 1\n"
)
RESULT = "1 passed in 0.01s"
PLAN = (
    PlanEntry("Read the failing test", PlanStatus.COMPLETED),
    PlanEntry("Fix app()", PlanStatus.IN_PROGRESS, "high"),
    PlanEntry("Run the tests", PlanStatus.PENDING, "low"),
)
UPDATES: dict[str, updates.Update] = {
    "user_message_chunk": updates.user_text("Why does this test fail?"),
    "agent_message_chunk": updates.agent_text("Let me read it. "),
    "agent_thought_chunk": updates.agent_thought("The test expects 2; app() returns 1. "),
    "tool_call": updates.announced("7d1e2f3a", 2, WRITE, [WRITTEN]),
    "tool_call_update": updates.tool_call_update(
        "7d1e2f3a/3",
        status="completed",
        content=[updates.tool_content(updates.text_block(RESULT))],
        raw_output=RESULT,
    ),
    "current_mode_update": updates.current_mode("auto"),
    "plan": updates.plan(PLAN),
    "usage_update": updates.usage_update(1200, 128000, 0.0042),
    "session_info_update": updates.info("Fix the failing test", "2026-12-06T07:00:00Z"),
    "available_commands_update": updates.available_commands(
        [
            parse(
                "fix-tests",
                "user",
                b"---\ndescription: Make the tests pass\nargument-hint: [test path]\n---\nFix.",
            ),
            parse("review", "project", b"Review."),
        ]
    ),
}


@pytest.mark.parametrize("kind", sorted(UPDATES))
def test_the_updates_the_agent_sends_are_the_golden_ones(kind: str) -> None:
    sent = unstructure(wire.SessionNotification(SID, UPDATES[kind]))
    assert sent == golden(f"session_update.{kind}")


def test_the_answer_to_initialize_is_the_golden_one() -> None:
    expected = golden("initialize.response")
    expected["agentInfo"]["version"] = __version__
    assert unstructure(hello.capabilities()) == expected


def test_the_permission_asked_and_its_answers_are_the_golden_ones() -> None:
    call = wire.PermissionToolCall("7d1e2f3a/2", "write_file wants to write app.py", "edit")
    asked = wire.RequestPermission(SID, call, notifier.OPTIONS)
    assert unstructure(asked) == golden("session_request_permission.request")
    assert notifier.chosen(golden("session_request_permission.response")) == "allowAlways"
    assert notifier.chosen(golden("session_request_permission.cancelled.response")) is None


def test_a_prompt_of_every_block_type_is_read_as_its_text() -> None:
    prompt = structure(golden("session_prompt.request"), wire.Prompt)
    assert [type(b) for b in prompt.prompt] == [
        wire.TextContent,
        wire.EmbeddedResource,
        wire.EmbeddedResource,
        wire.ResourceLink,
        wire.ImageContent,
        wire.AudioContent,
    ]
    text = wire.prompt_text(prompt.prompt)
    assert text.startswith("Why does this test fail?")
    assert "<context uri='file:///home/me/project/test_app.py'>" in text
    assert "(see file:///home/me/project/app.py)" in text and "iVBOR" not in text
    # The image block is the turn's image; the embedded PNG resource is not an image block.
    assert wire.prompt_images(prompt.prompt) == (
        ImageInput(data="iVBORw0KGgo=", mime_type="image/png"),
    )


def test_the_mcp_servers_of_a_new_session_become_trellisd_servers() -> None:
    new = structure(golden("session_new.request"), wire.NewSession)
    files, search = wire.specs(new.mcp_servers)
    assert (files.command, files.env, files.transport) == ("npx", {"LOG_LEVEL": "info"}, "stdio")
    assert (search.url, search.headers, search.transport) == (
        "https://example.com/mcp",
        {"X-Team": "docs"},
        "http",
    )


TYPES: dict[str, Any] = {definition: kind for kind, definition in MESSAGES.values()}
TYPES |= {"ContentBlock": wire.ContentBlock, "McpServer": wire.AcpMcpServer}


def _examples() -> list[tuple[str, Any]]:
    """The examples the SDK's ACP schema gives of the messages (and their blocks and MCP
    servers) that ``trellisd acp`` reads or writes."""
    if not acp_schema.available():
        return []
    definitions = json.loads(acp_schema.SCHEMA.read_text(encoding="utf-8"))["$defs"]
    return [
        (name, example)
        for name, kind in TYPES.items()
        for example in definitions.get(name, {}).get("examples", [])
    ]


def test_every_example_of_the_acp_schema_is_structured_by_its_type() -> None:
    if not acp_schema.available():
        pytest.skip(acp_schema.MISSING)
    examples = _examples()
    if not examples:
        pytest.skip(f"the ACP schema the SDK ships ({acp_schema.SCHEMA}) gives no examples")
    for name, example in examples:
        structure(example, TYPES[name])
