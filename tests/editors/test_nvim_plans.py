"""Plans, approval modes and rules in real headless Neovims (0.7 and 0.11) against the real
daemon, whose scripted model keeps a plan with ``update_plan`` and tries a write that plan
mode refuses: the plan drawn live in the header and after a reopen, :TrellisPlanMode setting
``plan`` (as ``session/policy`` says), the refusal drawn plainly, "Run this plan" (gR)
starting a turn that records whose plan it follows, and a command's approval answered with
its rule, after which the next command the rule matches runs unasked."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

try:
    from .test_nvim_turn_controls import Start, start  # noqa: F401 (fixtures)
    from .test_nvim_walls import needs_bwrap
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_nvim_turn_controls import Start, start  # type: ignore[no-redef]  # noqa: F401
    from test_nvim_walls import needs_bwrap  # type: ignore[no-redef]

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

ERROR = 4  # vim.log.levels.ERROR

PLAN = [
    {"content": "write the notes", "status": "in_progress", "priority": "high"},
    {"content": "check them", "status": "pending"},
]
DONE = [{**entry, "status": "completed"} for entry in PLAN]


def policy(ed: Any) -> dict[str, Any]:
    """The current session's policy, as session/policy answers now."""
    ed.lua(
        """
        T.policy = nil
        local id = require("trellisd").current().sessionId
        require("trellisd.daemon").request("session/policy", { sessionId = id }, function(e, r)
          T.policy = r or { error = e.message }
        end)
        """
    )
    answer: dict[str, Any] = ed.wait_for(lambda: ed.lua("return T.policy"), "session/policy")
    return answer


def errors(ed: Any) -> list[str]:
    return list(
        ed.lua(
            "local level = ... return vim.tbl_map(function(n) return n.message end,"
            " vim.tbl_filter(function(n) return n.level == level end, T.notes))",
            ERROR,
        )
    )


def put_cursor_on(ed: Any, line: str) -> None:
    row = ed.conversation().index(line) + 1
    ed.lua("vim.api.nvim_win_set_cursor(0, { ..., 0 })", row)


