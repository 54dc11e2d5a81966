"""Every way out of the session root is refused before anything is read or written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from trellisd.tools import Action, ToolContext, ToolFailure, default_tools
from trellisd.tools.command import RunCommand
from trellisd.tools.edit import EditFile, WriteFile
from trellisd.tools.files import ListDir, ReadFile
from trellisd.tools.search import Search


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('inside')\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret\n")
    return root


@pytest.fixture
def context(root: Path) -> ToolContext:
    return ToolContext(root)


def outside(root: Path) -> Path:
    return root.parent / "outside"


async def refused(tool: Any, arguments: dict[str, Any], context: ToolContext) -> str:
    """The tool refuses both when declaring its action and when asked to run."""
    with pytest.raises(ToolFailure) as declared:
        tool.action(arguments, context)
    with pytest.raises(ToolFailure) as ran:
        await tool.run(arguments, context)
    assert str(declared.value) == str(ran.value)
    return str(ran.value)


READS = [
    (ReadFile(), "path"),
    (ListDir(), "path"),
    (Search(), "path"),
]


@pytest.mark.parametrize(("tool", "field"), READS, ids=lambda t: getattr(t, "name", ""))
async def test_reads_refuse_dot_dot(tool: Any, field: str, context: ToolContext) -> None:
    message = await refused(tool, {field: "../outside/secret.txt", "pattern": "x"}, context)
    assert "'..' is refused" in message


@pytest.mark.parametrize(("tool", "field"), READS, ids=lambda t: getattr(t, "name", ""))
async def test_reads_refuse_an_absolute_path_outside(
    tool: Any, field: str, root: Path, context: ToolContext
) -> None:
    target = str(outside(root) / "secret.txt")
    message = await refused(tool, {field: target, "pattern": "x"}, context)
    assert "outside the session root" in message


@pytest.mark.parametrize(("tool", "field"), READS, ids=lambda t: getattr(t, "name", ""))
async def test_reads_refuse_a_symlink_out(
    tool: Any, field: str, root: Path, context: ToolContext
) -> None:
    (root / "link.txt").symlink_to(outside(root) / "secret.txt")
    (root / "linkdir").symlink_to(outside(root), target_is_directory=True)
    for given in ("link.txt", "linkdir", "linkdir/secret.txt"):
        message = await refused(tool, {field: given, "pattern": "x"}, context)
        assert "through a symlink" in message


async def test_an_absolute_path_inside_the_root_is_accepted(
    root: Path, context: ToolContext
) -> None:
    arguments = {"path": str(root / "src" / "app.py")}
    assert ReadFile().action(arguments, context) == Action("read", "src/app.py")
    assert await ReadFile().run(arguments, context) == "print('inside')\n"


async def test_a_symlink_inside_the_root_is_judged_by_where_it_leads(
    root: Path, context: ToolContext
) -> None:
    (root / "alias.py").symlink_to(root / "src" / "app.py")
    assert ReadFile().action({"path": "alias.py"}, context) == Action("read", "src/app.py")
    assert await ReadFile().run({"path": "alias.py"}, context) == "print('inside')\n"


WRITES = [
    (WriteFile(), {"content": "pwned\n"}),
    (EditFile(), {"old": "the secret", "new": "pwned"}),
]


@pytest.mark.parametrize(("tool", "extra"), WRITES, ids=lambda t: getattr(t, "name", ""))
@pytest.mark.parametrize(
    "given",
    ["../outside/secret.txt", "src/../../outside/secret.txt", "ABSOLUTE"],
)
async def test_writes_refuse_dot_dot_and_absolute_paths_outside(
    tool: Any, extra: dict[str, str], given: str, root: Path, context: ToolContext
) -> None:
    if given == "ABSOLUTE":
        given = str(outside(root) / "secret.txt")
    await refused(tool, {"path": given, **extra}, context)
    assert (outside(root) / "secret.txt").read_text() == "the secret\n"
    assert sorted(os.listdir(outside(root))) == ["secret.txt"]


@pytest.mark.parametrize(("tool", "extra"), WRITES, ids=lambda t: getattr(t, "name", ""))
async def test_writes_refuse_a_symlinked_file_out(
    tool: Any, extra: dict[str, str], root: Path, context: ToolContext
) -> None:
    (root / "link.txt").symlink_to(outside(root) / "secret.txt")
    message = await refused(tool, {"path": "link.txt", **extra}, context)
    assert "through a symlink" in message
    assert (outside(root) / "secret.txt").read_text() == "the secret\n"


@pytest.mark.parametrize(("tool", "extra"), WRITES, ids=lambda t: getattr(t, "name", ""))
async def test_writes_refuse_a_symlinked_parent_folder_out(
    tool: Any, extra: dict[str, str], root: Path, context: ToolContext
) -> None:
    (root / "linkdir").symlink_to(outside(root), target_is_directory=True)
    for given in ("linkdir/secret.txt", "linkdir/new.txt", "linkdir/deeper/new.txt"):
        await refused(tool, {"path": given, **extra}, context)
    assert sorted(os.listdir(outside(root))) == ["secret.txt"]
    assert (outside(root) / "secret.txt").read_text() == "the secret\n"


async def test_write_does_not_follow_a_dangling_symlink_out(
    root: Path, context: ToolContext
) -> None:
    (root / "dangling.txt").symlink_to(outside(root) / "planted.txt")
    message = await refused(WriteFile(), {"path": "dangling.txt", "content": "x"}, context)
    assert "through a symlink" in message
    assert not (outside(root) / "planted.txt").exists()
    assert (root / "dangling.txt").is_symlink()


async def test_command_cwd_is_confined(root: Path, context: ToolContext) -> None:
    (root / "linkdir").symlink_to(outside(root), target_is_directory=True)
    for cwd in ("..", str(outside(root)), "linkdir"):
        await refused(RunCommand(), {"argv": ["touch", "planted"], "cwd": cwd}, context)
    assert sorted(os.listdir(outside(root))) == ["secret.txt"]


@pytest.mark.parametrize("given", ["", None, 7, "nul\x00byte"])
async def test_a_path_that_is_not_a_usable_string_is_refused(
    given: Any, context: ToolContext
) -> None:
    await refused(ReadFile(), {"path": given}, context)
    await refused(WriteFile(), {"path": given, "content": ""}, context)


def test_default_tools_declare_their_actions(root: Path, context: ToolContext) -> None:
    tools = {tool.name: tool for tool in default_tools()}
    assert sorted(tools) == sorted(
        ["read_file", "list_dir", "search", "write_file", "edit_file", "run_command", "update_plan"]
    )
    calls: dict[str, dict[str, Any]] = {
        "read_file": {"path": "src/app.py"},
        "list_dir": {},
        "search": {"pattern": "x", "path": "src"},
        "write_file": {"path": "new/file.txt", "content": ""},
        "edit_file": {"path": "src/app.py", "old": "a", "new": "b"},
        "run_command": {"argv": ["pytest", "-k", "a and b"]},
        "update_plan": {"entries": [{"content": "read", "status": "pending"}]},
    }
    assert {name: tools[name].action(calls[name], context) for name in calls} == {
        "read_file": Action("read", "src/app.py"),
        "list_dir": Action("read", "."),
        "search": Action("read", "src"),
        "write_file": Action("write", "new/file.txt"),
        "edit_file": Action("write", "src/app.py"),
        "run_command": Action("exec", "pytest -k 'a and b'"),
        "update_plan": None,  # touches nothing: no policy judges it
    }
    assert not (root / "new").exists()


class SwappedAfterTheCheck(ToolContext):
    """A root whose folder ``src`` is swapped for a symlink to a folder outside right after
    a path is checked: the gap between checking a path and opening it."""

    def resolve(self, given: Any, *, field: str = "path") -> Path:
        real = super().resolve(given, field=field)
        src = self.real_root / "src"
        if not src.is_symlink():
            src.rename(self.real_root / "src.moved")
            src.symlink_to(self.real_root.parent / "outside")
        return real


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (ReadFile(), {"path": "src/secret.txt"}),
        (ListDir(), {"path": "src"}),
        (WriteFile(), {"path": "src/secret.txt", "content": "pwned\n"}),
        (WriteFile(), {"path": "src/new.txt", "content": "pwned\n"}),
        (EditFile(), {"path": "src/secret.txt", "old": "the secret", "new": "pwned"}),
    ],
)
async def test_a_folder_swapped_for_a_symlink_after_the_check_leads_nowhere(
    root: Path, tool: Any, arguments: dict[str, Any]
) -> None:
    (root / "src" / "secret.txt").write_text("the root's own\n")
    with pytest.raises(ToolFailure, match="changed while in use: a symlink appeared"):
        await tool.run(arguments, SwappedAfterTheCheck(root))
    assert sorted(p.name for p in outside(root).iterdir()) == ["secret.txt"]
    assert (outside(root) / "secret.txt").read_text() == "the secret\n"


async def test_a_search_does_not_read_through_a_folder_swapped_for_a_symlink(root: Path) -> None:
    (root / "src" / "secret.txt").write_text("inside\n")
    result = await Search().run({"pattern": "secret", "path": "src"}, SwappedAfterTheCheck(root))
    assert "the secret" not in result
