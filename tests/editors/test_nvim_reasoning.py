"""Images given with a prompt, the model's thoughts and the effort of a turn in real headless
Neovims (0.7 and 0.11) against the real daemon: the scripted model, and a model server
speaking OpenAI's Responses API (the ``openai-responses`` provider), which keeps every
request body it is sent."""

from __future__ import annotations

import base64
import re
import struct
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

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

from tests.fixtures.provider_servers import Response  # noqa: E402
from tests.fixtures.responses_server import ResponsesServer, reply, usage  # noqa: E402

THOUGHT = "Look at the files first.\nThen answer in one line."

# vim.ui.open (0.10 on) would start the desktop's viewer: the test keeps what it was given.
KEEP_OPENED = "vim.ui.open = function(path) T.opened = path end"


def png(width: int, height: int) -> bytes:
    """A real PNG image of width x height grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def responses_env(server: ResponsesServer, model: str) -> dict[str, str]:
    return {
        "TRELLISD_PROVIDER": "openai-responses",
        "TRELLISD_BASE_URL": server.url + "/v1",
        "TRELLISD_MODEL": model,
        "TRELLISD_API_KEY": "sk-test",
        "TRELLISD_LOG": "info",
        "TRELLISD_SHARED": "0",
    }


def input_images(body: dict[str, Any]) -> list[str]:
    """The image_url of every input_image the request's input holds."""
    found = []
    for item in body.get("input", []):
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "input_image":
                found.append(part["image_url"])
    return found


def row_of(ed: fx.Editor, prefix: str) -> int:
    row: int = ed.lua(
        """
        local c = require("trellisd").current()
        for i, l in ipairs(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false)) do
          if l:sub(1, #...) == ... then return i end
        end
        return 0
        """,
        prefix,
    )
    return row


def fold_closed(ed: fx.Editor, row: int) -> bool:
    """Whether the line `row` of the conversation is inside a closed fold of its window."""
    closed: int = ed.lua(
        """
        local row = ...
        local c = require("trellisd").current()
        local win = vim.fn.win_findbuf(c.buf)[1]
        return vim.api.nvim_win_call(win, function() return vim.fn.foldclosed(row) end)
        """,
        row,
    )
    return closed != -1


def test_images_attached_go_with_the_next_prompt_and_show_in_the_transcript(
    start: Start, tmp_path: Path
) -> None:
    inside, outside = png(2, 2), png(3, 1)
    project = tmp_path / "project"
    (project / "shots").mkdir(parents=True)
    (project / "shots" / "form.png").write_bytes(inside)
    (tmp_path / "elsewhere.png").write_bytes(outside)
    (project / "notes.txt").write_text("not a picture\n")
    with ResponsesServer() as server:
        server.queue(Response(chunks=reply(["The form ", "has no label."], figures=usage(90, 6))))
        ed = start(setup={"env": responses_env(server, "gpt-5")})
        ed.lua(KEEP_OPENED)
        ed.command("TrellisImage shots/form.png")
        ed.command("TrellisImage " + str(tmp_path / "elsewhere.png"))
        ed.command("TrellisImage notes.txt")
        assert "notes.txt is not a PNG, JPEG, GIF or WebP image" in ed.notes()[-1]
        ed.command("TrellisImage")
        listed = ed.notes()[-1]
        assert "form.png (image/png" in listed and "elsewhere.png (image/png" in listed, listed
        assert "2 images attached" in ed.statusline()
        ed.command("Trellis what is wrong with this form?")
        ed.wait_text("has no label.")
        ed.wait_idle()
        text = ed.text()
        assert "what is wrong with this form?\n\n📎 form.png (image/png, " in text, text
        assert "images attached" not in ed.statusline()
        # the model got both: the one under the root read by the daemon, the other as data
        (body,) = [r.body for r in server.requests if r.path.endswith("/responses")]
        sent = input_images(body)
        assert sent == [
            "data:image/png;base64," + base64.b64encode(inside).decode(),
            "data:image/png;base64," + base64.b64encode(outside).decode(),
        ], sent
        # reopened, the turn shows what it carried, and gI fetches the picture
        ed.close()
        again = start(setup={"env": responses_env(server, "gpt-5")})
        again.lua(KEEP_OPENED)
        again.will_pick("what is wrong")
        again.command("TrellisSessions")
        text = again.wait_text("🖼 image/png · ", "has no label.")
        shown = re.findall(r"^🖼 image/png · (\d+ B) · [0-9a-f]{12}$", text, re.M)
        assert shown == [f"{len(inside)} B", f"{len(outside)} B"], text
        again.lua(
            "local c = require('trellisd').current()"
            " vim.api.nvim_win_set_cursor(vim.fn.win_findbuf(c.buf)[1], { ..., 0 })",
            row_of(again, "🖼 image/png"),
        )
        again.nvim.input("gI")
        opened = again.wait_for(lambda: again.lua("return T.opened"), "the image to be opened")
        assert Path(opened).read_bytes() == inside


def test_a_refused_image_is_said_plainly_and_stays_attached(start: Start, tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "chart.png").write_bytes(png(1, 1))
    with ResponsesServer() as server:
        ed = start(setup={"env": responses_env(server, "gpt-3.5-turbo")})
        ed.command("TrellisImage chart.png")
        ed.command("Trellis read the chart")
        text = ed.wait_text("*not sent: images: the model gpt-3.5-turbo does not take images")
        ed.wait_idle()
        assert ed.wait_note("the prompt was refused: images: the model gpt-3.5-turbo")
        assert "1 image attached" in ed.statusline(), text
        assert server.requests == []