def test_a_plan_made_in_plan_mode_is_drawn_live_and_run_in_a_turn_that_follows_it(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    planned, answered = tmp_path / "planned", tmp_path / "answered"
    notes = tmp_path / "project" / "notes.txt"
    script = [
        {
            "text": "Planning.",
            "tool": "update_plan",
            "arguments": {"entries": PLAN},
            "holdFile": str(planned),
        },
        {"tool": "write_file", "arguments": {"path": "notes.txt", "content": "too soon\n"}},
        {"text": "Here is the plan.", "holdFile": str(answered)},
        {"tool": "write_file", "arguments": {"path": "notes.txt", "content": "planned\n"}},
        {"tool": "update_plan", "arguments": {"entries": DONE}},
        {"text": "Carried out."},
    ]
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    ed = start(script=script, shared=runtime)
    ed.command("TrellisNew")
    ed.wait_text("approval: ask · ")
    ed.command("TrellisPlanMode")
    ed.wait_text("approval: plan · read and plan only")
    assert policy(ed)["approval"] == "plan"

    ed.command("Trellis plan the notes")
    ed.wait_text("### You\nplan the notes")
    # another editor follows the turn before the model plans
    follower = start(shared=runtime)
    follower.will_pick("")
    follower.command("TrellisSessions")
    follower.wait_text("### You\nplan the notes", "approval: plan")
    assert follower.current()["running"]  # type: ignore[index]
    planned.touch()
    live = (
        "## Plan of turn “plan the notes” · 0 of 2 done",
        "◐ write the notes (high)\n○ check them",
    )
    ed.wait_text(
        *live,
        "> `write_file` refused",
        "> → refused: the session is in plan mode, where nothing is changed",
    )
    follower.wait_text(*live)
    # live: the turn is still running (its last step waits)
    assert ed.current()["running"] and follower.current()["running"]  # type: ignore[index]
    assert not notes.exists()
    answered.touch()
    mark = "> plan: 0 of 2 done (gR or :TrellisRunPlan runs it)"
    ed.wait_text("Here is the plan.", mark)
    ed.wait_idle()
    follower.wait_text("Here is the plan.", mark)
    assert errors(ed) == [], "plan mode's refusal is no error"

    # gR on the planned turn: asked which mode, ask first; acceptEdits writes unasked
    ed.will_pick("acceptEdits")
    put_cursor_on(ed, "plan the notes")
    ed.nvim.input("gR")
    ed.wait_text("> carries out the plan of turn “plan the notes” (approval: acceptEdits)")
    text = ed.wait_text(
        "Carried out.", "## Plan of turn “plan the notes”, carried out · 2 of 2 done"
    )
    ed.wait_idle()
    question = ed.asked()[-1]
    assert question["kind"] == "trellisd.run_plan", question
    assert question["prompt"] == "Run the plan of turn “plan the notes” under which approval mode?"
    assert [item.split(" — ")[0] for item in question["items"]] == ["ask", "acceptEdits", "auto"]
    assert notes.read_text() == "planned\n"
    assert "approval: acceptEdits · writes and edits" in text
    assert policy(ed)["approval"] == "acceptEdits"
    assert errors(ed) == []
    # the other editor's header follows each mode change (session/modeChanged), and the
    # first editor's follows the other's
    follower.wait_text("approval: acceptEdits · writes and edits")
    follower.command("TrellisMode auto")
    ed.wait_text("approval: auto · ")
    assert errors(follower) == []

    # reopened in another editor: the newest plan in the header, both planned turns marked,
    # the second turn following the first's plan (Turn.followsPlan)
    ed.close()
    other = start(shared=runtime)
    other.will_pick("plan the notes")
    other.command("TrellisSessions")
    text = other.wait_text(
        "Carried out.", "> carries out the plan of turn “plan the notes”", "approval: auto"
    )
    lines = other.conversation()
    assert len([line for line in lines if line.startswith("> plan: ")]) == 2, text
    assert mark in lines
    assert "## Plan of turn “plan the notes”, carried out · 2 of 2 done" in lines, text
    assert "✓ write the notes (high)" in lines and "✓ check them" in lines


@needs_bwrap
def test_a_rule_saved_from_an_approval_runs_the_next_command_it_matches_unasked(
    start: Start,  # noqa: F811
) -> None:
    script = [
        {"tool": "run_command", "arguments": {"argv": ["echo", "first"]}},
        {"tool": "run_command", "arguments": {"argv": ["echo", "second"]}},
        {"text": "Ran both."},
    ]
    ed = start(script=script)
    ed.will_pick("in this session")
    ed.command("Trellis echo twice")
    text = ed.wait_text("Ran both.", "│ second")
    ed.wait_idle()
    approvals = [a for a in ed.asked() if a.get("kind") == "trellisd.approval"]
    assert len(approvals) == 1, ed.asked()  # the second command ran unasked
    items = approvals[0]["items"]
    assert items[3:] == [
        "Always allow `echo **` in this session",
        "Always allow `echo **` for this project",
        "Deny",
    ], items
    assert "the rule `echo **` would allow every command it matches" in approvals[0]["prompt"]
    assert "> rule offered: `echo **`" in text
    assert "> allowed the rule `echo **` for this session" in text
    grants = [g for g in policy(ed).get("grants", []) if g["kind"] == "rule"]
    assert [(g["rule"], g["scope"]) for g in grants] == [(["echo", "**"], "session")], grants

    # :TrellisGrants lists it by its words and revokes it by its target
    ed.will_pick("rule `echo **`", "Revoke it")
    ed.command("TrellisGrants")
    ed.wait_note("revoked: rule `echo **` · this session")
    listed = next(a for a in ed.asked() if a.get("kind") == "trellisd.grants")
    assert "rule `echo **` · this session" in listed["items"]
    assert not [g for g in policy(ed).get("grants", []) if g["kind"] == "rule"]
