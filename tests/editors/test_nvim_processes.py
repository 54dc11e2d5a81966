"""The processes a turn starts (start_process) in real headless Neovims (0.7 and 0.11)
against the real daemon: :TrellisProcesses lists them, shows their output as it comes, reads
the list again when a start_process call ends, and stops one with `s`; a second editor that
opens the session later reads what a process printed so far, and is told when it ends."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

try:
    from . import nvim_fixtures as fx
    from .test_nvim import Start, nvim_bin, start, two_editors
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]
    from test_nvim import Start, nvim_bin, start, two_editors  # type: ignore[no-redef]

__all__ = ["nvim_bin", "start"]  # the fixtures the tests below use


# A server that says it is up, then waits until it is stopped.
SERVER = ["sh", "-c", "echo serving on 8000; echo ready; exec sleep 300"]


def listed(ed: fx.Editor) -> list[str]:
    return ed.buffer_named("/processes")


def stop_the_first(ed: fx.Editor) -> str:
    """Stop the list's first process with `s` in its window; the note that says so."""
    ed.command("TrellisProcesses")  # its window, focused
    ed.wait_for(
        lambda: ed.lua("return vim.api.nvim_buf_get_name(0)").endswith("/processes"),
        "the list's window to be focused",
    )
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 0 })")
    ed.nvim.input("s")
    return ed.wait_note("stopped: ○ ")


def test_a_process_a_turn_started_is_listed_with_its_output_and_stopped_from_the_editor(
    start: Start,
) -> None:
    ed = start(
        script=[
            {"text": "Nothing runs yet."},
            {"text": "Starting it.", "tool": "start_process", "arguments": {"argv": SERVER}},
            {"text": "The server runs."},
        ]
    )
    ed.command("Trellis hello")
    ed.wait_idle()
    ed.command("TrellisProcesses")
    ed.wait_for(lambda: "(no process" in "\n".join(listed(ed)), "the empty list")
    ed.will_pick("Allow once")
    ed.command("Trellis start the dev server")
    ed.wait_text("The server runs.")
    ed.wait_idle()
    # read again when the call ended, with the output that came
    lines = ed.wait_for(
        lambda: (ls := listed(ed)) and "ready" in ls and ls,
        "the process and its output in the list",
    )
    head = ed.current()["head"]  # type: ignore[index]
    command = "sh -c echo serving on 8000; echo ready; exec sleep 300"
    assert lines[1] == f"● running · {command} · turn {head[:8]}", lines
    assert lines[3:] == [f"── output of {command} ──", "serving on 8000", "ready"], lines
    # SIGTERM ends it: its shell's exit code says so (143), or the signal itself
    note = stop_the_first(ed)
    assert re.match(
        rf"trellis: stopped: ○ (exit 143|killed by signal 15) · {re.escape(command)}", note
    )
    ended = ed.wait_for(
        lambda: (line := listed(ed)[1]).startswith("○ ") and line, "the list to say it ended"
    )
    assert ended == note.removeprefix("trellis: stopped: "), ended
    ed.nvim.input("s")
    ed.wait_note("it has ended already")


def test_an_editor_opened_later_reads_what_a_process_printed_and_sees_it_end(
    start: Start,
) -> None:
    script = [{"text": "Starting it.", "tool": "start_process", "arguments": {"argv": SERVER}}]
    script.append({"text": "The server runs."})
    command = "sh -c echo serving on 8000; echo ready; exec sleep 300"
    with two_editors(start, script) as (first, second, daemons):
        first.will_pick("Allow once")
        first.command("Trellis start the dev server")
        first.wait_text("The server runs.")
        first.wait_idle()
        daemons.add(first.shared_daemon_pid() or 0)
        first.command("TrellisProcesses")
        first.wait_for(lambda: "ready" in listed(first), "the first editor's output")

        # The second opens the session after the process printed: it reads it back.
        second.will_pick("")
        second.command("TrellisSessions")
        second.wait_text("The server runs.")
        daemons.add(second.shared_daemon_pid() or 0)
        second.command("TrellisProcesses")
        lines = second.wait_for(
            lambda: (ls := listed(second)) and "ready" in ls and ls, "the output read back"
        )
        assert lines[1].startswith(f"● running · {command}"), lines
        assert lines[3:] == [f"── output of {command} ──", "serving on 8000", "ready"], lines

        # The first stops it: the second's row says how it ended, unasked.
        note = stop_the_first(first)
        ended = second.wait_for(
            lambda: (line := listed(second)[1]).startswith("○ ") and line, "the end told"
        )
        assert re.match(rf"○ (exit 143|killed by signal 15) · {re.escape(command)}", ended)
        assert ended == note.removeprefix("trellis: stopped: "), ended
