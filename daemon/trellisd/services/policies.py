"""Each session's effective policy, with the grants the user gave: those kept with the
session and those kept for its root (``store.grants``), and the approval mode the user set
(``session/mode``, ACP's ``session/set_mode``: kept with the session in the store), the same
in every window."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import attrs

from ..errors import InvalidParams, NotFound
from ..policy import DEFAULT_POLICY, Policy, PolicySpec, Verdict, load_policy
from ..policy.layers import Approval
from ..policy.rules import Grant, described
from ..records import Session
from ..sandbox.netns import Loopbacks
from ..sandbox.walls import SandboxMode, Walls
from ..store.facade import AsyncStore
from ..tools.base import Action

QUARANTINE = "quarantine"
"""The folder of the store's folder where protected paths a program created are moved."""

MODE_WALLS: dict[Approval, SandboxMode] = {"auto": "workspace-write", "never": "read-only"}
"""The walls a mode brings with it; the other modes keep the session's own."""
KEPT_AS: dict[Approval, str] = {"never": "read-only"}
"""How the store keeps a mode, where it differs from the approval's name (ACP's mode id)."""
KEPT: dict[str, Approval] = {
    **{a: a for a in ("all", "auto", "acceptEdits", "ask", "plan")},
    "read-only": "never",
}
"""The approval a mode kept in the store stands for; a word this build does not know (a
later build's) is left unread."""


class ModeListener(Protocol):
    """Who is told a session's approval mode changed (the services' ``Notifier``)."""

    def mode_changed(self, session_id: str, approval: Approval) -> None: ...


def with_mode(spec: PolicySpec | None, approval: Approval) -> PolicySpec:
    """``session/open``'s policy as it would be with the approval mode ``approval``: its
    walls too for a mode that brings its own (``MODE_WALLS``)."""
    spec = spec or PolicySpec()
    return attrs.evolve(spec, approval=approval, sandbox=MODE_WALLS.get(approval, spec.sandbox))


def load(root: Path, requested: PolicySpec | None, default: Policy = DEFAULT_POLICY) -> Policy:
    """The default layers (the config file's, else the built-in one) apply unless the
    session names its own layers."""
    if requested is not None and requested.layers:
        return load_policy(root, requested, default=replace(default, layers=()))
    return load_policy(root, requested, default=default)


class Policies:
    def __init__(
        self,
        store: AsyncStore,
        default: Callable[[], Policy] = lambda: DEFAULT_POLICY,
        private: tuple[Path, ...] = (),
        loopbacks: Loopbacks | None = None,
        listener: ModeListener | None = None,
    ) -> None:
        self.store, self.default = store, default
        self.listener = listener
        """Told each mode change, to tell every window following the session."""
        self.private = private
        """The daemon's own folders (its store, its config): hidden from every program."""
        self.loopbacks = loopbacks or Loopbacks()
        """Each session's private loopback, which its walled programs share."""
        self._by_session: dict[str, Policy] = {}
        self._roots: dict[str, str] = {}
        self._own: dict[str, frozenset[Grant]] = {}
        self._project: dict[str, frozenset[Grant]] = {}

    def load(self, root: Path, requested: PolicySpec | None) -> Policy:
        return load(root, requested, self.default())

    async def remember(self, session: Session, policy: Policy) -> None:
        """Hold ``policy`` as the session's, with the grants the store keeps for it; all of
        it set at once, after the read, so that a request served meanwhile never finds the
        policy without its root and grants."""
        own, project = await self.store.grants.of(session.session_id, session.root)
        self._by_session[session.session_id] = policy
        self._kept(session, own, project)

    def forget(self, session_id: str) -> None:
        """The session was closed or deleted: read its policy afresh if it is used again."""
        self._by_session.pop(session_id, None)
        self._own.pop(session_id, None)
        self._roots.pop(session_id, None)

    def _kept(self, session: Session, own: frozenset[Grant], project: frozenset[Grant]) -> None:
        self._roots[session.session_id] = session.root
        self._own[session.session_id] = own
        self._project[session.root] = project

    async def of(self, session: Session) -> Policy:
        """The session's effective policy, read from its root the first time."""
        if session.session_id not in self._by_session:
            spec = await self.spec(session)
            policy = await asyncio.to_thread(self.load, Path(session.root), spec)
            await self.remember(session, policy)
        return self._composed(session.session_id)

    async def spec(self, session: Session) -> PolicySpec | None:
        """The session's ``session/open`` policy with the mode the user set since, if any: what
        a child session it starts is opened with."""
        kept = KEPT.get((await self.store.acp_choices.of(session.session_id)).mode or "")
        return session.policy if kept is None else with_mode(session.policy, kept)

    async def set_mode(self, session: Session, approval: Approval) -> Policy:
        """Set the session's approval mode from its next tool call on, as ``session/open``'s
        policy would (over the project file's), keeping the grants; kept in the store, and
        every window following the session told (``session/modeChanged``)."""
        spec = with_mode(session.policy, approval)
        policy = await asyncio.to_thread(self.load, Path(session.root), spec)
        await self.store.acp_choices.choose_mode(
            session.session_id, KEPT_AS.get(approval, approval)
        )
        await self.remember(session, policy)
        if self.listener is not None:
            self.listener.mode_changed(session.session_id, approval)
        return self._composed(session.session_id)

    def _composed(self, session_id: str) -> Policy:
        root = self._roots[session_id]
        return self._by_session[session_id].with_kept(
            self._own.get(session_id, frozenset()), self._project.get(root, frozenset())
        )

    async def walls(self, session: Session) -> Walls:
        """The walls of the programs the session starts."""
        policy = await self.of(session)
        quarantine = self.private[0] / QUARANTINE if self.private else None
        walls = policy.walls(Path(session.root), self.private, quarantine)
        return replace(walls, loopback=self.loopbacks.of(session.session_id))

    def check(self, session_id: str, action: Action) -> Verdict:
        return self._composed(session_id).check(action)

    async def grant(self, session_id: str, grant: Grant, project: bool) -> None:
        """The user allowed an action (or, ``allowRule``, every command a rule covers) from
        now on: for the session (``allowAlways``, ``allowRule``), or for every session over
        its root (``allowAlwaysProject``, ``allowRuleProject``); kept in the store."""
        root = self._roots[session_id]
        await self.store.grants.add(session_id, root, grant, project)
        if project:
            self._project[root] = self._project.get(root, frozenset()) | {grant}
        else:
            self._own[session_id] = self._own.get(session_id, frozenset()) | {grant}

    async def revoke(self, session: Session, grant: Grant, scope: str | None) -> Policy:
        """Take back a kept grant or rule; ``NotFound`` when the session has no such one."""
        policy = await self.of(session)
        if scope == "policy" or (scope is None and grant in policy.grants):
            raise InvalidParams(
                f"the grant to {described(grant)} came with the session's policy"
                " (session/open); it is not revoked here",
                field="grant.scope",
            )
        removed = await self.store.grants.remove(session.session_id, session.root, grant, scope)
        if not removed:
            raise NotFound(
                f"session {session.session_id} has no grant to {described(grant)}",
                sessionId=session.session_id,
            )
        own, project = await self.store.grants.of(session.session_id, session.root)
        self._kept(session, own, project)
        return self._composed(session.session_id)
