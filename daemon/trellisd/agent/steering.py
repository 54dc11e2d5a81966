"""Steering: messages the user sends while a turn runs, delivered at the next step boundary.

A steer is queued at once; the loop takes what is queued before its next model call, so a
steer never joins a request already in flight. A ``clientMsgId`` seen before in the turn is
not queued again. What is still queued when the turn ends is handed back, undelivered.
"""

from __future__ import annotations

from dataclasses import dataclass

STEER_NOTE = "[The user sent this while you were working on the request above]\n"


@dataclass(frozen=True)
class Steer:
    text: str
    client_msg_id: str | None = None

    def detail(self) -> dict[str, str]:
        """The steer as events and notifications carry it."""
        if self.client_msg_id is None:
            return {"text": self.text}
        return {"text": self.text, "clientMsgId": self.client_msg_id}


class SteerInbox:
    def __init__(self) -> None:
        self._queue: list[Steer] = []
        self._seen: set[str] = set()
        self._closed = False

    def put(self, steer: Steer) -> bool:
        """Queue ``steer``; False when its ``client_msg_id`` was already seen."""
        if steer.client_msg_id is not None:
            if steer.client_msg_id in self._seen:
                return False
            self._seen.add(steer.client_msg_id)
        if self._closed:
            raise RuntimeError("the turn has ended")
        self._queue.append(steer)
        return True

    @property
    def pending(self) -> bool:
        return bool(self._queue)

    def take(self) -> list[Steer]:
        taken, self._queue = self._queue, []
        return taken

    def close(self) -> list[Steer]:
        """The turn ended: no more steers; returns those never delivered."""
        self._closed = True
        return self.take()
