"""Settings are read once, at the edge: only the command line, the forwarder and the MCP
launcher, a started process's guard and the walls' relay (processes of their own) look at the
environment. The settings readers (``config_file``, ``daemon_settings``) are handed it as a
mapping, and every other module is handed what it needs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "daemon" / "trellisd"

EDGE = {
    "__main__.py",  # the command an editor starts
    "cli.py",  # the command line, whole
    "forward.py",  # the stdlib-only forwarder, before any of the daemon is imported
    "mcp/launcher.py",  # runs as its own process, between the daemon and an MCP server
    "tools/guard.py",  # runs as its own process, between the daemon and a started process
    "sandbox/relay.py",  # runs as its own process inside the walls, handing its environment on
}
ENVIRONMENT = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(source: str) -> list[str]:
    """Where ``source`` reaches the process's environment: ``os.environ`` and its kin, under
    any name ``os`` (or ``posix``) is imported as, or imported from it directly."""
    tree = ast.parse(source)
    modules = {"os", "posix", "nt"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name in modules and a.asname}
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in modules:
            found += [
                f"line {node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if a.name in ENVIRONMENT or a.name == "*"
            ]
    return sorted(found, key=lambda line: int(line.split(":")[0].split()[1]))


def test_only_the_edge_reads_the_environment() -> None:
    readers = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in EDGE
        for found in [environment_reads(path.read_text(encoding="utf-8"))]
        if found
    }
    assert readers == {}


def test_every_variable_the_daemon_reads_is_in_the_readmes_table() -> None:
    """The README's table of settings is the one list of the variables a user may set."""
    internal = {"TRELLISD_RUN", "TRELLISD_MCP_KEEP"}  # marks the daemon sets for itself
    named = {
        name
        for path in PACKAGE.rglob("*.py")
        for name in re.findall(r"\bTRELLISD_[A-Z][A-Z_]*[A-Z]\b", path.read_text("utf-8"))
    }
    readme = (REPO / "README.md").read_text("utf-8")
    table = {
        name
        for line in readme.splitlines()
        if line.startswith("| ")
        for name in re.findall(r"`(TRELLISD_[A-Z_]+)", line)
    }
    assert named - internal - table == set()


def test_every_module_of_the_edge_exists() -> None:
    assert {p for p in EDGE if not (PACKAGE / p).is_file()} == set()


def test_every_way_of_reaching_the_environment_is_caught() -> None:
    source = """
import os
import os as system
from os import environ, getenv
from posix import *
a = os.environ["HOME"]
b = os.getenv("HOME")
c = system.environ.get("PATH")
d = os.environb
os.putenv("A", "1")
e = os.path.join("/proc", "1", "environ")  # a file's name: not the environment
"""
    assert environment_reads(source) == [
        "line 4: from os import environ",
        "line 4: from os import getenv",
        "line 5: from posix import *",
        "line 6: os.environ",
        "line 7: os.getenv",
        "line 8: system.environ",
        "line 9: os.environb",
        "line 10: os.putenv",
    ]
