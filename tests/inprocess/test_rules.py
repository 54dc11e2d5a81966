"""Rules over the wire: a command's approval proposes a rule, ``allowRule`` saves it, and
later commands it covers run unasked while others still ask; a deny layer still refuses;
``session/policy`` lists the rule, ``session/revoke`` takes it back, and ``allowRuleProject``
holds in another session over the same root. The commands run in the walls."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.driver import (
    Daemon,
    DaemonFactory,
    agent_turn,
    answer_approvals,
    events,
    open_session,
)
from tests.fixtures.model_server import ModelServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

RULE = ["pytest", "**"]
LISTED = {"kind": "rule", "target": '["pytest","**"]', "rule": RULE}
POLICY = {
    "layers": [
        {
            "name": "mine",
            "allowRead": ["**"],
            "allowWrite": ["**"],
            "allowExec": ["*"],
            "denyExec": ["pytest tests/secret*"],
        }
    ],
    "approval": "ask",
}


def command(*argv: str) -> dict[str, Any]:
    return {"name": "run_command", "arguments": {"argv": list(argv)}}


@pytest.fixture
def pytest_on_path(workspace: Path) -> dict[str, str]:
    """A ``pytest`` of the test's own, first on the PATH: it notes its arguments."""
    folder = workspace / "bin"
    folder.mkdir()
    program = folder / "pytest"
    program.write_text('#!/bin/sh\necho "$*" >> ran.txt\n')
    program.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def ran(workspace: Path) -> list[str]:
    ran = workspace / "ran.txt"
    return ran.read_text().splitlines() if ran.exists() else []


async def grants(daemon: Daemon, session: dict[str, Any]) -> list[dict[str, Any]]:
    policy = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    found: list[dict[str, Any]] = policy["grants"]
    return found


async def test_a_rule_saved_for_pytest_runs_what_it_covers_and_asks_for_the_rest(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, pytest_on_path: dict[str, str]
) -> None:
    daemon = await spawn(env=pytest_on_path)
    asked = answer_approvals(daemon, ["allowRule", "deny", "deny", "allowRuleProject"])
    session = await open_session(daemon, workspace, policy=POLICY)

    first = await agent_turn(daemon, model, session, command("pytest", "-q"))
    [proposing] = asked
    assert proposing["tool"] == "run_command" and proposing["proposedRule"] == RULE
    [approval] = await events(daemon, first["runId"], "approval")
    assert approval["detail"]["decision"] == "allowRule" and approval["detail"]["rule"] == RULE
    assert await grants(daemon, session) == [{**LISTED, "scope": "session"}]

    await agent_turn(
        daemon, model, session, command("pytest", "-k", "a"), command("pytest", "tests/x.py")
    )
    assert len(asked) == 1 and ran(workspace) == ["-q", "-k a", "tests/x.py"]

    code = "open('code.txt', 'w').write('ran')"
    await agent_turn(daemon, model, session, command(sys.executable, "-c", code))
    assert len(asked) == 2 and "proposedRule" not in asked[1]
    await agent_turn(daemon, model, session, command("touch", "t.txt"))
    assert len(asked) == 3 and asked[2]["proposedRule"] == ["touch", "**"]
    assert not (workspace / "code.txt").exists() and not (workspace / "t.txt").exists()

    refused = await agent_turn(daemon, model, session, command("pytest", "tests/secret.py"))
    assert len(asked) == 3 and ran(workspace)[-1] == "tests/x.py"
    [refusal] = await events(daemon, refused["runId"], "refusal")
    assert refusal["detail"]["layer"] == "mine"
    assert refusal["detail"]["rule"] == "pytest tests/secret*"

    revoked = await daemon.call(
        "session/revoke",
        {"sessionId": session["sessionId"], "grant": {"kind": "rule", "target": LISTED["target"]}},
    )
    assert revoked["grants"] == []
    await agent_turn(daemon, model, session, command("pytest", "-k", "b"))
    assert len(asked) == 4 and asked[3]["proposedRule"] == RULE
    assert await grants(daemon, session) == [{**LISTED, "scope": "project"}]

    other = await open_session(daemon, workspace, policy=POLICY)
    assert await grants(daemon, other) == [{**LISTED, "scope": "project"}]
    await agent_turn(daemon, model, other, command("pytest", "-x"))
    assert len(asked) == 4 and ran(workspace)[-1] == "-x"


async def test_a_rule_grant_to_revoke_must_be_a_rule(daemon: Daemon, workspace: Path) -> None:
    session = await open_session(daemon, workspace)
    for target in ("pytest", '["**"]', "[]"):
        bad = await daemon.error(
            "session/revoke",
            {"sessionId": session["sessionId"], "grant": {"kind": "rule", "target": target}},
        )
        assert bad.code == -32602 and "grant.target must be a rule" in bad.message
    missing = await daemon.error(
        "session/revoke",
        {"sessionId": session["sessionId"], "grant": {"kind": "rule", "target": '["make"]'}},
    )
    assert missing.code == -32010 and 'has no grant to rule ["make"]' in missing.message
