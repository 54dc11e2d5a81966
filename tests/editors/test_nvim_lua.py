"""The Neovim plugin's Lua tests (editors/nvim/tests/*_spec.lua), run by their runner in
headless Neovim 0.7 and 0.11: framing, the connection, batching, the tree, the wording,
the daemon's lifecycle and the user's actions against a fake daemon, :checkhealth."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from . import nvim_fixtures as fx
except ImportError:  # tests/editors is not a package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import nvim_fixtures as fx  # type: ignore[no-redef]

SPECS = sorted(p.name.removesuffix("_spec.lua") for p in (fx.PLUGIN / "tests").glob("*_spec.lua"))


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("nvim", sorted(fx.NVIMS))
def test_lua_spec(nvim: str, spec: str, tmp_path: Path) -> None:
    binary = fx.nvim_binary(nvim)
    env = {
        **os.environ,
        "TRELLIS_SPECS": spec,
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    run = subprocess.run(
        [
            binary,
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-n",
            "-c",
            f"luafile {fx.PLUGIN / 'tests' / 'run.lua'}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert " passed, 0 failed" in run.stdout, output
