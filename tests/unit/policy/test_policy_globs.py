"""How the patterns of a policy's rules match paths and command lines."""

from __future__ import annotations

import pytest

from trellisd.policy.globs import matches_command, matches_path


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**", "src/deep/a.py", True),
        ("**", ".", True),
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/deep/a.py", True),
        ("**/*.py", "src/a.pyc", False),
        ("src/**", "src", True),
        ("src/**", "src/a/b.txt", True),
        ("src/**", "srcs/a.txt", False),
        ("a/**/z", "a/z", True),
        ("a/**/z", "a/b/c/z", True),
        ("src/*", "src/a/b", False),
        (".env", ".env", True),
        (".env", "src/.env", False),
        ("**/.env", "src/.env", True),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file/.txt", False),
        ("[!a]b", "cb", True),
        ("[!a]b", "ab", False),
        ("[a-c]x", "bx", True),
        ("./docs/*", "docs/a.md", True),
        ("/docs/*", "docs/a.md", True),
        ("a+b(c)", "a+b(c)", True),
    ],
)
def test_path_patterns(pattern: str, path: str, expected: bool) -> None:
    assert matches_path(pattern, path) is expected


@pytest.mark.parametrize(
    ("pattern", "command", "expected"),
    [
        ("*", "rm -rf /", True),
        ("pytest*", "pytest", True),
        ("pytest*", "pytest -q tests/unit", True),
        ("pytest *", "pytest", False),
        ("git status", "git status", True),
        ("git status", "git status --short", False),
        ("git status", "git statusx", False),
        ("npm run *", "npm run test", True),
        ("npm run *", "npm install", False),
    ],
)
def test_command_patterns(pattern: str, command: str, expected: bool) -> None:
    assert matches_command(pattern, command) is expected
