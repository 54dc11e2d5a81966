"""The rules' page holds what the code does: the table of commands that get no rule is the
code's, entry by entry with its reason, the known python modules are the code's, and every
example of a proposed rule is what the daemon proposes."""

from __future__ import annotations

import json
import re
import shlex

from tests import protocol_schema
from trellisd.policy.rules import KNOWN_MODULES, RUNNERS, proposed_rule

PAGE = protocol_schema.SCHEMA_PATH.parent / "plans.md"


def _section(heading: str) -> list[str]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    level = len(heading.split(" ")[0])
    end = next(
        (i for i in range(start, len(lines)) if re.match(rf"#{{1,{level}}} ", lines[i])),
        len(lines),
    )
    return lines[start:end]


def _rows(lines: list[str], header: str) -> list[list[str]]:
    """The cells of the rows of the table whose header row is ``header``."""
    start = lines.index(header) + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[start:end]]


def test_the_page_lists_every_command_that_gets_no_rule_with_why() -> None:
    rows = _rows(_section("### Commands that get no rule"), "| command | why |")
    assert rows == [[f"`{runner.name}`", runner.why] for runner in RUNNERS]


def test_the_page_names_the_known_python_modules() -> None:
    text = re.sub(r"\s+", " ", " ".join(_section("## Rules")))
    named = re.search(r"one of the known tools: (.*?)\. Anything else", text)
    assert named is not None
    assert set(re.findall(r"`([^`]+)`", named[1])) == KNOWN_MODULES


def test_every_example_on_the_page_is_the_rule_the_daemon_proposes() -> None:
    rows = _rows(_section("## Rules"), "| command | `proposedRule` |")
    assert len(rows) > 10
    for commands, rule in rows:
        expected = None if rule == "none" else tuple(json.loads(rule.strip("`")))
        for command in re.findall(r"`([^`]+)`", commands):
            assert proposed_rule(shlex.split(command)) == expected, command
