"""What a change set keeps of a file, and the diffs it shows."""

from __future__ import annotations

import os
from pathlib import Path

from trellisd.changes import ABSENT, MAX_STORED_BYTES, Content, Kind, read_content, unified_diff
from trellisd.tools import ToolContext


def test_text_is_kept_whole_and_named_by_its_sha256() -> None:
    content = Content.of(b"hello\n")
    assert content.kind == Kind.TEXT and content.data == b"hello\n" and content.size == 6
    assert content.sha256 == "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"


def test_binary_and_too_large_files_keep_only_their_hash_and_size() -> None:
    binary = Content.of(b"\x89PNG\0\0data")
    large = Content.read(iter([b"x" * MAX_STORED_BYTES, b"y"]))
    assert (binary.kind, binary.data, binary.size) == (Kind.BINARY, None, 10)
    assert (large.kind, large.data, large.size) == (Kind.TOO_LARGE, None, MAX_STORED_BYTES + 1)
    assert not binary.restorable and not large.restorable and ABSENT.restorable
    assert large.sha256 is not None and not large.same(Content.of(b"x"))


def test_a_file_behind_a_symlink_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("private")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    context = ToolContext(root)
    assert read_content(context, "link.txt") is None
    assert read_content(context, "missing.txt") == ABSENT


def test_diffs_name_both_sides_and_mark_a_missing_last_newline() -> None:
    diff = unified_diff("a.txt", Content.of(b"one\ntwo"), Content.of(b"one\nthree\n"))
    assert diff == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n"
        "+three\n"
    )
    assert unified_diff("n.txt", ABSENT, Content.of(b"x\n")).startswith(
        "--- /dev/null\n+++ b/n.txt"
    )
    assert unified_diff("b.bin", ABSENT, Content.of(b"\0")) == ""
