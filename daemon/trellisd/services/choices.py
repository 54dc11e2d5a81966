"""What an ACP client's user chose for a session, kept with it in the store: its model and
the requests rejected for good (its mode is the session's approval mode: ``Policies``)."""

from __future__ import annotations

from ..store.acp_choices import AcpChoice
from ..store.facade import AsyncStore


class ChoiceService:
    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def of(self, session_id: str) -> AcpChoice:
        return await self.store.acp_choices.of(session_id)

    async def choose_model(self, session_id: str, model: str) -> None:
        await self.store.acp_choices.choose_model(session_id, model)

    async def reject(self, session_id: str, summary: str) -> None:
        """The same request is denied without asking in this session from now on."""
        await self.store.acp_choices.reject(session_id, summary)

    async def copy(self, origin_id: str, fork_id: str) -> None:
        """A fork keeps its origin's choices."""
        await self.store.acp_choices.copy(origin_id, fork_id)


__all__ = ["AcpChoice", "ChoiceService"]
