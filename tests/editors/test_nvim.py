"""The Neovim plugin in real headless Neovims (0.7 and 0.11) against the real daemon.

Each test starts its own Neovim (pynvim, ``--embed --headless -u NONE``) whose plugin starts
``python -m trellisd`` with the scripted model on a store in the test's folder, runs the
user's commands, answers vim.ui.select / vim.ui.input through stand-ins, and reads what
the conversation buffer shows.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.fixtures.reachable import reachable

try:
    from . import nvim_fixtures as fx
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

Start = Callable[..., fx.Editor]
# outcome · tokens · model (the scripted model is "scripted") · cost, when the price is known
FOOTER = re.compile(r"^\*finished · \d+ tokens \(in \d+, out \d+\) · scripted( · \$[0-9.]+)?\*$")


@pytest.fixture(params=sorted(fx.NVIMS))
def nvim_bin(request: pytest.FixtureRequest) -> str:
    return fx.nvim_binary(request.param)


@pytest.fixture
def start(nvim_bin: str, tmp_path: Path) -> Iterator[Start]:
    """start(**options) -> a new Editor on the test's store; all are closed at the end."""
    editors: list[fx.Editor] = []

    def make(**options: Any) -> fx.Editor:
        editor = fx.start_editor(nvim_bin, tmp_path, **options)
        editors.append(editor)
        return editor

    yield make
    for editor in editors:
        editor.close()


def section(text: str, prompt: str) -> str:
    """The part of the conversation from the turn with this prompt to the next turn."""
    after = text.split(f"### You\n{prompt}\n", 1)[1]
    return after.split("### You\n", 1)[0]


def test_a_streamed_reply_appears_as_it_streams(start: Start, tmp_path: Path) -> None:
    reply = "The parser reads one frame at a time.\nIt never blocks the editor while it waits."
    go = tmp_path / "go"
    ed = start(script=[{"text": reply, "holdAfter": 4, "holdFile": str(go)}])
    ed.command("Trellis explain the parser")

    # part of the reply is there while the model holds the rest back
    partial = ed.wait_text("The parser reads ")
    assert "frame at a time" not in partial and "*finished" not in partial
    assert ed.statusline().startswith("trellis: streaming ")

    go.touch()
    ed.wait_idle()
    lines = ed.conversation()
    assert lines[0] == "# explain the parser"
    start_of_turn = lines.index("### You")
    assert lines[start_of_turn : start_of_turn + 6] == [
        "### You",
        "explain the parser",
        "",
        "### trellisd",
        "",
        "The parser reads one frame at a time.",
    ]
    assert lines[start_of_turn + 6] == "It never blocks the editor while it waits."
    assert FOOTER.match(lines[-1]), lines[-1]
    assert ed.statusline() == "trellis: idle"
    name = ed.lua("return vim.api.nvim_buf_get_name(require('trellisd').current().buf)")
    assert re.fullmatch(r"trellis://s-[0-9a-f]+", name), name
    assert ed.lua("return vim.bo[require('trellisd').current().buf].buftype") == "nofile"


def test_a_fast_stream_is_painted_in_batches_and_the_editor_stays_responsive(
    start: Start,
) -> None:
    # about a thousand pieces a second for a few seconds (the scripted model waits 0.5 ms
    # before each piece)
    words = [f"w{i}" for i in range(3000)]
    ed = start(script=[{"text": " ".join(words), "delayMs": 0.5}])
    ed.command("Trellis stream fast")
    ed.wait_text("### trellisd")
    buf = ed.current()["buf"]  # type: ignore[index]
    tick_before = ed.nvim.eval(f"getbufvar({buf}, 'changedtick')")
    began = time.monotonic()
    slowest = 0.0
    while ed.current()["running"]:  # type: ignore[index]
        asked = time.monotonic()
        ed.nvim.eval("1")
        slowest = max(slowest, time.monotonic() - asked)
        time.sleep(0.01)
        assert time.monotonic() - began < 60, "the stream did not end"
    took = time.monotonic() - began
    ed.wait_idle()
    changes = ed.nvim.eval(f"getbufvar({buf}, 'changedtick')") - tick_before
    text = ed.text()
    assert " ".join(words) in text
    assert changes < len(words) / 10, (
        f"{changes} buffer changes for {len(words)} pieces in {took:.2f} s"
        f" ({len(words) / took:.0f} pieces/s)"
    )
    # How fast it answered is a figure, not a test: speed lives in the benchmarks.
    print(f"slowest answer while streaming: {slowest * 1000:.0f} ms")


