"""Pins, a fork after a step and a followed turn's end in real headless Neovims (0.7 and
0.11) against the real daemon."""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    from . import nvim_fixtures as fx
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

Start = Callable[..., fx.Editor]

# Every daemon.request the plugin makes, by method, in T.requests.
COUNT_REQUESTS = """
local daemon = require("trellisd.daemon")
local request = daemon.request
T.requests = {}
daemon.request = function(method, params, cb)
  table.insert(T.requests, method)
  return request(method, params, cb)
end
"""


@pytest.fixture(params=sorted(fx.NVIMS))
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Start]:
    binary = fx.nvim_binary(request.param)
    editors: list[fx.Editor] = []
    daemons: set[int] = set()

    def make(**options: Any) -> fx.Editor:
        editor = fx.start_editor(binary, tmp_path, **options)
        editors.append(editor)
        return editor

    yield make
    for editor in editors:
        if not editor.closed and (pid := editor.shared_daemon_pid()) is not None:
            daemons.add(pid)
        editor.close()
    for pid in daemons:
        fx.stop_shared_daemon(pid)


def tree_line(ed: fx.Editor, prefix: str) -> str:
    return next((line for line in ed.buffer_named("/tree") if line.startswith(prefix)), "")


def open_tree_at(ed: fx.Editor, prefix: str) -> None:
    ed.command("TrellisTree")
    ed.wait_for(lambda: tree_line(ed, prefix), f"the tree line {prefix!r}")
    row = ed.lua(
        "for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do"
        " if l:sub(1, #...) == ... then return i end end",
        prefix,
    )
    ed.lua("vim.api.nvim_win_set_cursor(0, { ..., 0 })", row)


def test_a_follower_finishes_a_turn_another_editor_started_when_the_daemon_says_it_ended(
    start: Start, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = [{"text": "Counting: one two three four five.", "holdAfter": 2, "holdFile": str(go)}]
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    first = start(script=script, shared=runtime)
    second = start(script=script, shared=runtime)
    first.command("Trellis count for me")
    first.wait_text("Counting")
    second.lua(COUNT_REQUESTS)
    second.will_pick("")
    second.command("TrellisSessions")
    second.wait_text("### You\ncount for me")
    assert second.current()["running"]  # type: ignore[index]
    go.touch()
    second.wait_idle()
    text = second.wait_text("four five.", "*finished · ")
    assert text.count("*finished · ") == 1, text
    assert re.search(r"^\*finished · \d+ tokens \(in \d+, out \d+\) · scripted", text, re.M), text
    assert "session/history" not in second.lua("return T.requests"), "no reading of the history"


def test_p_in_the_tree_pins_a_turn_the_daemon_keeps_pinned(start: Start) -> None:
    ed = start(script=[{"text": "First answer."}, {"text": "Second answer."}])
    ed.command("Trellis first question")
    ed.wait_idle()
    ed.command("Trellis second question")
    ed.wait_idle()
    open_tree_at(ed, "● first question")
    ed.nvim.input("p")
    ed.wait_for(lambda: "[pinned]" in tree_line(ed, "● first question"), "the pin mark")
    assert "[pinned]" not in tree_line(ed, "● second question")
    # read again from the store: the next editor on it sees it pinned
    ed.close()
    other = start()
    other.will_pick("first question")
    other.command("TrellisSessions")
    other.wait_text("Second answer.")
    open_tree_at(other, "● first question")
    assert "[pinned]" in tree_line(other, "● first question")
    other.nvim.input("p")
    other.wait_for(lambda: "[pinned]" not in tree_line(other, "● first question"), "the unpin")


def test_f_in_the_tree_forks_after_a_step_and_opens_the_fork(start: Start) -> None:
    ed = start(
        script=[
            {"text": "Let me look.", "tool": "list_dir", "arguments": {"path": "."}},
            {"text": "It is an empty project."},
        ]
    )
    ed.command("Trellis what is here?")
    ed.wait_idle()
    origin = ed.current()["sessionId"]  # type: ignore[index]
    open_tree_at(ed, "● what is here?")
    ed.will_pick("after step 1")
    ed.nvim.input("F")
    ed.wait_for(lambda: ed.current()["sessionId"] != origin, "the fork to open")  # type: ignore[index]
    text = ed.wait_text("forked from", "Let me look.", "*forked")
    assert "It is an empty project." not in text, text
    asked = ed.asked()[-1]
    assert asked["items"][:2] == [
        "before the first step: the prompt only",
        "after step 1: list_dir .",
    ]


STUBBORN = ["sh", "-c", 'trap "" TERM; echo migrating; sleep 300']
"""A command that ignores SIGTERM (so does the sleep it starts): only a kill ends it."""


def test_a_command_killed_by_a_cancel_asks_keep_or_revert_and_the_next_prompt_then_runs(
    start: Start,
) -> None:
    ed = start(
        script=[
            {"text": "Migrating.", "tool": "run_command", "arguments": {"argv": STUBBORN}},
            {"text": "Next turn, on a checked workspace."},
        ]
    )
    ed.will_pick("Allow once")
    ed.command("Trellis migrate the database")
    ed.wait_text("│ migrating")  # its output: the trap is set
    ed.will_pick("Keep the files as they are")
    ed.command("TrellisCancel")
    text = ed.wait_text("kept the files as the killed command left them")
    assert "a cancelled command was killed mid-run: sh -c" in text, text
    question = next(a for a in ed.asked() if a.get("kind") == "trellisd.recovery")
    assert "killed mid-run" in question["prompt"], question
    assert question["items"] == ["Keep the files as they are", "Revert the turn's changes"]
    ed.command("Trellis go on")
    ed.wait_text("Next turn, on a checked workspace.")
    ed.wait_idle()
