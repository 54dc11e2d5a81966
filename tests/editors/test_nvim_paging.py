"""A long conversation in a real headless Neovim against the real daemon: it opens with its
newest page of turns, loads the pages before on demand, and shows every step's text of the
turns it reads from the history."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    from . import nvim_fixtures as fx
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]

from tests.fixtures.sessions import fill_conversation

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

EARLIER = "↑ earlier turns: [[ or :TrellisEarlier loads them"


@pytest.fixture(params=sorted(fx.NVIMS))
def editor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[fx.Editor]:
    project = tmp_path / "project"
    project.mkdir()
    fill_conversation(tmp_path / "trellisd.db", project.resolve(), 120)
    ed = fx.start_editor(fx.nvim_binary(request.param), tmp_path, workdir=project)
    yield ed
    ed.close()


def prompts(ed: fx.Editor) -> list[str]:
    lines = ed.conversation()
    return [lines[i + 1] for i, line in enumerate(lines[:-1]) if line == "### You"]


def test_a_long_conversation_opens_with_its_newest_turns_and_loads_earlier_ones(
    editor: fx.Editor,
) -> None:
    ed = editor
    ed.will_pick("long")
    ed.command("TrellisSessions")
    ed.wait_text("question 120", EARLIER)
    assert prompts(ed) == [f"question {n}" for n in range(71, 121)]

    # every step's text of a turn read from the history, the footer after the last
    text = ed.wait_text("looking at 120")
    turn = text.split("### You\nquestion 120\n", 1)[1]
    assert turn.index("looking at 120") < turn.index("answer 120") < turn.index("*finished")

    ed.nvim.input("[[")
    ed.wait_for(lambda: len(prompts(ed)) == 100, "the page before")
    assert prompts(ed) == [f"question {n}" for n in range(21, 121)]
    assert EARLIER in ed.text()

    ed.command("TrellisEarlier")
    ed.wait_for(lambda: len(prompts(ed)) == 120, "the first page")
    assert prompts(ed) == [f"question {n}" for n in range(1, 121)]
    assert EARLIER not in ed.text()
    # the turns loaded last show their steps as the others do
    first = ed.text().split("### You\nquestion 1\n", 1)[1].split("### You", 1)[0]
    assert "looking at 1\n" in first and "answer 1\n" in first, first
