"""Live tool activity and editor context in real headless Neovims (0.7 and 0.11): a tool
call drawn as its status changes, a command's output while it runs, and :TrellisAsk with the
selection or the current buffer."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

try:
    from . import nvim_fixtures as fx
    from .test_nvim import Start, nvim_bin, start  # noqa: F401 (fixtures)
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]
    from test_nvim import Start, nvim_bin, start  # type: ignore[no-redef]  # noqa: F401

pytest.importorskip("pynvim", reason="pynvim is not installed (.ci/nvim-setup.sh installs it)")

# Prints, then waits until the test opens the FIFO for writing: it cannot end on its own.
WAITS = (
    "import sys; print('halfway there', flush=True);"
    " f = open(sys.argv[1]); f.read(); print('all done')"
)


def test_a_tool_call_and_its_output_are_drawn_as_they_happen(
    start: Start,  # noqa: F811
) -> None:
    with fx.reachable_from_the_walls() as folder:
        drawn_as_they_happen(start, folder / "go")


def drawn_as_they_happen(start: Start, fifo: Path) -> None:
    os.mkfifo(fifo)
    argv = [sys.executable, "-c", WAITS, str(fifo)]
    ed = start(script=[{"tool": "run_command", "arguments": {"argv": argv}}, {"text": "Ran."}])
    ed.will_pick("Allow once")
    ed.command("Trellis run the slow thing")

    text = ed.wait_text("│ halfway there")
    assert "> tool `run_command`" in text and "· proposed" in text
    assert "> `run_command` running" in text
    assert "│ all done" not in text and "*finished" not in text
    assert ed.statusline() == "trellis: running run_command"

    with open(fifo, "w") as f:
        f.write("go")
    ed.wait_idle()
    text = ed.text()
    assert "│ all done" in text
    assert "> `run_command` done" in text
    assert text.index("│ all done") < text.index("> `run_command` done") < text.index("Ran.")
    assert text.count("> tool `run_command`") == 1  # the step does not draw the call again
    assert "> → $ " in text  # the result's first line


def test_a_refused_call_says_so(start: Start) -> None:  # noqa: F811
    ed = start(
        script=[{"tool": "run_command", "arguments": {"argv": ["touch", "x"]}}, {"text": "ok"}]
    )
    ed.will_pick("Deny")
    ed.command("Trellis touch it")
    ed.wait_idle()
    assert "> `run_command` refused" in ed.text()


def test_ask_about_the_selected_lines_and_about_the_buffer(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ed = start()  # the scripted model echoes what it is given
    source = tmp_path / "project" / "app.py"
    source.write_text("def f():\n    y = 2\n    z = 3\n    return 1\n")
    ed.command(f"edit {source}")
    ed.command("2,3TrellisAsk what do these do?")
    text = ed.wait_text("> with lines 2–3 of app.py", '<selection path="app.py" lines="2-3">')
    assert "    y = 2\n    z = 3\n</selection>" in text
    assert "def f" not in text.split("### You\nwhat do these do?")[1]
    ed.wait_idle()

    ed.command(f"buffer {source}")  # back to the file, whose unsaved change goes with the prompt
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, {'def g():'})")
    ed.command("TrellisAsk and the whole file?")
    text = ed.wait_text('<file path="app.py">\ndef g():')
    assert "> with app.py" in text
    ed.wait_idle()
