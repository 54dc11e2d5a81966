"""The Neovim plugin's layout holds: a module a feature, none of them long, each public
function annotated (LuaCATS ``---@param`` / ``---@return``) when it takes parameters or
returns a value, and no module requiring, at load time, one that requires it back."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

LUA = Path(__file__).resolve().parents[2] / "editors" / "nvim" / "lua" / "trellisd"
MODULES = sorted(LUA.glob("*.lua"))
MAX_LINES = 600

# `return M` closing a module names its table: its public functions are `function M.x(`,
# `function M:x(` and `M.x = function(`; a name starting with "_" is private.
_RETURNED = re.compile(r"^return (\w+)\s*$", re.MULTILINE)
_NESTED_OPENER = re.compile(r"\bfunction\b[^(]*\(")
_RETURN_VALUE = re.compile(r"^return\s+\S")
_REQUIRE = re.compile(r'^local \w+ = require\("trellisd\.(\w+)"\)', re.MULTILINE)


@dataclass(frozen=True)
class Function:
    name: str
    line: int
    takes: bool  # it has parameters
    gives: bool  # a return of its own (not a nested function's) has a value
    annotations: str  # the comment lines right above it


def _public(table: str, text: str) -> list[Function]:
    t = re.escape(table)
    header = re.compile(
        rf"^(?:function {t}[.:](?P<a>\w+)\((?P<pa>[^)]*)\)"
        rf"|{t}\.(?P<b>\w+) = function\((?P<pb>[^)]*)\))"
    )
    lines = text.splitlines()
    found: list[Function] = []
    for i, line in enumerate(lines):
        m = header.match(line)
        if not m or (m["a"] or m["b"]).startswith("_"):
            continue
        comments: list[str] = []
        j = i - 1
        while j >= 0 and lines[j].lstrip().startswith("--"):
            comments.insert(0, lines[j])
            j -= 1
        params = (m["pa"] if m["a"] else m["pb"]).strip()
        found.append(
            Function(
                name=m["a"] or m["b"],
                line=i + 1,
                takes=params != "",
                gives=_gives(lines, i),
                annotations="\n".join(comments),
            )
        )
    return found


def _gives(lines: list[str], start: int) -> bool:
    """Whether the function opened at `start` returns a value itself: a `return x` at its
    own level, not inside a function nested in it (the code is stylua-formatted, so a
    nested function ends at an `end` indented as the line that opened it)."""
    if lines[start].rstrip().endswith(" end"):  # on one line: `M.x = function() end`
        return False
    nested: list[int] = []
    for line in lines[start + 1 :]:
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if indent == 0 and body.startswith("end"):
            return False  # the function's own end
        if nested and indent == nested[-1] and body.startswith("end"):
            nested.pop()  # `end, function(x)` closes one and opens the next
        elif not nested and _RETURN_VALUE.match(body):
            return True
        if _NESTED_OPENER.search(body) and not re.search(r"\bend\b[),]*$", body):
            nested.append(indent)
    return False


def _table(path: Path) -> str | None:
    returned = _RETURNED.findall(path.read_text(encoding="utf-8"))
    return returned[-1] if returned else None


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_module_is_at_most_600_lines(path: Path) -> None:
    count = len(path.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_LINES, f"{path.name} has {count} lines: split it by feature"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_public_functions_carry_their_annotations(path: Path) -> None:
    table = _table(path)
    if table is None:
        pytest.skip(f"{path.name} returns no module table")
    missing = []
    for f in _public(table, path.read_text(encoding="utf-8")):
        if f.takes and "---@param" not in f.annotations:
            missing.append(f"{path.name}:{f.line} {table}.{f.name} takes parameters: ---@param")
        if f.gives and "---@return" not in f.annotations:
            missing.append(f"{path.name}:{f.line} {table}.{f.name} returns a value: ---@return")
    assert not missing, "\n".join(missing)


def test_no_module_requires_one_that_requires_it_back() -> None:
    requires = {p.stem: set(_REQUIRE.findall(p.read_text(encoding="utf-8"))) for p in MODULES}

    def reaches(start: str, goal: str) -> bool:
        seen: set[str] = set()
        todo = [start]
        while todo:
            name = todo.pop()
            for nxt in requires.get(name, ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    cycles = sorted(m for m in requires if reaches(m, m))
    assert not cycles, f"modules in a require cycle: {cycles}"


def test_the_rules_see_what_they_check() -> None:
    """The checks above are only as good as what they find: a module of the plugin has
    public functions with parameters and values, and the sessions feature is split."""
    sessions = _public("M", (LUA / "sessions.lua").read_text(encoding="utf-8"))
    by_name = {f.name: f for f in sessions}
    assert by_name["need_current"].takes and by_name["need_current"].gives
    assert by_name["forget"].takes and not by_name["forget"].gives
    view = _public("View", (LUA / "view.lua").read_text(encoding="utf-8"))
    assert any(f.name == "render" for f in view)
    assert len(MODULES) > 20
