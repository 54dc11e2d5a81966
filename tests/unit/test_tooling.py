"""The package stays typed (mypy --strict) and the tree stays lint-clean (ruff)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_the_package_passes_mypy_strict() -> None:
    done = run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tree_passes_ruff() -> None:
    done = run("ruff", "check", "daemon", "tests")
    assert done.returncode == 0, done.stdout + done.stderr
    formatted = run("ruff", "format", "--check", "daemon", "tests")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
