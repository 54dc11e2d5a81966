"""write_file and edit_file: atomic writes, and edits that say why they could not apply."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trellisd.tools import ToolContext, ToolFailure
from trellisd.tools.edit import (
    TEMPORARY_PREFIX,
    EditFile,
    WriteFile,
    remove_leftover_writes,
    temporary_name,
)


@pytest.fixture
def context(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(f"{TEMPORARY_PREFIX}*"))


async def test_write_creates_the_file_and_its_folders(tmp_path: Path, context: ToolContext) -> None:
    result = await WriteFile().run({"path": "a/b/c.txt", "content": "héllo\n"}, context)
    assert result == "created a/b/c.txt (7 bytes)"
    assert (tmp_path / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo\n"
    assert leftovers(tmp_path) == []


async def test_write_replaces_the_file_atomically(tmp_path: Path, context: ToolContext) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    before = target.stat().st_ino
    with target.open() as reader:
        result = await WriteFile().run({"path": "a.txt", "content": "new\n"}, context)
        # a reader that had the file open still sees the whole old file: it was replaced,
        # not truncated and rewritten in place
        assert reader.read() == "old\n"
    assert result == "wrote a.txt (4 bytes, replacing what was there)"
    assert target.read_text() == "new\n"
    assert target.stat().st_ino != before
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


async def test_a_new_file_gets_the_usual_permissions(tmp_path: Path, context: ToolContext) -> None:
    umask = os.umask(0o022)
    try:
        await WriteFile().run({"path": "new.txt", "content": ""}, context)
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644


async def test_write_through_a_symlink_inside_the_root_writes_its_target(
    tmp_path: Path, context: ToolContext
) -> None:
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real.txt")
    assert await WriteFile().run({"path": "alias.txt", "content": "new"}, context) == (
        "wrote real.txt (3 bytes, replacing what was there)"
    )
    assert (tmp_path / "alias.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("folder", "folder is a folder"),
        ("file.txt/inner.txt", "a file is in the way"),
        (".", "the session root itself cannot be written"),
    ],
)
async def test_write_failures_leave_nothing_behind(
    tmp_path: Path, context: ToolContext, path: str, message: str
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("kept")
    with pytest.raises(ToolFailure, match=message):
        await WriteFile().run({"path": path, "content": "x"}, context)
    assert (tmp_path / "file.txt").read_text() == "kept"
    assert leftovers(tmp_path) == []


async def test_write_needs_string_content(tmp_path: Path, context: ToolContext) -> None:
    with pytest.raises(ToolFailure, match="content must be a string"):
        await WriteFile().run({"path": "a.txt", "content": None}, context)
    assert not (tmp_path / "a.txt").exists()


SOURCE = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"


async def test_edit_replaces_a_unique_snippet(tmp_path: Path, context: ToolContext) -> None:
    target = tmp_path / "m.py"
    target.write_text(SOURCE)
    before = target.stat().st_ino
    result = await EditFile().run(
        {"path": "m.py", "old": "def g():\n    return 1", "new": "def g():\n    return 2"},
        context,
    )
    assert result == "edited m.py: replaced the snippet at line 5"
    assert target.read_text() == "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    assert target.stat().st_ino != before
    assert leftovers(tmp_path) == []


async def test_edit_keeps_crlf_line_endings(tmp_path: Path, context: ToolContext) -> None:
    target = tmp_path / "w.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    await EditFile().run({"path": "w.txt", "old": "two", "new": "2"}, context)
    assert target.read_bytes() == b"one\r\n2\r\n"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"old": "return 1", "new": "return 2"}, "the snippet occurs 2 times in m.py"),
        ({"old": "return 3", "new": "return 2"}, "the snippet was not found in m.py"),
        ({"old": "return  1\n", "new": "x"}, "the snippet was not found in m.py"),
        ({"old": "", "new": "x"}, "old must be a non-empty string"),
        ({"old": "f", "new": None}, "new must be a string"),
        ({"old": "f", "new": "f"}, "old and new are the same"),
    ],
)
async def test_edit_failures_leave_the_file_untouched(
    tmp_path: Path, context: ToolContext, arguments: dict[str, object], message: str
) -> None:
    target = tmp_path / "m.py"
    target.write_text(SOURCE)
    with pytest.raises(ToolFailure, match=message):
        await EditFile().run({"path": "m.py", **arguments}, context)
    assert target.read_text() == SOURCE
    assert leftovers(tmp_path) == []


async def test_edit_of_a_missing_or_binary_file_fails(tmp_path: Path, context: ToolContext) -> None:
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(ToolFailure, match="missing.py does not exist"):
        await EditFile().run({"path": "missing.py", "old": "a", "new": "b"}, context)
    with pytest.raises(ToolFailure, match="latin1.txt is not UTF-8 text"):
        await EditFile().run({"path": "latin1.txt", "old": "caf", "new": "b"}, context)
    assert not (tmp_path / "missing.py").exists()


async def test_an_edit_needs_read_permission_too(tmp_path: Path) -> None:
    """Without it, "not found" or "edited" would tell the model what a file it may not
    read holds, one guess at a time."""
    (tmp_path / "secret.txt").write_text("password=hunter2\n")
    context = ToolContext(tmp_path, may_read=lambda path: path != "secret.txt")
    for guess in ("password=hunter2", "password=wrong"):
        with pytest.raises(ToolFailure, match="the session's policy refuses reading it"):
            await EditFile().run({"path": "secret.txt", "old": guess, "new": "x"}, context)
    assert (tmp_path / "secret.txt").read_text() == "password=hunter2\n"


# a write that stops before its rename until the test kills the process writing
INTERRUPTED_WRITE = """
import os, sys
from pathlib import Path
from trellisd.tools import ToolContext
from trellisd.tools.edit import atomic_write

def stop(fd):
    print("flushing", flush=True)
    sys.stdin.read()

os.fsync = stop
root = Path(sys.argv[1])
atomic_write(root / "README.md", b"new", ToolContext(root))
"""


def test_a_killed_write_leaves_a_named_leftover_that_can_be_removed(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("old")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / temporary_name("a.py")).write_text("an earlier crash's")
    (tmp_path / ".README.md.0a1b2c.tmp").write_text("the user's own file")
    (tmp_path / "link").symlink_to(tmp_path / "src")
    with subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_WRITE, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as writer:
        assert writer.stdout is not None and writer.stdout.readline() == b"flushing\n"
        writer.kill()
    assert (tmp_path / "README.md").read_text() == "old"
    left = leftovers(tmp_path)
    assert len(left) == 2 and any(name.endswith("-README.md") for name in left)
    removed = remove_leftover_writes(tmp_path)
    assert sorted(p.name for p in removed) == left
    assert leftovers(tmp_path) == []
    assert (tmp_path / ".README.md.0a1b2c.tmp").read_text() == "the user's own file"
