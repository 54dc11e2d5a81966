"""search: a regular expression over the tree, as git sees it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trellisd.policy.globs import matches_path
from trellisd.tools import ToolContext, ToolFailure
from trellisd.tools.search import MAX_MATCHES, Search


def tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def search(root: Path, **arguments: str) -> list[str]:
    return (await Search().run(arguments, ToolContext(root))).splitlines()


async def test_matches_come_as_path_line_text(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": "import os\nTODO: one\n", "src/b.py": "x = 1\n  TODO two\n"})
    assert await search(tmp_path, pattern=r"TODO:? \w+") == [
        "a.py:2: TODO: one",
        "src/b.py:2:   TODO two",
    ]


async def test_gitignore_files_are_respected_at_every_level(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "*.log\nbuild/\n",
            "app.log": "needle\n",
            "build/out.py": "needle\n",
            "src/.gitignore": "generated_*.py\n!keep.log\n",
            "src/generated_x.py": "needle\n",
            "src/keep.log": "needle\n",
            "src/other.log": "needle\n",
            "src/main.py": "needle\n",
            "docs/generated_y.py": "needle\n",
            ".git/HEAD": "needle\n",
            ".git/config": "needle\n",
        },
    )
    assert await search(tmp_path, pattern="needle") == [
        "docs/generated_y.py:1: needle",
        "src/keep.log:1: needle",
        "src/main.py:1: needle",
    ]


async def test_searching_a_subfolder_still_applies_the_root_gitignore(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "*.log\n", "src/a.log": "needle\n", "src/a.py": "needle\n"})
    assert await search(tmp_path, pattern="needle", path="src") == ["src/a.py:1: needle"]


async def test_a_folder_named_in_path_is_searched_even_if_ignored(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "build/\n", "build/a.py": "needle\n"})
    assert await search(tmp_path, pattern="needle") == ["no matches for 'needle'"]
    assert await search(tmp_path, pattern="needle", path="build") == ["build/a.py:1: needle"]


async def test_glob_speaks_the_policy_dialect(tmp_path: Path) -> None:
    """The same pattern means the same files in a search as in a policy rule."""
    tree(tmp_path, {"a.py": "needle\n", "a.txt": "needle\n", "src/deep/b.py": "needle\n"})
    assert await search(tmp_path, pattern="needle", glob="**/*.py") == [
        "a.py:1: needle",
        "src/deep/b.py:1: needle",
    ]
    assert await search(tmp_path, pattern="needle", glob="*.py") == ["a.py:1: needle"]
    for glob in ("*.py", "**/*.py", "src/**"):
        found = {line.split(":")[0] for line in await search(tmp_path, pattern="needle", glob=glob)}
        for path in ("a.py", "a.txt", "src/deep/b.py"):
            assert (path in found) is matches_path(glob, path), (glob, path)
    assert await search(tmp_path, pattern="needle", glob="src/**/*.py") == [
        "src/deep/b.py:1: needle"
    ]
    assert await search(tmp_path, pattern="needle", glob="*.rs") == [
        "no matches for 'needle' in files matching '*.rs'"
    ]


async def test_an_invalid_regex_is_a_clear_failure(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match="pattern is not a regular expression this search"):
        await search(tmp_path, pattern="(unclosed")
    with pytest.raises(ToolFailure, match="pattern is not a regular expression this search"):
        Search().action({"pattern": "[a-"}, ToolContext(tmp_path))
    with pytest.raises(ToolFailure, match="invalid escape sequence"):
        await search(tmp_path, pattern=r"(a)\1")


async def test_the_output_is_capped_with_a_note(tmp_path: Path) -> None:
    tree(tmp_path, {"many.txt": "hit\n" * (MAX_MATCHES + 10)})
    lines = await search(tmp_path, pattern="hit")
    assert len(lines) == MAX_MATCHES + 1
    assert lines[-2] == f"many.txt:{MAX_MATCHES}: hit"
    assert lines[-1].startswith(f"[cut: stopped after {MAX_MATCHES} matches")


async def test_long_lines_are_shortened(tmp_path: Path) -> None:
    tree(tmp_path, {"min.js": "needle" + "x" * 1000 + "\n"})
    (line,) = await search(tmp_path, pattern="needle")
    assert line.startswith("min.js:1: needlexxx")
    assert line.endswith("…")
    assert len(line) < 400


async def test_binary_files_and_symlinks_out_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tree(tmp_path, {"outside/secret.txt": "needle\n", "root/ok.txt": "needle\n"})
    (root / "blob.bin").write_bytes(b"needle\0\0")
    (root / "leak.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    (root / "leakdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert await search(root, pattern="needle") == ["ok.txt:1: needle"]


async def test_files_the_context_may_not_read_are_skipped(tmp_path: Path) -> None:
    tree(tmp_path, {".env": "KEY=needle\n", "secrets/k.txt": "needle\n", "a.txt": "needle\n"})
    (tmp_path / "alias.txt").symlink_to(tmp_path / "secrets" / "k.txt")
    context = ToolContext(tmp_path, may_read=lambda rel: rel != ".env" and "secrets" not in rel)
    result = await Search().run({"pattern": "needle"}, context)
    assert result == "a.txt:1: needle"


async def test_a_backtracking_pattern_answers_at_once(tmp_path: Path) -> None:
    """``^(a+)+$`` backtracks for minutes in Python's ``re`` over this line; here it is
    matched in linear time."""
    tree(tmp_path, {"a.txt": "a" * 35 + "!\n" + "a" * 35 + "\n"})
    assert await search(tmp_path, pattern="^(a+)+$") == ["a.txt:2: " + "a" * 35]


async def test_a_fifo_gitignore_is_skipped_not_waited_on(tmp_path: Path) -> None:
    tree(tmp_path, {"a.txt": "needle\n"})
    os.mkfifo(tmp_path / ".gitignore")
    os.mkfifo(tmp_path / "pipe.txt")
    assert await search(tmp_path, pattern="needle") == ["a.txt:1: needle"]
