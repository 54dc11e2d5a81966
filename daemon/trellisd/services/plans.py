"""Running a plan: ``session/plan/approve`` turns a planned turn's plan into the prompt of a
new turn, under the approval mode the user chose for it, and the new turn records which plan
it carries out (a ``plan-approved`` event: ``Turn.followsPlan``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidParams
from ..plans import Plan
from ..policy.layers import Approval
from ..records import Budget, Turn
from ..store.facade import AsyncStore
from .policies import Policies
from .running import Running
from .turns import FollowedPlan, TurnRequest

AFTER_PLANNING: Approval = "ask"
"""The mode a plan runs under when the session is in plan mode and the user names none."""


@dataclass(frozen=True)
class PlanApproval:
    """``session/plan/approve``: the planned turn, the mode to run its plan under (None: the
    session's, or ``AFTER_PLANNING`` out of plan mode), and the new turn's bounds."""

    session_id: str
    turn_id: str
    approval: Approval | None = None
    max_steps: int | None = None
    verify: tuple[list[str], int] | None = None
    budget: Budget | None = None


def prompt_of(turn: Turn, plan: Plan) -> str:
    """What the model is asked: carry out the plan, entry by entry, keeping it up to date."""
    lines = [
        f"The user approved the plan you made in turn {turn.turn_id}. Carry it out now, step"
        " by step, and keep the plan up to date with update_plan as each step is done:",
        "",
    ]
    for number, entry in enumerate(plan.entries, 1):
        lines.append(f"{number}. [{entry.status.value}] {entry.content}")
    return "\n".join(lines)


class PlanService:
    def __init__(self, store: AsyncStore, policies: Policies, running: Running) -> None:
        self.store, self.policies, self.running = store, policies, running

    async def approve(self, approval: PlanApproval) -> TurnRequest:
        """The turn that carries out the plan, once the session is in the mode it runs under.
        ``InvalidParams`` for a turn with no plan, or a plan to run in plan mode."""
        if approval.approval == "plan":
            raise InvalidParams(
                "a plan cannot run in plan mode, where nothing may change: name another"
                " approval (ask, acceptEdits, auto, ...)",
                field="approval",
            )
        session = await self.store.sessions.get(approval.session_id)
        turn = await self.store.sessions.turn(approval.session_id, approval.turn_id)
        if turn.plan is None or not turn.plan.entries:
            raise InvalidParams(
                f"turn {turn.turn_id} made no plan (no update_plan call): nothing to run",
                field="turnId",
                turnId=turn.turn_id,
            )
        self.running.refuse(session.session_id, "run a plan")
        mode: Approval | None = approval.approval
        if mode is None and (await self.policies.of(session)).effective_approval == "plan":
            mode = AFTER_PLANNING
        if mode is not None:
            await self.policies.set_mode(session, mode)
        return TurnRequest(
            session.session_id,
            prompt_of(turn, turn.plan),
            max_steps=approval.max_steps,
            verify=approval.verify,
            budget=approval.budget,
            follows=FollowedPlan(turn.turn_id, turn.plan),
        )