def test_branch_shows_the_new_path(start: Start) -> None:
    ed = start()  # the scripted model echoes the prompts it can see
    for prompt in ("first question", "second question", "third question"):
        ed.command(f"Trellis {prompt}")
        ed.wait_text(f"### You\n{prompt}")
        ed.wait_idle()

    ed.will_pick("first question", "Leave the files")
    ed.command("TrellisBranch")
    text = ed.wait_for(
        lambda: "third question" not in (t := ed.text()) and t,
        "the conversation to show the new path",
    )
    assert "### You\nfirst question" in text
    assert "second question" not in text
    picker = ed.asked()[-2]
    assert ed.asked()[-1]["prompt"] == "branch: restore the files the turns changed?"
    assert picker["items"] == [
        "◇ (start: an empty conversation)",
        "● first question",
        "● second question",
        "● third question  ← head",
    ]

    ed.command("Trellis a different second question")
    ed.wait_idle()
    reply = section(ed.wait_text("a different second question"), "a different second question")
    assert "first question" in reply, "the model saw the first turn"
    assert "second question" not in reply.replace("a different second question", ""), (
        "the model did not see the branch left behind"
    )

    ed.command("TrellisTree")
    tree = ed.wait_for(lambda: ed.buffer_named("/tree"), "the tree buffer")
    assert tree[-5:] == [
        "◇ (start: an empty conversation)",
        "● first question",
        "├─ ● a different second question  ← head",
        "└─ ○ second question",
        "   ○ third question",
    ]

    # branching back to the left branch: the picker shows it as left, the buffer follows
    ed.will_pick("third question", "Leave the files")
    ed.command("TrellisBranch")
    ed.wait_for(
        lambda: "third question" in ed.text() and "a different" not in ed.text(),
        "the conversation to show the old branch again",
    )
    assert "└─ ○ second question" in ed.asked()[-2]["items"]


def test_a_session_reopened_from_the_list_shows_its_earlier_turns(
    start: Start, tmp_path: Path
) -> None:
    first = start()
    first.command("Trellis alpha question")
    first.wait_idle()
    first.command("Trellis beta question")
    first.wait_text("### You\nbeta question")
    first.wait_idle()
    first.command("TrellisNew a later session")
    first.wait_text("# a later session")
    first.close()

    ed = start()
    ed.will_pick("alpha question")
    ed.command("TrellisSessions")
    text = ed.wait_text("### You\nalpha question", "### You\nbeta question")
    assert text.startswith("# alpha question\n")
    assert len(re.findall(r"^\*finished · ", text, re.M)) == 2
    items = ed.asked()[-1]["items"]
    assert len(items) == 2
    assert items[0].startswith("a later session · ~/project · 0 turns · "), items
    assert items[1].startswith("alpha question · ~/project · 2 turns · "), items
    assert items[1].endswith("just now") or "min ago" in items[1]

    ed.command("Trellis gamma question")
    ed.wait_idle()
    reply = section(ed.text(), "gamma question")
    assert "alpha question" in reply and "beta question" in reply, reply


def test_a_daemon_that_dies_is_reported_restarted_and_the_session_reopened(
    start: Start, tmp_path: Path
) -> None:
    held = " ".join(f"word{i}" for i in range(20))
    never = str(tmp_path / "never")
    ed = start(
        script=[{"text": "A quick answer."}, {"text": held, "holdAfter": 5, "holdFile": never}]
    )
    ed.command("Trellis one")
    ed.wait_idle()
    ed.command("Trellis two")
    ed.wait_text("word3")
    pid = ed.daemon_pid()
    assert pid
    os.kill(pid, signal.SIGKILL)

    note = ed.wait_note("the daemon was killed")
    assert "starts again on your next action" in note and ":TrellisLog" in note
    ed.wait_text("*interrupted: the trellisd daemon exited (signal 9)*")
    assert ed.statusline() == "trellis: idle"

    ed.command("Trellis three")
    text = ed.wait_text("### You\nthree")
    ed.wait_idle()
    text = ed.text()
    assert ed.daemon_pid() not in (None, pid)
    # reopened from the store: the first turn, the one cut short, then the new one
    assert text.index("### You\none") < text.index("### You\ntwo") < text.index("### You\nthree")
    assert "*interrupted" in section(text, "two")


def test_an_interrupted_turn_is_resumed(start: Start, tmp_path: Path) -> None:
    words = " ".join(f"word{i}" for i in range(40))
    go = tmp_path / "go"
    ed = start(script=[{"text": words, "holdAfter": 5, "holdFile": str(go)}])
    ed.command("Trellis count slowly")
    ed.wait_text("word3")
    pid = ed.daemon_pid()
    assert pid
    os.kill(pid, signal.SIGKILL)
    ed.wait_note("the daemon was killed")
    go.touch()  # the next daemon's model goes on without holding

    ed.command("TrellisResume")
    ed.wait_note(":TrellisResume continues it")  # said when the session was reopened
    ed.wait_text("### trellisd (resumed)")
    ed.wait_idle()
    resumed = ed.text().split("### trellisd (resumed)", 1)[1]
    assert "word39" in resumed
    assert re.search(r"^\*finished · ", resumed, re.M), resumed


