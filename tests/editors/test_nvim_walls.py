"""The walls in real headless Neovims (0.7 and 0.11): the mode a session's programs run in,
shown in its conversation's header and in detail by :TrellisWalls, and a command asking to
run outside them (``run_command {argv, escalate: true, reason}``) asked louder than an
ordinary approval, allowed once or denied. The commands run inside the real walls
(bubblewrap)."""

from __future__ import annotations

import shutil
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

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)


def header(ed: Any) -> list[str]:
    """The conversation's lines before its first turn."""
    lines = ed.conversation()
    return lines[: lines.index("### You")] if "### You" in lines else lines


def escalations(ed: Any) -> list[dict[str, Any]]:
    return [a for a in ed.asked() if a.get("kind") == "trellisd.escalation"]


def test_the_header_shows_the_default_walls_and_trellis_walls_their_details(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ed = start(script=[{"text": "Hello."}])
    ed.command("TrellisWalls")
    ed.wait_note("there is no conversation to show the walls of")
    ed.command("Trellis hi")
    ed.wait_text("Hello.", "walls: workspace-write · network off")
    ed.wait_idle()
    assert "walls: workspace-write · network off" in header(ed)

    ed.command("TrellisWalls")
    current = ed.current()
    assert current is not None
    details = ed.wait_for(
        lambda: ed.buffer_named("trellis-walls://" + current["sessionId"]), "the walls' details"
    )
    assert details[0] == "# The walls of “hi”"
    assert any(line.startswith("mode: workspace-write: programs may write") for line in details)
    assert "network off (the session's own loopback only)" in details
    assert "processes: at most 1024 at once" in details
    hidden_at = details.index("## Hidden (not even readable)")
    writable = details[details.index("## Writable") + 1 : hidden_at]
    assert f"- {(tmp_path / 'project').resolve()}" in writable
    hidden = details[hidden_at + 1 :]
    assert f"- {tmp_path / '.ssh'}" in hidden
    protected = details[details.index("## Protected (read-only in the root)") + 1 :]
    assert "- .git/hooks" in protected and "- .trellisd.toml" in protected


@needs_bwrap
def test_a_read_only_setting_shows_and_holds(start: Start, tmp_path: Path) -> None:  # noqa: F811
    script = [
        {"tool": "run_command", "arguments": {"argv": ["sh", "-c", "echo x > made.txt"]}},
        {"text": "Tried."},
    ]
    ed = start(script=script, setup={"sandbox": "read-only", "policy": {"approval": "auto"}})
    ed.command("Trellis make a file")
    ed.wait_text("Tried.", "walls: read-only · network off")
    ed.wait_idle()
    assert "walls: read-only · network off" in header(ed)
    assert not (tmp_path / "project" / "made.txt").exists()
    assert ed.asked() == []  # approval auto: a walled command runs without asking

    # reopened (as after a restart of the editor), the header says it again
    ed.will_pick("make a file")
    ed.command("TrellisSessions")
    ed.wait_for(lambda: ed.asked(), "the session list")
    ed.wait_text("Tried.", "walls: read-only · network off")


def escalate(start: Start, tmp_path: Path, approval: str, pick: str) -> tuple[Any, str, Path]:  # noqa: F811
    """A turn whose model asks to write a file outside the project, outside the walls, under
    the approval mode `approval`, the escalation answered with `pick`: (editor, the
    conversation, the file)."""
    target = tmp_path / "outside.txt"
    script = [
        {
            "tool": "run_command",
            "arguments": {
                "argv": ["sh", "-c", f"echo outside > {target}"],
                "escalate": True,
                "reason": "the file lives outside the project",
            },
        },
        {"text": "Done asking."},
    ]
    ed = start(script=script, setup={"policy": {"approval": approval}})
    ed.will_pick(pick)
    ed.command("Trellis write outside")
    text = ed.wait_text("Done asking.")
    ed.wait_idle()
    return ed, text, target


@needs_bwrap
def test_an_escalation_is_asked_apart_and_allowed_runs_outside_the_walls(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    # approval auto: only the escalation asks
    ed, text, target = escalate(start, tmp_path, "auto", "Allow once")
    asked = escalations(ed)
    assert len(asked) == 1 and len(ed.asked()) == 1, ed.asked()
    assert asked[0]["items"] == ["Allow once, outside the walls", "Deny"]
    prompt = asked[0]["prompt"]
    assert prompt.startswith("⚠ Run OUTSIDE the walls? the model asks to run")
    assert f"echo outside > {target}" in prompt
    assert "reason: the file lives outside the project" in prompt
    assert any("OUTSIDE the walls" in n for n in ed.notes())
    assert "> ⚠ escalation asked by the model: run OUTSIDE the walls: " in text
    assert "> reason: the file lives outside the project" in text
    assert "> escalation allowed once: the command runs outside the walls" in text
    assert target.read_text() == "outside\n"


@needs_bwrap
def test_an_escalation_denied_is_not_run(start: Start, tmp_path: Path) -> None:  # noqa: F811
    ed, text, target = escalate(start, tmp_path, "all", "Deny")
    assert len(escalations(ed)) == 1, "asked even under approval all"
    assert "> escalation denied: the command was not run" in text
    assert "refused: the user did not approve" in text
    assert not target.exists()
