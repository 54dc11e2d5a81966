"""How one work tree's ``Folder`` judges a command's diff against the other sessions' work
that overlapped it, on its own clock: the cases the services' tests do not reach."""

from __future__ import annotations

from trellisd.changes.sharing import Folder
from trellisd.records import Sharer

A, B, C = Sharer("s-a", "t-a"), Sharer("s-b", "t-b"), Sharer("s-c", "t-c")


def test_a_file_write_overwritten_during_a_command_stays_in_it_shared_with_the_writer() -> None:
    folder = Folder()
    command = folder.begin(A, "r-a", 1, "")
    start = folder.tick()
    folder.wrote(B, "b.txt", start, "written")
    folder.wrote(C, "c.txt", folder.tick(), "written by c")
    judged = folder.settle(
        command, {"a.txt": "a", "b.txt": "then changed", "c.txt": "written by c"}
    )
    assert judged.kept == {"a.txt", "b.txt"}  # c.txt holds what C's tool wrote: C's alone
    assert judged.marks == {"b.txt": {B}}
    assert folder.commands == [] and folder.writes == []


def test_a_command_whose_diff_is_unknown_keeps_the_marks_it_caused() -> None:
    folder = Folder()
    unknown = folder.begin(A, "r-a", 1, "")
    other = folder.begin(B, "r-b", 1, "sub/")
    assert folder.settle(unknown, None).unshare == []
    judged = folder.settle(other, {"sub/b.txt": "b"})
    assert judged.kept == {"b.txt"} and judged.marks == {"b.txt": {A}}
    assert judged.unshare == []


def test_writes_and_commands_that_overlap_nothing_running_are_not_kept() -> None:
    folder = Folder()
    folder.wrote(B, "b.txt", folder.tick(), "b")
    assert folder.writes == []
    before = folder.begin(A, "r-a", 1, "")
    assert folder.settle(before, {"a.txt": "a"}).marks == {}
    later = folder.begin(B, "r-b", 2, "")
    assert folder.settle(later, {"a.txt": "a again"}).marks == {}  # A's had ended before


def test_the_same_sessions_work_is_never_shared_with_itself() -> None:
    folder = Folder()
    command = folder.begin(A, "r-a", 1, "")
    folder.wrote(A, "a.txt", folder.tick(), "x")
    judged = folder.settle(command, {"a.txt": "x"})
    assert judged.kept == {"a.txt"} and judged.marks == {}
