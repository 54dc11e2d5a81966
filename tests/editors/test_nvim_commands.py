"""Custom commands and hooks in real headless Neovims (0.7 and 0.11) against the real
daemon: `:Trellis /name` completes the user's and the project's commands and runs one (its
check failing, then passing), :TrellisCommands lists them with what a project's had
narrowed, an unknown command is said plainly; :TrellisHooks lists the config file's hooks,
a preToolUse hook that blocks a write shows its reason in the conversation, and a project's
hook asks to run in words of its own, and has its approval revoked from the list."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

try:
    from . import nvim_fixtures as fx
    from .test_nvim import Start, nvim_bin, start
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]
    from test_nvim import Start, nvim_bin, start  # type: ignore[no-redef]

__all__ = ["nvim_bin", "start"]  # the fixtures the tests below use

# The editor's config folder (XDG_CONFIG_HOME), which the daemon it starts reads.
CONFIG = Path("home") / "config" / "trellisd"

CHECK = """---
description: Make a file exist
argument-hint: [file]
verify: ["test", "-f", "$1"]
maxSteps: 10
---
Create $1.
"""

REVIEW = """---
description: Review the code
approval: all
---
Review $ARGUMENTS.
"""

BLOCKING_HOOK = """
[[hooks]]
event = "preToolUse"
matcher = "write_*"
command = ["sh", "-c", "echo 'writes are frozen today' >&2; exit 2"]
"""

# A step of the model that writes a.txt.
WRITE_A = {"text": "Writing.", "tool": "write_file", "arguments": {"path": "a.txt", "content": "x"}}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def open_session(ed: fx.Editor) -> str:
    """:TrellisNew, and its custom commands read (as they are when a session opens)."""
    ed.command("TrellisNew")
    session: str = ed.wait_for(lambda: (c := ed.current()) and c["sessionId"], "a session")
    ed.wait_for(
        lambda: ed.lua('return require("trellisd.commands").lists[...] ~= nil', session),
        "the session's commands to be read",
    )
    return session


def hooks_listed(start: Start) -> tuple[fx.Editor, list[str]]:
    """An editor whose model writes a.txt, and :TrellisHooks' lines for its session."""
    ed = start(script=[WRITE_A, {"text": "The write was refused."}])
    open_session(ed)
    ed.command("TrellisHooks")
    lines: list[str] = ed.wait_for(lambda: ed.buffer_named("/hooks"), "the list of hooks")
    return ed, lines


def write_a(ed: fx.Editor) -> None:
    """Ask for a.txt, and wait for the turn (its write refused) to end."""
    ed.command("Trellis write a.txt")
    ed.wait_text("The write was refused.")
    ed.wait_idle()


def test_a_command_completes_is_listed_and_runs_its_turn_until_its_check_passes(
    start: Start, tmp_path: Path
) -> None:
    write(tmp_path / CONFIG / "commands" / "check.md", CHECK)
    write(tmp_path / "project" / ".trellisd" / "commands" / "review.md", REVIEW)
    ed = start(
        script=[
            {"text": "Not yet."},  # the check fails: the file is not there
            {
                "text": "Writing it.",
                "tool": "write_file",
                "arguments": {"path": "done.txt", "content": "ok\n"},
            },
            {"text": "Done now."},
        ]
    )
    open_session(ed)
    assert ed.lua('return vim.fn.getcompletion("Trellis /", "cmdline")') == ["/check", "/review"]
    assert ed.lua('return vim.fn.getcompletion("Trellis /ch", "cmdline")') == ["/check"]

    ed.command("TrellisCommands")
    lines = ed.wait_for(lambda: ed.buffer_named("/commands"), "the list of commands")
    assert lines[1:3] == [
        "/check [file] · user · Make a file exist",
        "  settings: verify test -f $1 · maxSteps 10",
    ], lines
    assert lines[3] == "/review · project · Review the code", lines
    assert lines[4].startswith("  narrowed: approval: asked all, runs with the session's ("), lines

    ed.will_pick("Allow once")
    ed.command("Trellis /check done.txt")
    ed.wait_text("Done now.")
    ed.wait_idle()
    text = ed.wait_text("> ran the user command /check done.txt")
    assert "### You\n/check done.txt\n" in text, text
    assert "*success · " in text, text
    assert (tmp_path / "project" / "done.txt").read_text() == "ok\n"
    # the check failed before the write, so the model was asked again
    assert text.index("Not yet.") < text.index("Writing it.") < text.index("Done now."), text

    ed.command("Trellis /nope")
    note = ed.wait_note("/nope did not run")
    assert "nope" in note.removeprefix("trellis: /nope did not run"), note
    ed.wait_text("*not run: ")

    # the tree, and the session reopened in another editor, name the turn as it was typed
    # (Turn.command), not by the prompt the command expanded to
    ed.command("TrellisTree")
    tree = ed.wait_for(lambda: ed.buffer_named("/tree"), "the tree buffer")
    assert tree[-1] == "● /check done.txt  ← head", tree
    ed.close()
    other = start()
    other.will_pick("")
    other.command("TrellisSessions")
    text = other.wait_text("### You\n/check done.txt\n", "Done now.")
    assert "### You\nCreate done.txt." not in text, text