def test_a_session_written_by_another_editor_can_be_taken_over(start: Start) -> None:
    first = start()
    first.command("Trellis started in the first editor")
    first.wait_idle()

    second = start()
    second.will_pick("started in the first editor", "Take it over here")
    second.command("TrellisSessions")
    second.wait_text("### You\nstarted in the first editor")
    second.command("Trellis continued in the second editor")
    # the turn is refused, the takeover is offered and taken, and the turn is sent again:
    # wait for the footer of that second sending
    text = second.wait_for(
        lambda: (
            re.search(
                r"^\*not sent: .*### You\ncontinued in the second editor\n.*^\*finished",
                t := second.text(),
                re.M | re.S,
            )
            and t
        ),
        "the turn sent again after the takeover to finish",
    )
    second.wait_idle()
    assert re.search(r"^\*not sent: .*", text, re.M), text
    takeover = second.asked()[-1]
    assert takeover["kind"] == "trellisd.takeover"
    assert re.fullmatch(
        r"another trellisd \(pid \d+\) is writing this session\. Take it over\?", takeover["prompt"]
    )
    reply = section(text.split("*not sent", 1)[1], "continued in the second editor")
    assert "started in the first editor" in reply, "the model saw the first editor's turn"


def test_two_prompts_before_the_daemon_is_up_go_to_one_session_in_order(
    start: Start, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    ed = start(script=[{"text": "First answer.", "holdFile": str(go)}, {"text": "Second answer."}])
    ed.command("Trellis first prompt")
    ed.command("Trellis second prompt")  # the daemon is still starting
    ed.wait_text("### You\nfirst prompt")
    ed.wait_note("your prompt is queued")
    ed.wait_for(lambda: ed.statusline().endswith(", 1 prompt queued"), "the queued prompt counted")
    go.touch()
    text = ed.wait_for(
        lambda: len(re.findall(r"^\*finished", t := ed.text(), re.M)) == 2 and t,
        "both turns to finish",
    )
    assert text.index("First answer.") < text.index("### You\nsecond prompt")
    assert "Second answer." in section(text, "second prompt")
    windows = ed.lua(
        "return #vim.tbl_filter(function(w) return vim.api.nvim_buf_get_name("
        "vim.api.nvim_win_get_buf(w)):match('^trellis://') end, vim.api.nvim_list_wins())"
    )
    assert windows == 1
    sessions = ed.lua(
        "local n = 0 for _ in pairs(require('trellisd.sessions').open) do n = n + 1 end return n"
    )
    assert sessions == 1


def test_a_buffer_of_a_file_the_model_wrote_shows_what_it_wrote(
    start: Start, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("old line\n")
    ed = start(
        script=[
            {"tool": "edit_file", "arguments": {"path": "notes.txt", "old": "old", "new": "new"}},
            {"text": "The note is changed."},
        ]
    )
    ed.command("edit notes.txt")
    notes = ed.nvim.current.buffer.number
    assert ed.nvim.current.buffer[:] == ["old line"]
    ed.will_pick("Allow once")
    ed.command("Trellis change the note")
    ed.wait_text("The note is changed.")
    ed.wait_idle()
    assert (project / "notes.txt").read_text() == "new line\n"
    ed.wait_for(
        lambda: ed.lua(f"return vim.api.nvim_buf_get_lines({notes}, 0, -1, false)") == ["new line"],
        "the notes.txt buffer to show the model's edit",
    )


def test_the_changes_view_shows_the_last_turns_diff_and_r_reverts_it(
    start: Start, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("old line\n")
    ed = start(
        script=[
            {"tool": "edit_file", "arguments": {"path": "notes.txt", "old": "old", "new": "new"}},
            {"text": "The note is changed."},
        ]
    )
    ed.will_pick("Allow once")
    ed.command("Trellis change the note")
    ed.wait_text("The note is changed.")
    ed.wait_idle()
    assert (project / "notes.txt").read_text() == "new line\n"

    ed.command("TrellisChanges")
    lines = ed.wait_for(lambda: ed.buffer_named("/changes"), "the changes buffer")
    assert lines == [
        "--- a/notes.txt",
        "+++ b/notes.txt",
        "@@ -1 +1 @@",
        "-old line",
        "+new line",
    ]
    ed.command("normal R")
    ed.wait_for(
        lambda: (project / "notes.txt").read_text() == "old line\n", "the turn to be reverted"
    )


def test_a_missing_daemon_command_is_explained(start: Start) -> None:
    ed = start(setup={"cmd": ["/nonexistent/bin/trellisd"]})
    ed.command("Trellis hello")
    note = ed.wait_note("could not start the daemon")
    assert "/nonexistent/bin/trellisd" in note
    assert "absolute path" in note
    assert ed.current() is None


def test_a_refused_model_call_is_shown_in_the_footer_and_notified(start: Start) -> None:
    ed = start(script=[{"error": "401 Unauthorized: the API key was refused"}])
    ed.command("Trellis hello")
    ed.wait_idle()
    note = ed.wait_note("401 Unauthorized")
    assert note.startswith("trellis: the turn failed: ")
    assert re.search(r"^\*error: .*401 Unauthorized: the API key was refused", ed.text(), re.M)


def test_prompt_asked_for_when_none_is_given(start: Start) -> None:
    ed = start()
    ed.will_type("typed in the prompt box")
    ed.command("Trellis")
    ed.wait_text("### You\ntyped in the prompt box")
    ed.wait_idle()
    assert ed.asked()[0] == {"prompt": "Trellis: ", "input": True}


def test_checkhealth_starts_the_daemon_and_names_the_provider(start: Start) -> None:
    ed = start()
    ed.command("checkhealth trellisd")
    report = "\n".join(ed.nvim.current.buffer[:])
    assert "the daemon starts: trellisd " in report, report
    assert "provider: scripted, model scripted (as the daemon reports it)" in report, report
    assert "it shuts down cleanly" in report, report


def test_the_log_opens_with_the_daemons_stderr(start: Start) -> None:
    ed = start()
    ed.command("Trellis hello")
    ed.wait_idle()
    ed.command("TrellisLog")
    assert ed.nvim.current.buffer.name.endswith("/cache/nvim/trellisd.log")
    log = "\n".join(ed.nvim.current.buffer[:])
    assert "starting: " in log and "-m trellisd --db" in log


# Steering, cancelling and approving: session/steer, session/cancel, session/requestApproval.


def test_a_steer_is_shown_when_the_running_turn_takes_it(start: Start, tmp_path: Path) -> None:
    go = tmp_path / "go"
    ed = start(
        script=[
            {
                "text": "Looking at the files first, one by one, carefully.",
                "holdAfter": 1,
                "holdFile": str(go),
                "tool": "list_dir",
                "arguments": {"path": "."},
            },
            {"text": "Done: only the docs folder."},
        ]
    )
    ed.command("Trellis tidy up the project")
    ed.wait_text("Looking")
    ed.command("TrellisSteer only the docs folder")
    ed.wait_for(lambda: "1 steer queued" in ed.statusline(), "the statusline to count the steer")
    go.touch()
    text = ed.wait_text("only the docs folder")
    ed.wait_idle()
    text = ed.text()
    assert re.search(r"^> steer \(step \d+\): only the docs folder$", text, re.M), text
    assert "> tool `list_dir`" in text
    assert text.index("> steer") < text.index("Done: only the docs folder.")
    assert not any("not delivered" in n for n in ed.notes())


def test_a_steer_still_waiting_when_the_turn_is_cancelled_is_handed_back(
    start: Start, tmp_path: Path
) -> None:
    held = " ".join(f"word{i}" for i in range(100))
    ed = start(script=[{"text": held, "holdAfter": 5, "holdFile": str(tmp_path / "never")}])
    ed.command("Trellis a slow one")
    ed.wait_text("word1")
    ed.command("TrellisSteer also mention the tests")
    ed.wait_for(lambda: "1 steer queued" in ed.statusline(), "the statusline to count the steer")
    ed.command("TrellisCancel")
    ed.wait_idle()
    text = ed.wait_text("> steer not delivered, the turn ended first: also mention the tests")
    assert "*cancelled" in text
    ed.wait_note("your steer was not delivered")


def test_cancel_stops_the_running_turn(start: Start, tmp_path: Path) -> None:
    held = " ".join(f"word{i}" for i in range(300))
    ed = start(script=[{"text": held, "holdAfter": 10, "holdFile": str(tmp_path / "never")}])
    ed.command("Trellis a long answer please")
    ed.wait_text("word5")
    ed.command("TrellisCancel")
    ed.wait_idle()
    text = ed.wait_text("*cancelled")
    assert "word299" not in text
    # the store kept the cancelled turn: a reopen shows it with its outcome
    ed.will_pick("a long answer please")
    ed.command("TrellisSessions")
    ed.wait_for(lambda: ed.asked(), "the session list")
    assert re.search(r"^\*cancelled", ed.wait_text("### You\na long answer please"), re.M)


def _approval_script(path: str) -> list[dict[str, Any]]:
    return [
        {"tool": "write_file", "arguments": {"path": path, "content": "hello\n"}},
        {"tool": "write_file", "arguments": {"path": path, "content": "hello again\n"}},
        {"text": "The note is written."},
    ]


def test_an_approval_allowed_for_the_session_is_asked_once(start: Start, tmp_path: Path) -> None:
    ed = start(script=_approval_script("notes.txt"))
    ed.will_pick("Allow always (this session)")
    ed.command("Trellis write a note")
    ed.wait_idle()
    text = ed.text()
    approvals = [a for a in ed.asked() if a.get("kind") == "trellisd.approval"]
    assert len(approvals) == 1, approvals
    assert approvals[0]["items"] == [
        "Allow once",
        "Allow always (this session)",
        "Allow always (this project)",
        "Deny",
    ]
    assert "write_file" in approvals[0]["prompt"] and "notes.txt" in approvals[0]["prompt"]
    assert "> approval asked: `write_file`" in text
    assert "> allowed always for this session" in text
    assert (tmp_path / "project" / "notes.txt").read_text() == "hello again\n"
    assert "The note is written." in text


def test_an_approval_for_the_project_holds_in_a_new_session_until_revoked(
    start: Start, tmp_path: Path
) -> None:
    script = _approval_script("notes.txt")
    script[2:2] = [
        {"text": "Written twice."},
        {"tool": "write_file", "arguments": {"path": "notes.txt", "content": "third\n"}},
    ]
    ed = start(script=script)
    ed.will_pick("Allow always (this project)")
    ed.command("Trellis write a note")
    ed.wait_idle()
    assert "> allowed always for every session of this project" in ed.text()
    ed.command("TrellisNew another")
    ed.wait_text("# another")
    ed.command("Trellis write it once more")
    ed.wait_idle()
    approvals = [a for a in ed.asked() if a.get("kind") == "trellisd.approval"]
    assert len(approvals) == 1, "the project's grant holds in the new session"
    assert (tmp_path / "project" / "notes.txt").read_text() == "third\n"

    ed.will_pick("write notes.txt · this project", "Revoke it")
    ed.command("TrellisGrants")
    ed.wait_note("revoked: write notes.txt · this project")
    listed = [a for a in ed.asked() if a.get("kind") == "trellisd.grants"]
    assert listed[-1]["items"] == ["write notes.txt · this project"]
    ed.command("TrellisGrants")
    ed.wait_note("no remembered approvals")


def test_an_approval_denied_leaves_the_file_alone(start: Start, tmp_path: Path) -> None:
    ed = start(script=_approval_script("denied.txt"))
    ed.will_pick("Deny", "Deny")
    ed.command("Trellis write a note")
    ed.wait_idle()
    text = ed.text()
    approvals = [a for a in ed.asked() if a.get("kind") == "trellisd.approval"]
    assert approvals, "no approval was asked"
    assert "> denied" in text
    assert not (tmp_path / "project" / "denied.txt").exists()


# Two editors on one shared daemon: session/reopen's running turn, followed, then cancelled.


@contextmanager
def two_editors(
    start: Start, script: list[dict[str, Any]]
) -> Iterator[tuple[fx.Editor, fx.Editor, set[int]]]:
    """Two editors on one shared daemon, and the set the test adds the daemon's pid to (so
    that it is stopped after them)."""
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: a socket's path
    first = start(script=script, shared=runtime)
    second = start(script=script, shared=runtime)
    daemons: set[int] = set()
    try:
        yield first, second, daemons
    finally:
        for editor in (first, second):
            editor.close()
        for pid in daemons - {0}:
            fx.stop_shared_daemon(pid)


def test_a_second_editor_follows_and_cancels_the_first_ones_running_turn(
    start: Start, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = [
        {
            "text": "Looking at the files first, one by one, carefully.",
            "holdAfter": 2,
            "holdFile": str(go),
            "tool": "list_dir",
            "arguments": {"path": "."},
        },
        {
            "text": " ".join(f"word{i}" for i in range(200)),
            "holdAfter": 10,
            "holdFile": str(tmp_path / "never"),
        },
    ]
    with two_editors(start, script) as (first, second, daemons):
        first.command("Trellis look around")
        first.wait_text("Looking at")
        daemons.add(first.shared_daemon_pid() or 0)

        # the second opens the session mid-turn: the prompt and the text streamed so far
        second.will_pick("")
        second.command("TrellisSessions")
        so_far = second.wait_text("### You\nlook around\n\n### trellisd\n\nLooking at")
        daemons.add(second.shared_daemon_pid() or 0)
        assert daemons == {first.shared_daemon_pid()} and 0 not in daemons, daemons
        assert "carefully" not in so_far and "*running" not in so_far, so_far
        assert second.current()["running"]  # type: ignore[index]
        assert second.statusline().startswith("trellis: streaming")

        # then the rest, as it streams
        go.touch()
        text = second.wait_text("one by one, carefully.", "> tool `list_dir`", "word9")
        assert text.count("Looking at") == 1, text
        first.wait_text("word9")

        # the second cancels the first one's turn; both show it cancelled
        second.command("TrellisCancel")
        second.wait_idle()
        first.wait_idle()
        for editor in (first, second):
            text = editor.wait_text("*cancelled")
            assert re.search(r"^\*cancelled · ", text, re.M), text
            assert "word199" not in text


def test_a_second_editor_opening_mid_command_shows_the_call_and_its_output_so_far(
    start: Start,
) -> None:
    with fx.reachable_from_the_walls() as folder:
        shown_mid_command(start, folder / "go")


def shown_mid_command(start: Start, go: Path) -> None:
    waits = (
        "import os, sys, time; print('halfway there', flush=True)\n"
        "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
        "print('all done')"
    )
    script = [
        {"tool": "run_command", "arguments": {"argv": [sys.executable, "-c", waits, str(go)]}},
        {"text": "It ran."},
    ]
    with two_editors(start, script) as (first, second, daemons):
        first.will_pick("Allow once")
        first.command("Trellis run the slow one")
        first.wait_text("│ halfway there")
        daemons.add(first.shared_daemon_pid() or 0)

        second.will_pick("")
        second.command("TrellisSessions")
        so_far = second.wait_text("> `run_command` running\n\n│ halfway there")
        daemons.add(second.shared_daemon_pid() or 0)
        assert "> tool `run_command`" in so_far and "all done" not in so_far, so_far

        go.touch()
        text = second.wait_text("│ all done", "It ran.")
        assert text.count("│ halfway there") == 1, text
        second.wait_idle()


# The session's life: fork, rename, delete, export and import, search.


def ask(ed: fx.Editor, *prompts: str) -> None:
    for prompt in prompts:
        ed.command(f"Trellis {prompt}")
        ed.wait_text(f"### You\n{prompt}")
        ed.wait_idle()


def test_a_fork_opens_in_its_own_buffer_and_says_where_it_came_from(start: Start) -> None:
    ed = start()
    ask(ed, "first question", "second question", "third question")
    origin = ed.current()
    assert origin

    ed.will_pick("● second question")
    ed.command("TrellisFork")
    ed.wait_for(
        lambda: (c := ed.current()) and c["sessionId"] != origin["sessionId"], "the fork to open"
    )
    fork = ed.current()
    assert fork
    lines = ed.wait_for(
        lambda: (ls := ed.conversation())[2:3] == ["forked from “first question” at turn 2"] and ls,
        "the fork's lineage in its header",
    )
    assert lines[0] == "# first question"
    name = ed.lua("return vim.api.nvim_buf_get_name(require('trellisd').current().buf)")
    assert name == f"trellis://{fork['sessionId']}"
    assert ed.lua("return vim.api.nvim_get_current_buf()") == fork["buf"]
    text = ed.text()
    assert "### You\nsecond question" in text and "third question" not in text
    origin_text = "\n".join(
        ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", origin["buf"])
    )
    assert "### You\nthird question" in origin_text, "the origin's buffer is untouched"

    # the fork's next turn sends the model the path to the forked turn, and nothing after
    ask(ed, "fourth question")
    reply = section(ed.text(), "fourth question")
    assert "first question" in reply and "second question" in reply
    assert "third question" not in reply

    # the list says which session is a fork, and of what
    ed.command("TrellisSessions")
    ed.wait_for(lambda: any(a.get("kind") == "trellisd.session" for a in ed.asked()), "the list")
    items = ed.asked()[-1]["items"]
    assert any(i.endswith("· forked from “first question”") for i in items), items


def test_rename_and_delete_with_a_confirmation(start: Start) -> None:
    ed = start()
    ask(ed, "a session to keep")
    ed.command("TrellisRename kept under a new name")
    ed.wait_for(lambda: ed.conversation()[:1] == ["# kept under a new name"], "the new title")
    ed.command("TrellisNew doomed")
    ed.wait_text("# doomed")
    ask(ed, "soon gone")
    doomed = ed.current()
    assert doomed

    ed.will_pick("doomed", "Keep it")
    ed.command("TrellisDelete")
    ed.wait_for(lambda: len(ed.asked()) == 2, "the confirmation")
    assert ed.asked()[-1]["prompt"] == (
        "Delete “doomed” and all its turns for good? (its forks are kept)"
    )
    assert ed.current() == doomed, "kept when the answer is no"

    ed.will_pick("doomed", "Delete it")
    ed.command("TrellisDelete")
    ed.wait_note("deleted: doomed")
    assert ed.current() is None
    assert not ed.lua("return vim.api.nvim_buf_is_valid(...)", doomed["buf"])

    # gone from the store: another editor lists only the one kept, under its new name
    other = start()
    other.command("TrellisSessions")
    other.wait_for(lambda: other.asked(), "the list")
    items = other.asked()[-1]["items"]
    assert len(items) == 1 and items[0].startswith("kept under a new name · "), items


def test_export_then_import_into_another_store_and_again_as_a_copy(
    start: Start, tmp_path: Path
) -> None:
    ed = start()
    ask(ed, "worth keeping", "and its follow-up")
    exported = tmp_path / "kept.trellisd"
    ed.will_type(str(exported))
    ed.command("TrellisExport")
    note = ed.wait_note("exported 2 turns")
    assert note.endswith(f"to {exported}"), note
    assert exported.is_file()
    original = ed.text()

    other = start(db=tmp_path / "other" / "trellisd.db")
    other.command(f"TrellisImport {exported}")
    other.wait_note("imported: worth keeping")
    other.wait_text("\napproval: ")  # the header's mode, read from session/policy as it opens
    # the same conversation, in the other store (whose header has no context meter until a
    # step is taken there)
    assert other.text() == re.sub(r"\ncontext .* tokens \(\d+%\).*\n", "\n", original)

    other.will_pick("as a copy")
    other.command(f"TrellisImport {exported}")
    other.wait_for(lambda: "imported as a copy" in other.text(), "the copy")
    asked = other.asked()[-1]
    assert "is already in this store" in asked["prompt"], asked
    copy = other.current()
    assert copy and copy["sessionId"] != ed.current()["sessionId"]  # type: ignore[index]
    assert "### You\nand its follow-up" in other.text()


def test_sessions_are_searched_by_the_words_of_their_turns(start: Start) -> None:
    ed = start()
    ask(ed, "how does the tokenizer split words")
    ed.command("TrellisNew gardening")
    ed.wait_text("# gardening")
    ask(ed, "when to plant tulips")
    ed.command("TrellisNew cooking")
    ed.wait_text("# cooking")

    ed.will_pick("tulips")
    ed.command("TrellisSessions tulips")
    ed.wait_text("### You\nwhen to plant tulips")
    asked = ed.asked()[-1]
    assert asked["prompt"] == "Sessions matching “tulips”:"
    assert len(asked["items"]) == 1, asked
    assert asked["items"][0].startswith("gardening · ")
    assert "«tulips»" in asked["items"][0], asked

    ed.command("TrellisSessions nothing-like-this")
    ed.wait_note("no session matches “nothing-like-this”")


def test_step_mode_pauses_after_each_step_and_resume_takes_the_next(start: Start) -> None:
    ed = start(
        script=[
            {"text": "Looking. ", "tool": "list_dir", "arguments": {"path": "."}},
            {"text": "It holds a README."},
        ]
    )
    ed.command("TrellisNew walk")
    ed.wait_text("# walk")
    ed.command("TrellisStep")
    ed.wait_note("step mode: each turn pauses after every step")
    ed.command("Trellis what is here?")
    ed.wait_note("the turn paused after its step")
    ed.wait_idle()
    assert re.search(r"^\*paused", ed.text(), re.M), ed.text()
    assert "It holds a README." not in ed.text()

    ed.command("TrellisResume")
    ed.wait_text("### trellisd (resumed)")
    ed.wait_idle()
    resumed = ed.text().split("### trellisd (resumed)", 1)[1]
    assert "It holds a README." in resumed
    assert re.search(r"^\*finished · ", resumed, re.M), resumed


def test_pause_stops_the_running_turn_after_its_step(start: Start, tmp_path: Path) -> None:
    go = tmp_path / "go"
    ed = start(
        script=[
            {
                "text": "Looking around the project now. ",
                "tool": "list_dir",
                "arguments": {"path": "."},
                "holdAfter": 2,
                "holdFile": str(go),
            },
            {"text": "It holds a README."},
        ]
    )
    ed.command("Trellis what is here?")
    ed.wait_text("Looking around")
    ed.command("TrellisPause")
    ed.wait_note("the turn pauses after its step")
    go.touch()
    ed.wait_note("the turn paused after its step")
    ed.wait_idle()
    assert "It holds a README." not in ed.text()
    ed.command("TrellisResume")
    ed.wait_text("It holds a README.")
    ed.wait_idle()


def test_a_session_whose_store_was_changed_by_hand_says_so(start: Start, tmp_path: Path) -> None:
    first = start(db=tmp_path / "kept.db")
    first.command("Trellis alpha question")
    first.wait_idle()
    first.close()
    con = apsw.Connection(str(tmp_path / "kept.db"))
    con.execute("UPDATE step SET text = 'something else'")
    con.close()

    ed = start(db=tmp_path / "kept.db")
    ed.will_pick("alpha question")
    ed.command("TrellisSessions")
    ed.wait_note("the session's log is broken")
    assert "*the session's log is broken" in ed.wait_text("### You\nalpha question")


MCP_SERVER = str(reachable(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py"))


def test_an_mcp_tool_is_approved_naming_its_server_and_listed_in_the_tools_view(
    start: Start,
) -> None:
    ed = start(
        script=[
            {"tool": "mcp__t__echo", "arguments": {"text": "from the server"}},
            {"text": "The server answered."},
        ],
        setup={"mcp_servers": [{"name": "t", "command": sys.executable, "args": [MCP_SERVER]}]},
    )
    ed.will_pick("Allow once")
    ed.command("Trellis call the server")
    ed.wait_text("The server answered.")
    ed.wait_idle()
    approvals = [a for a in ed.asked() if a.get("kind") == "trellisd.approval"]
    assert len(approvals) == 1, approvals
    assert "call MCP server t, tool echo" in approvals[0]["prompt"]
    assert "> MCP server t, tool echo" in ed.text()

    ed.command("TrellisTools")
    lines = ed.wait_for(lambda: ed.buffer_named("/tools"), "the tools buffer")
    assert "read_file · builtin · read · depends" in lines
    assert "mcp__t__echo · mcp t · exec · ask · mcp:t/echo" in lines
    assert any(line.startswith("t · session · stdio · running · 8 tool(s)") for line in lines)


def test_a_reopened_session_gets_the_configured_mcp_servers_again(
    start: Start, tmp_path: Path
) -> None:
    first = start(db=tmp_path / "kept.db")
    first.command("Trellis alpha question")
    first.wait_idle()
    first.close()

    # A daemon started since the session was opened: the servers come with the reopen.
    servers = [{"name": "t", "command": sys.executable, "args": [MCP_SERVER]}]
    ed = start(db=tmp_path / "kept.db", setup={"mcp_servers": servers})
    ed.will_pick("alpha question")
    ed.command("TrellisSessions")
    ed.wait_text("### You\nalpha question")
    ed.command("TrellisTools")
    lines = ed.wait_for(lambda: ed.buffer_named("/tools"), "the tools buffer")
    assert "mcp__t__echo · mcp t · exec · ask · mcp:t/echo" in lines
    assert any(line.startswith("t · session · stdio · running") for line in lines)


def test_prompts_typed_while_a_turn_runs_are_queued_listed_and_one_dropped(
    start: Start, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    ed = start(
        script=[
            {"text": "First answer.", "holdFile": str(go)},
            {"text": "Second answer."},
            {"text": "Fourth answer."},
        ]
    )
    ed.command("Trellis first prompt")
    ed.wait_text("### You\nfirst prompt")
    ed.wait_for(lambda: ed.current() and ed.current()["running"], "the first turn runs")
    for prompt in ("second prompt", "third prompt", "fourth prompt"):
        ed.command(f"Trellis {prompt}")
    ed.wait_for(lambda: ed.statusline().endswith(", 3 prompts queued"), "three prompts queued")

    ed.will_pick("third prompt")
    ed.command("TrellisQueue")
    ed.wait_note("dropped from the queue: third prompt")
    listed = ed.asked()[-1]
    assert listed["kind"] == "trellisd.queue"
    assert listed["items"] == ["1. second prompt", "2. third prompt", "3. fourth prompt"]
    ed.wait_note("your queued prompt did not run: queued prompt")
    ed.wait_for(lambda: ed.statusline().endswith(", 2 prompts queued"), "two prompts queued")
    go.touch()

    text = ed.wait_for(
        lambda: len(re.findall(r"^\*finished", t := ed.text(), re.M)) == 3 and t,
        "the first turn and the two queued ones to finish",
    )
    assert "third prompt" not in text
    assert text.index("First answer.") < text.index("### You\nsecond prompt")
    assert "Second answer." in section(text, "second prompt")
    assert "Fourth answer." in section(text, "fourth prompt")
    ed.wait_idle()


def test_a_budget_stops_the_next_turn_and_the_spend_is_shown(start: Start) -> None:
    ed = start(script=[{"text": "First answer."}, {"text": "never sent"}])
    ed.command("Trellis first prompt")
    ed.wait_text("First answer.")
    ed.wait_idle()
    ed.command("TrellisBudget tokens=5")
    note = ed.wait_note("spent ")
    spent = int(re.search(r"spent (\d+) of 5 tokens", note).group(1))
    assert spent > 5
    assert ed.statusline() == f"trellis: idle · spent {spent} of 5 tokens"

    ed.command("Trellis second prompt")
    text = ed.wait_text("*exhausted: the next model call")
    assert "would pass the session's budget of 5 tokens" in section(text, "second prompt")
    assert f"*spent {spent} of 5 tokens*" in section(text, "second prompt")
    ed.wait_note("the turn stopped before the model finished: the next model call")
    assert "never sent" not in text
