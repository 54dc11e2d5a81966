"""``session/*`` requests."""

from __future__ import annotations

import functools
from typing import Any

from .. import wire
from ..services import Services
from ..services.plans import PlanApproval
from ..services.turns import TurnRequest
from .base import Method


async def session_open(app: Services, p: wire.SessionOpen) -> Any:
    opened = wire.session(
        await app.sessions.open(
            p.root, p.title, p.provider, p.policy, p.instructions, p.mcp_servers, p.worktree
        )
    )
    if p.budget is None:
        return opened
    return {
        **opened,
        **wire.budget(opened["sessionId"], *await app.budgets.set(opened["sessionId"], p.budget)),
    }


async def session_tools(app: Services, p: wire.SessionRef) -> Any:
    return await app.tools.of(p.session_id)


async def session_hooks(app: Services, p: wire.SessionRef) -> Any:
    return await app.hooks.listed(p.session_id)


async def session_policy(app: Services, p: wire.SessionRef) -> Any:
    return (await app.sessions.policy(p.session_id)).to_wire()


async def session_revoke(app: Services, p: wire.SessionRevoke) -> Any:
    program = p.grant.program
    if program is not None:
        return (await app.approvals.revoke(p.session_id, program, p.grant.target)).to_wire()
    grant = p.grant.grant()
    return (await app.sessions.revoke(p.session_id, grant, p.grant.scope)).to_wire()


async def session_reopen(app: Services, p: wire.SessionReopen) -> Any:
    read = functools.partial(app.sessions.reopen, p.session_id, p.limit, p.mcp_servers)
    reopened = wire.reopened(*await app.running.settled(p.session_id, read))
    return {**reopened, **wire.budget(p.session_id, *await app.budgets.status(p.session_id))}


async def session_list(app: Services, p: wire.SessionList) -> Any:
    limit = p.limit or wire.LIST_LIMIT
    page, cursor = await app.sessions.page(p.root, limit, p.cursor, p.query, p.parent_session_id)
    return wire.session_list(page, cursor)


async def session_history(app: Services, p: wire.SessionPage) -> Any:
    if not p.paged:
        return wire.turns(await app.sessions.history(p.session_id))
    return wire.turns(*await app.sessions.history_page(p.session_id, p.size, p.cursor))


async def session_turns(app: Services, p: wire.SessionPage) -> Any:
    if not p.paged:
        return wire.turns(await app.sessions.turns(p.session_id))
    return wire.turns(*await app.sessions.turns_page(p.session_id, p.size, p.cursor))


async def session_turn(app: Services, p: wire.SessionTurn) -> Any:
    verify = None if p.verify is None else (p.verify.argv, p.verify.exit_code)
    request = TurnRequest(
        p.session_id,
        p.prompt or "",
        p.choice,
        p.max_steps,
        verify,
        bool(p.step_mode),
        p.expect_head,
        p.on_conflict == "fork",
        context=p.context or (),
        budget=p.budget,
        images=p.images or (),
    )
    if p.command is not None:
        result = await app.commands.turn(request, p.command, p.arguments or "", bool(p.queue))
    else:
        run = functools.partial(app.turns.turn, request)
        result = await app.queues.turn(p.session_id, request.prompt, run, bool(p.queue))
    _, spent = await app.budgets.status(result.session_id or p.session_id)
    return {**wire.turn_result(result), "spent": wire.spent(spent)}


async def session_commands(app: Services, p: wire.SessionRef) -> Any:
    return wire.commands(p.session_id, await app.commands.of(p.session_id))


async def session_image(app: Services, p: wire.SessionImage) -> Any:
    return wire.image(p.session_id, *await app.turns.images.fetch(p.session_id, p.sha256))


async def session_mode(app: Services, p: wire.SessionApprovalMode) -> Any:
    session = await app.store.sessions.get(p.session_id)
    return (await app.sessions.policies.set_mode(session, p.approval)).to_wire()


async def session_plan_approve(app: Services, p: wire.SessionPlanApprove) -> Any:
    verify = None if p.verify is None else (p.verify.argv, p.verify.exit_code)
    approval = PlanApproval(p.session_id, p.turn_id, p.approval, p.max_steps, verify, p.budget)
    request = await app.plans.approve(approval)
    result = await app.queues.turn(p.session_id, request.prompt, lambda: app.turns.turn(request))
    _, spent = await app.budgets.status(result.session_id or p.session_id)
    return {**wire.turn_result(result), "spent": wire.spent(spent)}


async def session_queue(app: Services, p: wire.SessionRef) -> Any:
    await app.store.sessions.get(p.session_id)  # no such session: not found, not an empty queue
    return wire.queue(p.session_id, app.queues.waiting(p.session_id))


async def session_unqueue(app: Services, p: wire.SessionUnqueue) -> Any:
    entry = app.queues.unqueue(p.session_id, p.queue_id)
    return {"sessionId": p.session_id, "queueId": entry.queue_id, "dropped": True}


async def session_budget(app: Services, p: wire.SessionBudget) -> Any:
    return wire.budget(p.session_id, *await app.budgets.set(p.session_id, p.budget))


async def session_branch(app: Services, p: wire.SessionBranch) -> Any:
    return wire.branched(
        *await app.sessions.branch(p.session_id, p.turn_id, p.restore_files, p.force, p.expect_head)
    )


async def session_changes(app: Services, p: wire.SessionChanges) -> Any:
    return wire.file_changes(await app.changes.between(p.session_id, p.from_, p.to))


