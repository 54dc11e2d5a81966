"""The protocol's pages hold together: the reference is the one the schema writes, every link
and anchor leads somewhere, and the tables of requests and event kinds list what the schema
lists."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests import protocol_schema
from trellisd.protocol_reference import render, slug
from trellisd.vocabulary import EventKind

PROTOCOL = protocol_schema.SCHEMA_PATH.parent
REPO = PROTOCOL.parent
PAGES = sorted(PROTOCOL.glob("*.md"))
LINKING = [*PAGES, REPO / "README.md", *sorted(REPO.glob("editors/*/README.md"))]
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _prose(path: Path) -> list[str]:
    """The lines of a Markdown file outside its fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub names them."""
    seen: Counter[str] = Counter()
    found = set()
    for line in _prose(path):
        if re.match(r"#{1,6} ", line):
            name = slug(line.lstrip("#"))
            found.add(name if not seen[name] else f"{name}-{seen[name]}")
            seen[name] += 1
    return found


def test_the_reference_is_the_one_the_schema_writes() -> None:
    committed = (PROTOCOL / "reference.md").read_text(encoding="utf-8")
    assert committed == render(protocol_schema.schema()), (
        "protocol/reference.md is stale: run python -m trellisd.protocol_reference"
    )


def test_the_reference_names_every_message_and_shape_of_the_schema() -> None:
    schema = protocol_schema.schema()
    reference = anchors(PROTOCOL / "reference.md")
    for section in ("requests", "clientRequests", "notifications", "$defs"):
        for name in schema[section]:
            assert slug(name) in reference, f"{section} {name}"


@pytest.mark.parametrize("path", LINKING, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for line in _prose(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "``", line)):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{target}: no such file")
            elif anchor and anchor not in anchors(dest):
                broken.append(f"{target}: no such heading in {dest.relative_to(REPO)}")
    assert broken == []


def test_the_index_links_every_page() -> None:
    index = "\n".join(_prose(PROTOCOL / "README.md"))
    linked = {t.partition("#")[0] for t in LINK.findall(index)}
    assert {p.name for p in PAGES} - {"README.md"} <= linked


def _methods(lines: list[str]) -> set[str]:
    """The methods named in the first column of a table's rows."""
    found: set[str] = set()
    for line in lines:
        if line.startswith("| ") and not line.startswith("| ---"):
            first = line.split(" | ")[0]
            found.update(m for m in re.findall(r"`([^`]+)`", first) if "/" in m or m.isalpha())
    return found


def _section(path: Path, heading: str) -> list[str]:
    lines = _prose(path)
    start = lines.index(heading) + 1
    level = heading.split(" ")[0]
    end = next(
        (i for i in range(start, len(lines)) if re.match(rf"#{{1,{len(level)}}} ", lines[i])),
        len(lines),
    )
    return lines[start:end]


def test_the_requests_page_lists_every_request_of_the_schema() -> None:
    table = _section(PROTOCOL / "requests.md", "# Requests")
    assert _methods(table) == set(protocol_schema.schema()["requests"])


def test_the_readme_lists_every_request_of_the_schema() -> None:
    table = _section(REPO / "README.md", "## The protocol in brief")
    assert _methods(table) == set(protocol_schema.schema()["requests"])


def test_the_event_table_lists_every_event_kind() -> None:
    table = _section(PROTOCOL / "shapes.md", "## Event")
    rows = [line for line in table if line.startswith("| `")]
    kinds = [re.findall(r"`([^`]+)`", line.split(" | ")[0])[0] for line in rows]
    assert [k for k in kinds if k not in ("seq", "kind", "step", "detail", "createdAt")] == [
        k.value for k in EventKind
    ]