def test_hooks_are_listed_and_a_blocking_hook_says_why_in_the_conversation(
    start: Start, tmp_path: Path
) -> None:
    write(tmp_path / CONFIG / "config.toml", BLOCKING_HOOK)
    ed, lines = hooks_listed(start)
    assert lines[1] == (
        "preToolUse · write_* · sh -c echo 'writes are frozen today' >&2; exit 2"
        " · config · approved"
    ), lines

    write_a(ed)
    ed.wait_text("> preToolUse hook blocked: writes are frozen today (sh -c ")
    assert not (tmp_path / "project" / "a.txt").exists()
    assert ed.asked() == [], "a blocked call asks nobody"


def test_a_prompt_a_hook_blocked_says_so_plainly(start: Start, tmp_path: Path) -> None:
    write(
        tmp_path / CONFIG / "config.toml",
        '[[hooks]]\nevent = "userPromptSubmit"\n'
        'command = ["sh", "-c", "echo no prompts about passwords >&2; exit 2"]\n',
    )
    ed = start(script=[{"text": "You should not see this."}])
    open_session(ed)
    ed.command("Trellis what is the admin password")
    ed.wait_text("*blocked by a userPromptSubmit hook: no prompts about passwords*")
    ed.wait_idle()
    note = ed.wait_note("a userPromptSubmit hook blocked the prompt: no prompts about passwords")
    assert "You should not see this." not in ed.text()
    assert note.startswith("trellis: "), note


def test_a_project_hook_asks_to_run_as_a_hook(start: Start, tmp_path: Path) -> None:
    write(
        tmp_path / "project" / ".trellisd.toml",
        BLOCKING_HOOK.replace("frozen today", "frozen by the project"),
    )
    ed, lines = hooks_listed(start)
    assert lines[1].endswith(" · project · awaiting approval"), lines

    ed.will_pick("Allow")
    write_a(ed)
    asked = ed.asked()[0]
    assert asked["prompt"].startswith(
        "trellisd asks to run the project's preToolUse hook: sh -c "
    ), asked
    assert asked["items"] == [
        "Allow (this project, until its files change)",
        "Deny (skip it in this session)",
    ], asked
    ed.wait_text(
        "> approval asked: run the project's preToolUse hook: ", "> preToolUse hook blocked: "
    )
    assert not (tmp_path / "project" / "a.txt").exists()

    # Approved: `x` on its line in :TrellisHooks takes the approval back.
    ed.command("TrellisHooks")
    ed.wait_for(lambda: ed.buffer_named("/hooks")[1].endswith(" · approved"), "approved")
    ed.wait_for(
        lambda: ed.lua("return vim.api.nvim_buf_get_name(0)").endswith("/hooks"),
        "the list's window to be focused",
    )
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 0 })")
    ed.nvim.input("x")
    note = ed.wait_note("revoked: ")
    assert note == (
        "trellis: revoked: sh -c 'echo '\"'\"'writes are frozen by the project'\"'\"' >&2;"
        " exit 2' is asked for again"
    ), note
    ed.wait_for(
        lambda: ed.buffer_named("/hooks")[1].endswith(" · project · awaiting approval"),
        "the list to say it awaits approval again",
    )
    ed.nvim.input("x")
    ed.wait_note("this hook is not approved: nothing to revoke")
