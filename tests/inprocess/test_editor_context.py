"""Editor context on a prompt: what the editor attaches reaches the model in the documented
framing, is recorded in the step's prompt and the run's trace, and reaches nothing that
``read_file`` could not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.driver import Daemon, events, open_session, turn
from tests.fixtures.model_server import ModelServer

POLICY = {
    "layers": [{"name": "editor", "allowRead": ["**"], "denyRead": ["secrets/**"]}],
    "approval": "all",
}
FRAMED = """<editor-context>
<selection path="src/app.py" lines="2-3">
    y = 2
    z = 3
</selection>
<file path="notes.txt">
unsaved words
</file>
<diagnostics path="src/app.py">
src/app.py:2: unused variable y
</diagnostics>
</editor-context>

what do these lines do?"""


@pytest.fixture
def project(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def f():\n    y = 2\n    z = 3\n    return 1\n")
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.txt").write_text("hunter2\n")
    return workspace


async def test_the_model_is_given_the_context_in_the_documented_framing(
    daemon: Daemon, model: ModelServer, project: Path
) -> None:
    session = await open_session(daemon, project, policy=POLICY)
    model.reply("They set two names.")
    context = [
        {"kind": "selection", "path": "src/app.py", "range": {"startLine": 2, "endLine": 3}},
        {"kind": "file", "path": str(project / "notes.txt"), "text": "unsaved words"},
        {"kind": "diagnostics", "path": "src/app.py", "text": "src/app.py:2: unused variable y"},
    ]
    result = await turn(daemon, session, "what do these lines do?", context=context)

    assert result["outcome"] == "finished"
    assert model.user_messages(0)[-1] == FRAMED
    step = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"][0]
    assert step["prompt"] == FRAMED
    traced = (await events(daemon, result["runId"], "context"))[0]["detail"]["entries"]
    assert [(e["kind"], e["path"], e["readBy"]) for e in traced] == [
        ("selection", "src/app.py", "daemon"),
        ("file", "notes.txt", "editor"),
        ("diagnostics", "src/app.py", "editor"),
    ]
    # The history shows the words the user typed.
    history = await daemon.call("session/history", {"sessionId": session["sessionId"]})
    assert history["turns"][-1]["prompt"] == "what do these lines do?"


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        ({"kind": "file", "path": "../outside.txt"}, "context[0].path", "leads out"),
        ({"kind": "file", "path": "/etc/passwd", "text": "x"}, "context[0].path", "outside"),
        ({"kind": "file", "path": "secrets/key.txt"}, "context[0].path", "refuses reading"),
        ({"kind": "file", "path": "missing.txt"}, "context[0].path", "does not exist"),
        ({"kind": "selection", "path": "src/app.py"}, "context[0].range", "its range"),
        ({"kind": "diagnostics", "path": "src/app.py"}, "context[0].text", "need their text"),
        (
            {"kind": "file", "path": "a", "text": "x" * (256 * 1024 + 1)},
            "context[0].text",
            "at most",
        ),
        ({"kind": "folder", "path": "src"}, "context[0].kind", "not valid"),
        (
            {"kind": "file", "path": "src/app.py", "range": {"startLine": 3, "endLine": 2}},
            "context[0].range",
            "context[0].range needs 1 <= startLine <= endLine",
        ),
    ],
)
async def test_bad_context_is_refused_before_the_turn_starts(
    daemon: Daemon,
    model: ModelServer,
    project: Path,
    entry: dict[str, object],
    field: str,
    words: str,
) -> None:
    (project.parent / "outside.txt").write_text("private")
    session = await open_session(daemon, project, policy=POLICY)
    params = {"sessionId": session["sessionId"], "prompt": "look", "context": [entry]}
    error = await daemon.error("session/turn", params)
    assert error.code == -32602
    assert words in error.message
    assert field in str(error.data)
    assert model.requests == []
    assert (await daemon.call("session/history", {"sessionId": session["sessionId"]}))[
        "turns"
    ] == []


async def test_a_resumed_turn_sends_its_context_again(
    daemon: Daemon, model: ModelServer, project: Path
) -> None:
    session = await open_session(daemon, project, policy=POLICY)
    model.reply("", tool_calls=[{"name": "list_dir", "arguments": {}}])
    model.reply("Seen.")
    context = [{"kind": "file", "path": "notes.txt", "text": "unsaved words"}]
    paused = await turn(daemon, session, "look", context=context, stepMode=True)
    assert paused["outcome"] == "paused"

    resumed = await daemon.call(
        "session/resume", {"sessionId": session["sessionId"], "turnId": paused["turnId"]}
    )
    assert resumed["outcome"] == "finished"
    framed = '<editor-context>\n<file path="notes.txt">\nunsaved words\n</file>\n</editor-context>'
    assert model.user_messages(-1)[0] == framed + "\n\nlook"
