"""The approvals of a project's programs in the user's store: kept by root and line, taken
back by what the line was kept for (a hook's command line for every event, a server's for
every content of its pinned files), never another root's."""

from __future__ import annotations

from trellisd.mcp.pinned import approved_command
from trellisd.services.approvals import hook_command
from trellisd.store import Store

SERVER = "python3 tools/server.py\nsha256 tools/server.py 01ab"
OLD_SERVER = "python3 tools/server.py\nsha256 tools/server.py ffee"
HOOK = "hook preToolUse\npython3 hooks/guard.py\nsha256 hooks/guard.py 77aa"
HOOK_STOP = "hook stop\npython3 hooks/guard.py\nsha256 hooks/guard.py 77aa"


def test_an_approval_line_names_what_it_was_kept_for() -> None:
    assert approved_command(SERVER) == "python3 tools/server.py"
    assert approved_command("https://example.test/mcp") == "https://example.test/mcp"
    assert hook_command(HOOK) == "python3 hooks/guard.py"
    assert hook_command(SERVER) is None
    assert hook_command("hook-server --stdio") is None  # a server named like one


def test_revoking_takes_back_the_roots_lines_it_picks_and_no_other(store: Store) -> None:
    approvals = store.mcp_approvals
    for line in (SERVER, OLD_SERVER, HOOK, HOOK_STOP):
        approvals.approve("/work/a", line)
    approvals.approve("/work/b", SERVER)

    picked = approvals.revoke(
        "/work/a", lambda line: hook_command(line) == "python3 hooks/guard.py"
    )
    assert picked == 2
    assert not approvals.approved("/work/a", HOOK) and not approvals.approved("/work/a", HOOK_STOP)
    assert approvals.approved("/work/a", SERVER)

    server = "python3 tools/server.py"
    assert approvals.revoke("/work/a", lambda line: approved_command(line) == server) == 2
    assert not approvals.approved("/work/a", OLD_SERVER)
    assert approvals.approved("/work/b", SERVER)  # another root's stays
    assert approvals.revoke("/work/a", lambda line: True) == 0
