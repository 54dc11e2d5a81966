"""Takes editors/nvim/screenshot.png: a real Neovim in tmux, the plugin talking to a real
trellisd with the scripted model, the screen captured with its colours and drawn to PNG.

Needs tmux, Neovim (0.10+ looks best), Pillow in the Python that runs this, and trellisd:

    python editors/nvim/scripts/screenshot.py --nvim /path/to/nvim --trellisd /path/to/trellisd
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

PLUGIN = Path(__file__).resolve().parents[1]
COLS, ROWS = 150, 52
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")

BUGGY = '''"""Frames of the LSP base protocol, read from a byte stream."""


class Parser:
    def __init__(self) -> None:
        self.buffer = b""
        self.length: int | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        frames = []
        if len(self.buffer) < (self.length or 0):
            return frames
        self.buffer += chunk
        while True:
            if self.length is None:
                head, sep, rest = self.buffer.partition(b"\\r\\n\\r\\n")
                if not sep:
                    return frames
                self.length = int(head.split(b":")[1])
                self.buffer = rest
            if len(self.buffer) < self.length:
                return frames
            frames.append(self.buffer[: self.length])
            self.buffer = self.buffer[self.length :]
            self.length = None
'''
FIXED = BUGGY.replace(
    "        if len(self.buffer) < (self.length or 0):\n            return frames\n"
    "        self.buffer += chunk\n",
    "        self.buffer += chunk\n        if len(self.buffer) < (self.length or 0):\n"
    "            return frames\n",
)

SCRIPT = [
    {
        "text": "Let me read the parser first. ",
        "tool": "read_file",
        "arguments": {"path": "frames/parser.py"},
        "delayMs": 30,
    },
    {
        "text": "`feed()` checks the buffered length *before* it appends the chunk, so the "
        "chunk that completes the last frame is never looked at. Append first, then check.",
        "delayMs": 12,
    },
    {
        "text": "Moving the check after the append. ",
        "tool": "write_file",
        "arguments": {"path": "frames/parser.py", "content": FIXED},
        "delayMs": 30,
    },
    {"text": "Done: the length is checked after each append.", "delayMs": 20},
    {"text": "A test that feeds the last frame one byte at a time.", "delayMs": 120},
    {
        "text": "And one for an empty chunk: it returns at once and leaves the buffer as it "
        "was, so a reader that polls does not lose what it had.",
        "delayMs": 200,
    },
]

INIT = """
vim.opt.runtimepath:prepend({plugin!r})
vim.cmd("syntax on")
vim.cmd("filetype plugin indent on")
vim.opt.termguicolors = true
vim.opt.laststatus = 3
vim.opt.autoread = true
vim.opt.number = true
vim.opt.signcolumn = "no"
vim.opt.shortmess:append("I")
vim.opt.fillchars = {{ vert = "│" }}
vim.opt.statusline = " %f %m%=%{{v:lua.require'trellisd'.statusline()}} "
require("trellisd").setup({{
  cmd = {{ {trellisd!r}, "--db", {db!r} }},
  env = {{ TRELLISD_PROVIDER = "scripted", TRELLISD_SCRIPT = {script!r} }},
}})
"""


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", "trellis-shot", *args], check=True, capture_output=True, text=True
    ).stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-t", "shot")


def wait_screen(pattern: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while pattern not in screen():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {pattern!r} on screen:\n{screen()}")
        time.sleep(0.1)


def keys(*keys: str) -> None:
    tmux("send-keys", "-t", "shot", *keys)


def run(nvim: str, trellisd: str, out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="trellis-shot-"))
    home = work / "home"
    project = home / "src" / "frames"
    (project / "frames").mkdir(parents=True)
    (project / "frames" / "parser.py").write_text(BUGGY)
    script = work / "script.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in SCRIPT))
    init = work / "init.lua"
    init.write_text(
        INIT.format(
            plugin=str(PLUGIN), trellisd=trellisd, db=str(work / "t.db"), script=str(script)
        )
    )
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(work / "config"),
        "XDG_CACHE_HOME": str(work / "cache"),
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_STATE_HOME": str(work / "state"),
        "COLORTERM": "truecolor",
        "TERM": "tmux-256color",
    }
    subprocess.run(["tmux", "-L", "trellis-shot", "kill-server"], capture_output=True)
    subprocess.run(
        [
            "tmux",
            "-L",
            "trellis-shot",
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "shot",
            "-x",
            str(COLS),
            "-y",
            str(ROWS),
            "-c",
            str(project),
            f"{nvim} -u {init} -i NONE -n frames/parser.py",
        ],
        check=True,
        env=env,
    )
    try:
        tmux("set", "-g", "default-terminal", "tmux-256color")
        tmux("set", "-ga", "terminal-overrides", ",*:Tc")
        tmux("set", "-g", "status", "off")
        wait_screen("class Parser")
        keys(":Trellis Why does the parser drop the last frame?", "Enter")
        wait_screen("Append first")
        time.sleep(1.5)
        keys(":Trellis Fix it", "Enter")
        wait_screen("Type number")
        keys("1", "Enter")
        wait_screen("checked after each append")
        time.sleep(1)
        keys(":checktime", "Enter")
        keys(":vertical resize 92", "Enter")
        keys(":Trellis And a test for it?", "Enter")
        wait_screen("one byte")
        keys(":TrellisSteer also cover an empty chunk", "Enter")
        wait_screen("returns at once")
        keys(":", "Escape")
        time.sleep(0.3)
        ansi = tmux("capture-pane", "-p", "-e", "-t", "shot")
    finally:
        keys(":qa!", "Enter")
        time.sleep(1)
        subprocess.run(["tmux", "-L", "trellis-shot", "kill-server"], capture_output=True)
    render(ansi, out)
    shutil.rmtree(work, ignore_errors=True)


# ANSI to PNG

BASE16 = [
    (0x07, 0x08, 0x0D),
    (0xCD, 0x31, 0x31),
    (0x0D, 0xBC, 0x79),
    (0xE5, 0xE5, 0x10),
    (0x24, 0x72, 0xC8),
    (0xBC, 0x3F, 0xBC),
    (0x11, 0xA8, 0xCD),
    (0xE5, 0xE5, 0xE5),
    (0x66, 0x66, 0x66),
    (0xF1, 0x4C, 0x4C),
    (0x23, 0xD1, 0x8B),
    (0xF5, 0xF5, 0x43),
    (0x3B, 0x8E, 0xEA),
    (0xD6, 0x70, 0xD6),
    (0x29, 0xB8, 0xDB),
    (0xFF, 0xFF, 0xFF),
]
DEFAULT_FG, DEFAULT_BG = (0xE0, 0xE2, 0xEA), (0x14, 0x16, 0x1B)


def xterm256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    v = 8 + (n - 232) * 10
    return v, v, v


def cells(ansi: str) -> list[list[tuple[str, dict[str, object]]]]:
    rows = []
    style: dict[str, object] = {}
    for line in ansi.split("\n")[:ROWS]:
        row: list[tuple[str, dict[str, object]]] = []
        for token in re.split(r"(\x1b\[[0-9;:]*m)", line):
            if token.startswith("\x1b["):
                codes = [int(c) if c else 0 for c in re.split(r"[;:]", token[2:-1])] or [0]
                i = 0
                while i < len(codes):
                    c = codes[i]
                    if c == 0:
                        style = {}
                    elif c == 1:
                        style["bold"] = True
                    elif c == 3:
                        style["italic"] = True
                    elif c == 4:
                        style["underline"] = True
                    elif c == 7:
                        style["reverse"] = True
                    elif c == 22:
                        style.pop("bold", None)
                    elif c == 23:
                        style.pop("italic", None)
                    elif c == 24:
                        style.pop("underline", None)
                    elif c == 27:
                        style.pop("reverse", None)
                    elif 30 <= c <= 37 or 90 <= c <= 97:
                        style["fg"] = BASE16[c - 30 if c < 90 else c - 82]
                    elif 40 <= c <= 47 or 100 <= c <= 107:
                        style["bg"] = BASE16[c - 40 if c < 100 else c - 92]
                    elif c in (38, 48) and i + 1 < len(codes):
                        key = "fg" if c == 38 else "bg"
                        if codes[i + 1] == 5:
                            style[key] = xterm256(codes[i + 2])
                            i += 2
                        elif codes[i + 1] == 2:
                            style[key] = tuple(codes[i + 2 : i + 5])
                            i += 4
                    elif c == 39:
                        style.pop("fg", None)
                    elif c == 49:
                        style.pop("bg", None)
                    i += 1
            else:
                row.extend((ch, dict(style)) for ch in token)
        rows.append(row)
    return rows


def render(ansi: str, out: Path) -> None:
    size = 16
    fonts = {
        (False, False): ImageFont.truetype(str(FONT_DIR / "DejaVuSansMono.ttf"), size),
        (True, False): ImageFont.truetype(str(FONT_DIR / "DejaVuSansMono-Bold.ttf"), size),
        (False, True): ImageFont.truetype(str(FONT_DIR / "DejaVuSansMono-Oblique.ttf"), size),
        (True, True): ImageFont.truetype(str(FONT_DIR / "DejaVuSansMono-BoldOblique.ttf"), size),
    }
    width = round(fonts[(False, False)].getlength("M"))
    height = size + 5
    pad = 14
    image = Image.new("RGB", (COLS * width + 2 * pad, ROWS * height + 2 * pad), DEFAULT_BG)
    draw = ImageDraw.Draw(image)
    for y, row in enumerate(cells(ansi)):
        for x, (ch, st) in enumerate(row[:COLS]):
            fg = st.get("fg", DEFAULT_FG)
            bg = st.get("bg", DEFAULT_BG)
            if st.get("reverse"):
                fg, bg = bg, fg
            left, top = pad + x * width, pad + y * height
            if bg != DEFAULT_BG:
                draw.rectangle([left, top, left + width, top + height], fill=bg)
            if ch.strip():
                font = fonts[(bool(st.get("bold")), bool(st.get("italic")))]
                draw.text((left, top + 2), ch, font=font, fill=fg)
            if st.get("underline"):
                draw.line([left, top + height - 2, left + width, top + height - 2], fill=fg)
    image.save(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nvim", default=shutil.which("nvim") or "nvim")
    p.add_argument("--trellisd", default=shutil.which("trellisd") or "trellisd")
    p.add_argument("--out", type=Path, default=PLUGIN / "screenshot.png")
    args = p.parse_args()
    run(args.nvim, args.trellisd, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
