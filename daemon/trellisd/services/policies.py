"""Each session's effective policy, with the grants the user gave while this daemon runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..policy import DEFAULT_POLICY, Policy, PolicySpec, Verdict, load_policy
from ..records import Session
from ..tools.base import Action


def load(root: Path, requested: PolicySpec | None) -> Policy:
    """The daemon's default layer applies unless the session names its own layers."""
    if requested is not None and requested.layers:
        return load_policy(root, requested, default=Policy(approval=DEFAULT_POLICY.approval))
    return load_policy(root, requested)


class Policies:
    def __init__(self) -> None:
        self._by_session: dict[str, Policy] = {}

    def remember(self, session_id: str, policy: Policy) -> None:
        self._by_session[session_id] = policy

    def forget(self, session_id: str) -> None:
        """The session was closed or deleted: read its policy afresh if it is used again."""
        self._by_session.pop(session_id, None)

    async def of(self, session: Session) -> Policy:
        """The session's effective policy, read from its root the first time."""
        policy = self._by_session.get(session.session_id)
        if policy is None:
            policy = await asyncio.to_thread(load, Path(session.root), session.policy)
            self._by_session[session.session_id] = policy
        return policy

    def check(self, session_id: str, action: Action) -> Verdict:
        return self._by_session[session_id].check(action)

    def grant(self, session_id: str, action: Action) -> None:
        """The user allowed ``action`` for the rest of the session (``allowAlways``)."""
        self._by_session[session_id] = self._by_session[session_id].with_grant(action)
