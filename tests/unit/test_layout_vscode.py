"""The VS Code extension keeps one file per feature: no source file grows past 600 lines (but the
one generated from the schema), and ``activate`` only wires the features together."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "editors" / "vscode" / "src"
GENERATED = {SRC / "protocolTypes.ts"}
MAX_LINES = 600
MAX_ACTIVATE_LINES = 80

SOURCES = sorted(p for p in SRC.rglob("*.ts") if p not in GENERATED)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_the_sources_are_found() -> None:
    assert SRC / "extension.ts" in SOURCES
    assert SRC / "session.ts" in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_source_file_is_longer_than_600_lines(path: Path) -> None:
    count = len(_lines(path))
    assert count <= MAX_LINES, f"{path.relative_to(SRC)} has {count} lines: split it by feature"


def activate_lines(source: list[str]) -> int:
    """The lines of ``activate``, from its signature to the brace that closes it (the first
    line that is a lone ``}`` at the left margin, as the formatter writes a top-level end)."""
    start = next(
        i for i, line in enumerate(source) if re.match(r"export (async )?function activate\(", line)
    )
    end = next(i for i in range(start, len(source)) if source[i] == "}")
    return end - start + 1


def test_activate_only_wires_the_features() -> None:
    count = activate_lines(_lines(SRC / "extension.ts"))
    assert count <= MAX_ACTIVATE_LINES, (
        f"activate in extension.ts is {count} lines: register the feature from its own file"
    )


def test_activate_is_measured_to_its_closing_brace() -> None:
    source = ["import x;", "export function activate(c) {", "  a();", "  if (b) {", "  }", "}", "x"]
    assert activate_lines(source) == 5
