"""A session that waits for a person's decision: a cancel had to kill a command mid-run, so
nothing runs on the workspace again until someone keeps what the command left or reverts the
turn (``session/recover``). The refusal names the command and says what to do."""

from __future__ import annotations

import shlex

from ..errors import Conflict
from ..records import Recovery, Session
from .seams import summary_line

ANSWER = 'answer session/recover with "keep" or "revert"'
"""What a native client does about it."""
COMMAND_CHARS = 80


def described(recovery: Recovery) -> dict[str, object]:
    """The recovery as the wire's ``data.recovery`` and ``Session.recovery`` say it."""
    return {
        "turnId": recovery.turn_id,
        "runId": recovery.run_id,
        "tool": recovery.tool,
        "argv": list(recovery.argv),
    }


def refuse_undecided(session: Session, what_to_do: str = ANSWER) -> None:
    """``Conflict`` while ``session`` waits for a decision about a killed command."""
    recovery = session.recovery
    if recovery is None:
        return
    command = summary_line(shlex.join(recovery.argv), COMMAND_CHARS)
    raise Conflict(
        f"session {session.session_id} needs a decision: a cancelled command ({command}) was"
        f" killed mid-run; {what_to_do}",
        sessionId=session.session_id,
        recovery=described(recovery),
    )
