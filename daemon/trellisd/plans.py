"""A turn's plan: the entries its ``update_plan`` calls give, each pending, in progress or
completed; the last call's plan is the turn's (``Turn.plan``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .vocabulary import PlanStatus


@dataclass(frozen=True)
class PlanEntry:
    """One line of a turn's plan (``update_plan``)."""

    content: str
    status: PlanStatus
    priority: str | None = None  # high, medium or low; None when the model gave none

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content, "status": self.status.value}
        if self.priority is not None:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True)
class Plan:
    """A turn's plan as one ``update_plan`` call left it, on the step of that call."""

    step: int
    entries: tuple[PlanEntry, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"step": self.step, "entries": [e.to_wire() for e in self.entries]}
