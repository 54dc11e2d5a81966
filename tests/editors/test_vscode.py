"""The VS Code extension: its own suite (node --test against the real daemon) and the test in
a real VS Code (code-server) in headless Chromium. ``.ci/vscode-setup.sh`` installs both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.environment import hermetic_env

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "editors" / "vscode"
CODE_SERVER = Path(
    os.environ.get("CODE_SERVER", "/opt/code-server-4.100.3/node_modules/.bin/code-server")
)


def needs_npm_packages() -> None:
    if shutil.which("npm") is None or not (EXTENSION / "node_modules").is_dir():
        pytest.skip(
            "the VS Code extension's npm packages are not installed"
            " (editors/vscode/node_modules): run .ci/vscode-setup.sh"
        )


def run(argv: list[str], cwd: Path, home: Path, timeout: float, **extra: str) -> None:
    """Run ``argv``; the daemons it starts see none of the settings of the person running
    the tests (``hermetic_env``)."""
    env = hermetic_env(home, TRELLISD_TEST_CMD=f"{sys.executable} -m trellisd", **extra)
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        pytest.fail(
            f"{' '.join(argv)} did not end within {timeout:g} s; the end of what it printed:\n"
            + (out or "")[-6000:]
        )
    if done.returncode != 0:
        lines = done.stdout.splitlines()
        failing = [
            "\n".join(lines[max(0, i - 3) : i + 40])
            for i, line in enumerate(lines)
            # node --test says "not ok"; the e2e run says "FAIL" after its clock
            if line.lstrip().startswith("not ok") or "] FAIL " in line
        ]
        # last, where a shortened log keeps them: the names of the checks that failed
        named = [
            line.strip()
            for line in lines
            if line.lstrip().startswith("not ok") or line.startswith("e2e failed:")
        ]
        pytest.fail(
            f"{' '.join(argv)} exited {done.returncode}\n"
            + ("\n...\n".join(failing) or done.stdout[-6000:])
            + f"\n{done.stderr[-6000:]}"
            + "\nfailed:\n"
            + "\n".join(named)
        )


@pytest.mark.timeout(660)  # the build and the suite have their own 600 s bound
def test_the_extension_builds_type_checks_and_passes_its_tests(tmp_path: Path) -> None:
    needs_npm_packages()
    run(["npm", "test"], EXTENSION, tmp_path / "home", 600)


@pytest.mark.timeout(960)  # code-server in Chromium has its own 900 s bound
def test_the_extension_works_in_a_real_vs_code(tmp_path: Path) -> None:
    needs_npm_packages()
    if not CODE_SERVER.exists() or shutil.which("chromium") is None:
        pytest.skip("code-server or chromium is not installed: run .ci/vscode-setup.sh as root")
    # The screenshots go to E2E_ARTIFACTS if set (CI keeps them), else to the test's own
    # folder: never over the README's picture.
    artifacts = os.environ.get("E2E_ARTIFACTS") or str(tmp_path)
    e2e = REPO / ".ci" / "vscode-e2e.sh"
    run(["bash", str(e2e)], REPO, tmp_path / "home", 900, E2E_ARTIFACTS=artifacts)
