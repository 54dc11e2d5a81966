"""Input nested deeper than Python can read, or text that is not Unicode, is the client's
mistake: -32602 naming what was wrong, never -32603, and the daemon serves on."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.driver import Daemon, open_session

HEADER = (
    '{"type":"header","format":"trellisd-session","version":3,'
    '"exportedAt":"2026-12-03T18:59:14.515+00:00","exportedBy":"trellisd 0.1.0"}\n'
)


async def test_an_import_line_nested_200000_deep_is_refused_as_a_bad_file(
    daemon: Daemon, tmp_path: Path
) -> None:
    path = tmp_path / "deep.trellisd"
    depth = 200_000
    path.write_text(HEADER + '{"type":"session","x":' + "[" * depth + "]" * depth + "}\n")

    error = await daemon.error("session/import", {"path": str(path)})

    assert error.code == -32602
    assert error.message == (
        f"{path} cannot be imported: line 2: the line nests arrays and objects too deep to be read"
    )
    assert error.data["field"] == "path" and error.data["line"] == 2
    assert "sessions" in await daemon.call("session/list", {})


async def test_a_project_file_of_5000_nested_tables_is_refused_naming_the_file(
    daemon: Daemon, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text("[" + ".".join(["t"] * 5000) + "]\nx = 1\n")

    error = await daemon.error("session/open", {"root": str(workspace)})

    assert error.code == -32602
    assert error.message == (
        f"{workspace / '.trellisd.toml'} nests tables and arrays more than 64 deep; a policy file"
        " this deep is not read"
    )
    assert error.data == {"file": str(workspace / ".trellisd.toml")}
    assert "sessions" in await daemon.call("session/list", {})


async def test_a_project_file_of_5000_nested_inline_tables_is_refused_naming_the_file(
    daemon: Daemon, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text("x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n")

    error = await daemon.error("session/open", {"root": str(workspace)})

    assert error.code == -32602
    assert error.message.startswith(f"{workspace / '.trellisd.toml'} nests tables and arrays")
    assert "sessions" in await daemon.call("session/list", {})


async def test_a_query_with_a_lone_surrogate_is_a_bad_param(
    daemon: Daemon, workspace: Path
) -> None:
    await open_session(daemon, workspace, title="parser")

    error = await daemon.error("session/list", {"query": "pars\ud800er"})

    assert error.code == -32602
    assert error.message == "query is not valid Unicode text: it holds a lone surrogate"
    assert error.data == {"field": "query"}


async def test_a_query_of_a_megabyte_is_refused_at_once(daemon: Daemon, workspace: Path) -> None:
    await open_session(daemon, workspace, title="parser")

    words = await daemon.error("session/list", {"query": "parser " * 150_000})
    size = await daemon.error("session/list", {"query": "p" * 1_000_000})

    assert (words.code, words.data) == (-32602, {"field": "query"})
    assert words.message == "query must be at most 64 words and 4 KiB, not 1,050,000 bytes"
    assert (size.code, size.data) == (-32602, {"field": "query"})
    assert size.message == "query must be at most 64 words and 4 KiB, not 1,000,000 bytes"
    found = await daemon.call("session/list", {"query": "parser"})
    assert [s["session"]["title"] if "session" in s else s["title"] for s in found["sessions"]] == [
        "parser"
    ]