async def session_steer(app: Services, p: wire.SessionSteer) -> Any:
    ref, new = await app.turns.steer(p.session_id, p.text, p.client_msg_id)
    return wire.steer_receipt(ref, new)


async def session_cancel(app: Services, p: wire.SessionRef) -> Any:
    return wire.cancelled(await app.turns.cancel(p.session_id))


async def session_compact(app: Services, p: wire.SessionRef) -> Any:
    return wire.compacted(await app.turns.compact(p.session_id))


async def session_resume(app: Services, p: wire.SessionResume) -> Any:
    return wire.turn_result(await app.turns.resume(p.session_id, p.turn_id, bool(p.step_mode)))


async def session_pause(app: Services, p: wire.SessionRef) -> Any:
    return wire.pausing(await app.turns.pause(p.session_id))


async def session_verify(app: Services, p: wire.SessionRef) -> Any:
    return wire.verdict(await app.sessions.verify(p.session_id))


async def session_takeover(app: Services, p: wire.SessionRef) -> Any:
    return wire.session(await app.sessions.takeover(p.session_id))


async def session_fork(app: Services, p: wire.SessionFork) -> Any:
    return wire.session(await app.sessions.fork(p.session_id, p.turn_id, p.step))


async def session_recover(app: Services, p: wire.SessionRecover) -> Any:
    return wire.recovered(*await app.sessions.recover(p.session_id, p.decision, p.force))


async def session_rename(app: Services, p: wire.SessionRename) -> Any:
    return wire.session(await app.sessions.rename(p.session_id, p.title))


async def session_pin(app: Services, p: wire.SessionPin) -> Any:
    return wire.session(await app.sessions.pin(p.session_id, p.turn_id))


async def session_unpin(app: Services, p: wire.SessionPin) -> Any:
    return wire.session(await app.sessions.unpin(p.session_id, p.turn_id))


async def session_instructions(app: Services, p: wire.SessionInstructions) -> Any:
    return wire.session(await app.sessions.instruct(p.session_id, p.instructions))


async def session_close(app: Services, p: wire.SessionRef) -> Any:
    await app.sessions.close(p.session_id)
    return {"sessionId": p.session_id, "closed": True}


async def session_delete(app: Services, p: wire.SessionRef) -> Any:
    await app.sessions.delete(p.session_id)
    return {"sessionId": p.session_id, "deleted": True}


async def session_events(app: Services, p: wire.SessionEvents) -> Any:
    limit = p.limit or wire.EVENTS_LIMIT
    return wire.feed(*await app.sessions.feed(p.session_id, p.after or 0, limit))


async def session_export(app: Services, p: wire.SessionExport) -> Any:
    return wire.exported(await app.archive.export(p.session_id, p.path))


async def session_import(app: Services, p: wire.SessionImport) -> Any:
    return wire.session(await app.archive.import_(p.path, p.root, bool(p.as_new)))


METHODS: tuple[Method[Any], ...] = (
    Method("session/open", wire.SessionOpen, session_open, follow="answer"),
    Method("session/policy", wire.SessionRef, session_policy),
    Method("session/tools", wire.SessionRef, session_tools),
    Method("session/hooks", wire.SessionRef, session_hooks),
    Method("session/revoke", wire.SessionRevoke, session_revoke),
    Method("session/mode", wire.SessionApprovalMode, session_mode),
    Method("session/plan/approve", wire.SessionPlanApprove, session_plan_approve, follow="before"),
    Method("session/reopen", wire.SessionReopen, session_reopen, follow="live"),
    Method("session/list", wire.SessionList, session_list),
    Method("session/history", wire.SessionPage, session_history),
    Method("session/turns", wire.SessionPage, session_turns),
    Method("session/turn", wire.SessionTurn, session_turn, follow="before"),
    Method("session/commands", wire.SessionRef, session_commands),
    Method("session/branch", wire.SessionBranch, session_branch),
    Method("session/queue", wire.SessionRef, session_queue),
    Method("session/unqueue", wire.SessionUnqueue, session_unqueue),
    Method("session/budget", wire.SessionBudget, session_budget),
    Method("session/changes", wire.SessionChanges, session_changes),
    Method("session/steer", wire.SessionSteer, session_steer),
    Method("session/cancel", wire.SessionRef, session_cancel),
    Method("session/compact", wire.SessionRef, session_compact),
    Method("session/resume", wire.SessionResume, session_resume, follow="before"),
    Method("session/pause", wire.SessionRef, session_pause),
    Method("session/takeover", wire.SessionRef, session_takeover, follow="answer"),
    Method("session/verify", wire.SessionRef, session_verify),
    Method("session/image", wire.SessionImage, session_image),
    Method("session/fork", wire.SessionFork, session_fork, follow="answer"),
    Method("session/recover", wire.SessionRecover, session_recover),
    Method("session/rename", wire.SessionRename, session_rename),
    Method("session/instructions", wire.SessionInstructions, session_instructions),
    Method("session/pin", wire.SessionPin, session_pin),
    Method("session/unpin", wire.SessionPin, session_unpin),
    Method("session/close", wire.SessionRef, session_close, follow="leave"),
    Method("session/delete", wire.SessionRef, session_delete, follow="forget"),
    Method("session/events", wire.SessionEvents, session_events),
    Method("session/export", wire.SessionExport, session_export),
    Method("session/import", wire.SessionImport, session_import),
)
