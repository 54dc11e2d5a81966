"""How the patterns of a policy's rules match paths and command lines."""

from __future__ import annotations

import pytest

from trellisd.policy.globs import GlobError, matches_command, matches_path, path_pattern


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


def test_a_backtracking_glob_answers_at_once() -> None:
    """A repository's glob with many ``**`` against a deep path a model chose: a
    backtracking matcher runs for hours here; this one answers at once."""
    pattern = "**/a/" * 8 + "b"
    assert matches_path(pattern, "a/" * 300 + "c") is False
    assert matches_path(pattern, "a/" * 300 + "b") is True
    assert matches_command("*a" * 30 + "b", "a" * 5000) is False


def test_a_folder_pattern_covers_what_it_holds() -> None:
    assert matches_path(".git", ".git/hooks/pre-commit") is True
    assert matches_path("**/.git", "vendor/lib/.git/config") is True
    assert matches_path(".git", ".github/workflows/ci.yml") is False


def test_an_invalid_glob_is_named() -> None:
    with pytest.raises(GlobError, match="is not a valid glob"):
        path_pattern("a\\")