def test_a_thought_streams_folded_under_its_step_and_is_folded_again_when_reopened(
    start: Start,
) -> None:
    ed = start(script=[{"thought": THOUGHT, "text": "The project is empty."}])
    ed.command("Trellis what is here?")
    text = ed.wait_text("The project is empty.")
    ed.wait_idle()
    assert "┊ Look at the files first.\n┊ Then answer in one line.\n\nThe project is empty." in text
    first = row_of(ed, "┊ Look at")
    assert fold_closed(ed, first) and fold_closed(ed, first + 1)
    # expandable: zo opens it, and the thought reads as it streamed
    ed.lua(
        """
        local row = ...
        local c = require("trellisd").current()
        local win = vim.fn.win_findbuf(c.buf)[1]
        vim.api.nvim_win_call(win, function()
          vim.api.nvim_win_set_cursor(win, { row, 0 })
          vim.cmd("normal! zo")
        end)
        """,
        first,
    )
    assert not fold_closed(ed, first)
    # a file opened in that window later keeps its own folding
    method = ed.lua(
        """
        local c = require("trellisd").current()
        local win = vim.fn.win_findbuf(c.buf)[1]
        return vim.api.nvim_win_call(win, function()
          vim.cmd("enew")
          return vim.wo.foldmethod
        end)
        """
    )
    assert method == "manual"
    footer = next(line for line in text.splitlines() if line.startswith("*finished"))
    assert re.search(r"\(in \d+, out \d+, reasoning 10\)", footer), footer
    ed.close()
    again = start()
    again.will_pick("what is here?")
    again.command("TrellisSessions")
    text = again.wait_text("┊ Then answer in one line.", "The project is empty.")
    assert "┊ Look at the files first.\n┊ Then answer in one line.\n\nThe project is empty." in text
    assert fold_closed(again, row_of(again, "┊ Look at"))


def test_an_image_the_daemon_refuses_is_named_in_the_refusal(start: Start, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with (project / "huge.png").open("wb") as f:  # a PNG by its magic, past 20 MiB
        f.write(png(1, 1))
        f.truncate(21 * 1024 * 1024)
    (project / "small.png").write_bytes(png(1, 1))
    ed = start(script=[{"text": "Seen."}])
    ed.command("TrellisImage small.png")
    ed.command("TrellisImage huge.png")
    ed.command("Trellis look")
    text = ed.wait_text("*not sent: images[1].path: ")
    ed.wait_idle()
    refusal = next(line for line in text.splitlines() if line.startswith("*not sent"))
    assert "20 MiB" in refusal, refusal
    assert "2 images attached" in ed.statusline()
    ed.command("TrellisImage!")
    assert ed.notes()[-1] == "trellis: dropped 2 attached image(s)"
    ed.command("Trellis look again")
    ed.wait_text("Seen.")


def test_the_effort_picked_reaches_the_turn(start: Start) -> None:
    ed = start(script=[{"text": "Thought hard."}, {"text": "Back to the default."}])
    ed.command("Trellis first")
    ed.wait_idle()
    ed.will_pick("high")
    ed.command("TrellisEffort")
    ed.wait_note("effort of the next turns: high")
    picker = next(a for a in ed.asked() if a.get("kind") == "trellisd.effort")
    assert [i.split(":")[0].split(" ")[0] for i in picker["items"]] == [
        "low",
        "medium",
        "high",
        "default",
    ]
    assert picker["items"][3].endswith("(now)")
    ed.command("Trellis think about it")
    ed.wait_text("Thought hard.")
    ed.wait_idle()
    ed.command("TrellisEffort default")
    ed.command("Trellis and now")
    ed.wait_text("Back to the default.")
    ed.wait_idle()
    ed.command("TrellisEffort extreme")
    assert "the effort is low, medium, high or default, not extreme" in ed.notes()[-1]
    ed.lua(
        """
        T.efforts = nil
        local daemon = require("trellisd.daemon")
        local id = require("trellisd").current().sessionId
        daemon.request("session/history", { sessionId = id }, function(_, h)
          local found, left = {}, #h.turns
          for i, t in ipairs(h.turns) do
            daemon.request("run/events", { runId = t.runId }, function(_, r)
              for _, e in ipairs(r.events) do
                if e.kind == "model" then
                  found[i] = e.detail.effort == vim.NIL and "none" or (e.detail.effort or "none")
                end
              end
              left = left - 1
              if left == 0 then T.efforts = found end
            end)
          end
        end)
        """
    )
    efforts = ed.wait_for(lambda: ed.lua("return T.efforts"), "the runs' model events")
    assert efforts == ["none", "high", "none"]


def test_a_window_joining_a_turn_mid_step_draws_its_thought_so_far_folded(
    start: Start, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    line = {"thought": THOUGHT, "text": "The project is empty.", "holdFile": str(go)}
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    first = start(script=[line], shared=runtime)
    second = start(script=[line], shared=runtime)
    pid = None
    try:
        first.command("Trellis what is here?")
        first.wait_text("┊ Then answer in one line.")
        pid = first.shared_daemon_pid()
        second.will_pick("")
        second.command("TrellisSessions")
        text = second.wait_text("### You\nwhat is here?", "┊ Then answer in one line.")
        assert second.current()["running"], text  # type: ignore[index]
        assert fold_closed(second, row_of(second, "┊ Look at"))
        go.touch()
        text = second.wait_text("The project is empty.", "*finished · ")
        assert text.count("┊ Look at the files first.") == 1, text
        assert "┊ Then answer in one line.\n\nThe project is empty." in text, text
    finally:
        first.close()
        second.close()
        if pid is not None:
            fx.stop_shared_daemon(pid)
