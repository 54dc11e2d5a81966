"""The ACP permission request of a command the daemon proposes a rule for: its
``allow_always`` option says the rule and answers ``allowRule``; without a rule, and for an
escalation, the options are as they were."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from trellisd.acp.notifier import OPTIONS, AcpNotifier, permission_options
from trellisd.records import TurnRef
from trellisd.vocabulary import Decision

ASKED = {
    "tool": "run_command",
    "arguments": {"argv": ["npm", "run", "test", "--", "--watch"]},
    "kind": "tool",
    "summary": "run_command wants to exec npm run test -- --watch",
    "proposedRule": ["npm", "run", "test", "**"],
}


class Peer:
    """The ACP client: answers each permission request with ``option``."""

    def __init__(self, option: str) -> None:
        self.option = option
        self.asked: list[dict[str, Any]] = []

    def request(self, method: str, params: Any) -> asyncio.Future[Any]:
        self.asked.append(params)
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        answered.set_result({"outcome": {"outcome": "selected", "optionId": self.option}})
        return answered


def test_the_allow_always_option_names_the_proposed_rule() -> None:
    options = permission_options(ASKED)
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow", "allow_once"),
        ("allowRule", "allow_always"),
        ("deny", "reject_once"),
        ("denyAlways", "reject_always"),
    ]
    assert options[1].name == "Always allow `npm run test …`"
    exact = permission_options({**ASKED, "proposedRule": ["make", "test"]})
    assert exact[1].name == "Always allow `make test`"
    quoted = permission_options({**ASKED, "proposedRule": ["python", "my tool.py", "**"]})
    assert quoted[1].name == "Always allow `python 'my tool.py' …`"
    without = {k: v for k, v in ASKED.items() if k != "proposedRule"}
    assert permission_options(without) == OPTIONS
    escalation = permission_options({**ASKED, "kind": "escalate"})
    assert [o.kind for o in escalation] == ["allow_once", "reject_once"]


async def test_choosing_it_answers_allow_rule_and_the_plain_always_still_answers_allow_always(
    tmp_path: Path,
) -> None:
    ref = TurnRef("s-1", "t-1", "r-1")
    for option, decision in (
        ("allowRule", Decision.ALLOW_RULE),
        ("allowAlways", Decision.ALLOW_ALWAYS),
    ):
        notifier = AcpNotifier(lambda: None)
        notifier.peer = Peer(option)
        notifier.follow("s-1", str(tmp_path))
        assert await notifier.ask_approval(ref, ASKED) == decision
