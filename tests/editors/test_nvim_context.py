"""The context meter, the cost and :TrellisCompact in real headless Neovims (0.7 and 0.11)
against the real daemon with the scripted model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

try:
    from .test_nvim import Start, ask, nvim_bin, start
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_nvim import Start, ask, nvim_bin, start  # type: ignore[no-redef]

__all__ = ["nvim_bin", "start"]  # the fixtures the tests below use

USAGE_LINE = re.compile(r"^context \d+ of 128\.0k tokens \(\d+%\) · \$[0-9.]+ this session$", re.M)


def priced(tmp_path: Path) -> None:
    """A price for the scripted model, in the daemon's price file."""
    folder = tmp_path / "home" / "config" / "trellisd"
    folder.mkdir(parents=True, exist_ok=True)
    prices = {"scripted": {"input": 1000.0, "output": 2000.0}}
    (folder / "prices.json").write_text(json.dumps(prices))


def test_the_context_meter_and_the_cost_show_after_each_step(start: Start, tmp_path: Path) -> None:
    priced(tmp_path)
    ed = start(script=[{"text": "first answer"}, {"text": "second answer"}])
    assert ed.lua("return require('trellisd').usage()") == ""
    ask(ed, "hello there")

    text = ed.wait_for(lambda: USAGE_LINE.search(ed.text()) and ed.text(), "the usage line")
    first = USAGE_LINE.search(text)
    assert first is not None
    assert ed.conversation()[2] == first.group(0)  # in the session window's header
    short = ed.lua("return require('trellisd').usage()")
    assert re.fullmatch(r"ctx \d+% · \$[0-9.]+", short), short
    assert ed.statusline() == "trellis: idle"

    cost_before = float(short.rsplit("$", 1)[1])
    ask(ed, "and again")
    ed.wait_for(
        lambda: float(ed.lua("return require('trellisd').usage()").rsplit("$", 1)[1]) > cost_before,
        "the session's cost to grow with the second turn",
    )
    assert len(USAGE_LINE.findall(ed.text())) == 1  # the header line is updated, not added


def test_compact_summarizes_the_oldest_turns(start: Start) -> None:
    ed = start(script=[{"text": "one"}, {"text": "two"}, {"text": "SUMMARY of one"}])
    ask(ed, "first", "second")
    ed.command("TrellisCompact")
    note = ed.wait_note("compacted")
    assert note.startswith("trellis: compacted: the first 1 turn now sent as a summary"), note
    ed.command("TrellisCompact")
    ed.wait_note("nothing to compact")
