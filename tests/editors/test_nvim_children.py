"""Child sessions (the ``task`` tool) in real headless Neovims (0.7 and 0.11): a child drawn
under its parent's ``task`` call as it streams and when it ends, listed under its parent and
opened as a session of its own, and its approval asked naming it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

try:
    from .test_nvim import Start, nvim_bin, start  # noqa: F401 (fixtures)
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_nvim import Start, nvim_bin, start  # type: ignore[no-redef]  # noqa: F401

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

TASKS: dict[str, Any] = {"task": {"enabled": True}}

# The line of progress each child has in its parent's buffer (virtual text at its line).
PROGRESS = """
local c = require("trellisd").current()
if not c or not c.buf then
  return {}
end
local ns = vim.api.nvim_create_namespace("trellisd.children")
local out = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(c.buf, ns, 0, -1, { details = true })) do
  local virt = m[4] and m[4].virt_text
  if virt then
    out[#out + 1] = virt[1][1]
  end
end
return out
"""


def progress(ed: Any) -> list[str]:
    return list(ed.lua(PROGRESS))


def opened(ed: Any, parent: dict[str, Any]) -> bool:
    """Whether the current session is another than the parent."""
    current = ed.current()
    return current is not None and current["sessionId"] != parent["sessionId"]


def test_a_child_streams_and_ends_under_its_task_call_and_opens_as_a_session(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    script = [
        {"text": "Asking a helper.", "tool": "task", "arguments": {"prompt": "count the files"}},
        {"text": "There are two files here.", "holdAfter": 3, "holdFile": str(go)},
        {"text": "The helper counted two files."},
    ]
    ed = start(script=script, setup={"policy": TASKS})
    ed.command("Trellis how many files?")

    text = ed.wait_text("> child session “count the files” running (:TrellisChildren opens it)")
    lines = text.splitlines()
    assert lines.index("> `task` running") < lines.index(
        "> child session “count the files” running (:TrellisChildren opens it)"
    )
    ed.wait_for(lambda: any("There are two" in p for p in progress(ed)), "the child's progress")
    assert "*finished" not in ed.text()
    assert "There are two" not in ed.text()  # not drawn as the parent's own reply

    go.write_text("go")
    ed.wait_idle()
    text = ed.wait_text("> child session “count the files” finished", "The helper counted")
    lines = text.splitlines()
    assert ">   There are two files here." in lines
    assert "There are two files here." not in lines
    assert lines.index(">   There are two files here.") < lines.index(
        "The helper counted two files."
    )
    assert progress(ed) == ["⋯ finished"]
    parent = ed.current()
    assert parent is not None

    # listed under its parent where sessions are listed
    ed.will_pick("count the files")
    ed.command("TrellisSessions")
    ed.wait_for(lambda: opened(ed, parent), "the child to open")
    items = ed.asked()[-1]["items"]
    parent_at = next(i for i, item in enumerate(items) if item.startswith("how many files?"))
    assert items[parent_at + 1].startswith("↳ count the files")
    assert "child of “how many files?”" in items[parent_at + 1]
    child = ed.wait_text("### You\ncount the files", "There are two files here.")
    assert "a child session, started by a task call" in child

    # and opened from its parent's conversation
    ed.will_pick("how many files?")
    ed.command("TrellisSessions")
    ed.wait_for(lambda: (c := ed.current()) and c["sessionId"] == parent["sessionId"], "the parent")
    ed.will_pick("count the files")
    ed.command("TrellisChildren")
    ed.wait_for(lambda: opened(ed, parent), "the child to open")
    assert "Open which child session of “how many files?”" in ed.asked()[-1]["prompt"]
    ed.wait_text("### You\ncount the files", "There are two files here.")


def test_a_childs_approval_names_the_child(start: Start, tmp_path: Path) -> None:  # noqa: F811
    script = [
        {"tool": "task", "arguments": {"prompt": "write the notes"}},
        {"tool": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}},
        {"text": "Wrote the notes."},
        {"text": "The notes are written."},
    ]
    ed = start(script=script, setup={"policy": {"approval": "ask", **TASKS}})
    ed.will_pick("Allow once")
    ed.command("Trellis take notes")
    text = ed.wait_text("The notes are written.")
    ed.wait_idle()

    questions = [a for a in ed.asked() if a.get("kind") == "trellisd.approval"]
    assert len(questions) == 1
    assert questions[0]["prompt"].startswith(
        "the child session “write the notes” of “take notes” asks to run write_file"
    )
    assert "> approval asked by the child session “write the notes” of “take notes”: " in text
    assert "> child session “write the notes” finished" in text
    assert (tmp_path / "project" / "notes.txt").read_text() == "hi\n"


def test_cancelling_the_parent_ends_its_child_cancelled(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    never = tmp_path / "never"  # the child's model waits for it, and it is never made
    script = [
        {"tool": "task", "arguments": {"prompt": "wait a while"}},
        {"text": "Still waiting for it", "holdAfter": 2, "holdFile": str(never)},
    ]
    ed = start(script=script, setup={"policy": TASKS})
    ed.command("TrellisChildren")
    ed.wait_note("there is no conversation to list the child sessions of")
    ed.command("Trellis start a slow helper")
    ed.wait_for(lambda: any("Still waiting" in p for p in progress(ed)), "the child's progress")
    ed.command("TrellisChildren")  # listed while it runs; nothing is picked
    items = ed.wait_for(
        lambda: (a := ed.asked()) and a[-1].get("kind") == "trellisd.session" and a[-1]["items"],
        "the children to be listed",
    )
    assert len(items) == 1 and items[0].startswith("↳ wait a while")
    ed.command("TrellisCancel")
    ed.wait_idle()
    text = ed.wait_text("> child session “wait a while” cancelled")
    assert "*cancelled" in text
    assert progress(ed) == ["⋯ cancelled"]
