"""read_file and list_dir: what the model sees of the files."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from trellisd.tools import ToolContext, ToolFailure
from trellisd.tools.files import MAX_ENTRIES, MAX_READ_BYTES, ListDir, ReadFile


@pytest.fixture
def context(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path)


def numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


async def test_read_whole_file(tmp_path: Path, context: ToolContext) -> None:
    (tmp_path / "a.txt").write_text(numbered(3))
    assert await ReadFile().run({"path": "a.txt"}, context) == numbered(3)


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (2, 3, "line 2\nline 3\n"),
        (4, None, "line 4\nline 5\n"),
        (None, 2, "line 1\nline 2\n"),
        (5, 99, "line 5\n"),
    ],
)
async def test_read_a_line_range(
    tmp_path: Path, context: ToolContext, start: int | None, end: int | None, expected: str
) -> None:
    (tmp_path / "a.txt").write_text(numbered(5))
    arguments = {"path": "a.txt", "startLine": start, "endLine": end}
    assert await ReadFile().run(arguments, context) == expected


async def test_a_start_past_the_end_says_how_long_the_file_is(
    tmp_path: Path, context: ToolContext
) -> None:
    (tmp_path / "a.txt").write_text(numbered(5))
    result = await ReadFile().run({"path": "a.txt", "startLine": 9}, context)
    assert result == "[a.txt has 5 lines; startLine 9 is past its end]"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"startLine": 0}, "startLine must be a whole number from 1"),
        ({"endLine": "3"}, "endLine must be a whole number from 1"),
        ({"startLine": 4, "endLine": 2}, "endLine (2) is before startLine (4)"),
    ],
)
async def test_bad_line_numbers_are_refused(
    tmp_path: Path, context: ToolContext, arguments: dict[str, object], message: str
) -> None:
    (tmp_path / "a.txt").write_text(numbered(5))
    with pytest.raises(ToolFailure, match=message.replace("(", r"\(").replace(")", r"\)")):
        await ReadFile().run({"path": "a.txt", **arguments}, context)


async def test_a_large_file_is_cut_at_a_line_and_says_where_to_read_on(
    tmp_path: Path, context: ToolContext
) -> None:
    line = "x" * 99 + "\n"
    count = MAX_READ_BYTES // 100 + 50
    (tmp_path / "big.txt").write_text(line * count)
    result = await ReadFile().run({"path": "big.txt"}, context)
    shown = MAX_READ_BYTES // 100
    assert result.startswith(line * shown)
    assert result.endswith(
        f"[truncated: the file is larger than {MAX_READ_BYTES} bytes; these are its first"
        f" {shown} lines; read on with startLine={shown + 1}]"
    )
    rest = await ReadFile().run({"path": "big.txt", "startLine": shown + 1}, context)
    assert rest == line * (count - shown)


async def test_a_long_range_is_cut_too(tmp_path: Path, context: ToolContext) -> None:
    line = "y" * 99 + "\n"
    (tmp_path / "big.txt").write_text(line * (MAX_READ_BYTES // 50))
    result = await ReadFile().run({"path": "big.txt", "startLine": 10}, context)
    shown = MAX_READ_BYTES // 100
    assert result.startswith(line * shown)
    assert result.endswith(f"read on with startLine={10 + shown}]")


async def test_missing_folder_and_binary_files_are_clear_failures(
    tmp_path: Path, context: ToolContext
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "blob.bin").write_bytes(b"\x89PNG\0\0\0")
    for path, message in [
        ("missing.txt", "missing.txt does not exist"),
        ("folder", "folder is a folder; use list_dir"),
        ("blob.bin", "blob.bin looks like a binary file"),
    ]:
        with pytest.raises(ToolFailure, match=message):
            await ReadFile().run({"path": path}, context)


async def test_an_empty_file_says_so(tmp_path: Path, context: ToolContext) -> None:
    (tmp_path / "empty.txt").write_text("")
    assert await ReadFile().run({"path": "empty.txt"}, context) == "(empty file)"


async def test_list_dir_marks_folders(tmp_path: Path, context: ToolContext) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "README.md").write_text("")
    (tmp_path / "src" / "app.py").write_text("")
    assert await ListDir().run({}, context) == "README.md\nsrc/"
    assert await ListDir().run({"path": "src"}, context) == "app.py"
    (tmp_path / "empty").mkdir()
    assert await ListDir().run({"path": "empty"}, context) == "(empty folder)"


async def test_list_dir_is_capped(tmp_path: Path, context: ToolContext) -> None:
    for n in range(MAX_ENTRIES + 5):
        (tmp_path / f"f{n:05}").write_text("")
    result = (await ListDir().run({}, context)).splitlines()
    assert len(result) == MAX_ENTRIES + 1
    assert result[-1] == "[truncated: 5 more entries]"


async def test_list_dir_of_a_file_fails(tmp_path: Path, context: ToolContext) -> None:
    (tmp_path / "a.txt").write_text("")
    with pytest.raises(ToolFailure, match="a.txt is not a folder"):
        await ListDir().run({"path": "a.txt"}, context)


async def test_a_huge_single_line_is_cut_without_being_held_in_memory(tmp_path: Path) -> None:
    """A line range over a file of one 64 MiB line: the answer is capped, and no more than
    a few times the cap is ever held (the whole line was, before)."""
    size = 64 * 1024 * 1024
    with (tmp_path / "one-line.txt").open("wb") as f:
        for _ in range(size // (1024 * 1024)):
            f.write(b"a" * (1024 * 1024))
        f.write(b"\nsecond line\n")
    tracemalloc.start()
    try:
        result = await ReadFile().run(
            {"path": "one-line.txt", "startLine": 1, "endLine": 2}, ToolContext(tmp_path)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.startswith("a" * MAX_READ_BYTES)
    assert result.endswith(
        f"line 1 alone is longer than {MAX_READ_BYTES} bytes; this is its start]"
    )
    assert peak < 4 * MAX_READ_BYTES + 1024 * 1024, f"peak {peak} bytes for a {size}-byte line"
    second = await ReadFile().run({"path": "one-line.txt", "startLine": 2}, ToolContext(tmp_path))
    assert second == "second line\n"
