"""``session/*`` requests."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..server import TrellisServer, method

LIST_LIMIT = 50


def register(server: TrellisServer) -> None:
    @method(server, "session/open")
    async def session_open(ls: TrellisServer, p: wire.Params) -> Any:
        root, title, provider, policy = (
            p.string("root", required=True),
            p.string("title"),
            p.obj("provider"),
            p.obj("policy"),
        )
        return wire.session(await ls.daemon.open_session(root, title, provider, policy))

    @method(server, "session/policy")
    async def session_policy(ls: TrellisServer, p: wire.Params) -> Any:
        return (await ls.daemon.policy(p.string("sessionId", required=True))).to_wire()

    @method(server, "session/reopen")
    async def session_reopen(ls: TrellisServer, p: wire.Params) -> Any:
        session, history = await ls.daemon.reopen(p.string("sessionId", required=True))
        return {**wire.session(session), "history": wire.turns(history)["turns"]}

    @method(server, "session/list")
    async def session_list(ls: TrellisServer, p: wire.Params) -> Any:
        limit = p.integer("limit", low=1, high=1000) or LIST_LIMIT
        page, cursor = await ls.daemon.list_sessions(p.string("root"), limit, p.string("cursor"))
        return {
            "sessions": [wire.session_summary(s) for s in page],
            **({"nextCursor": cursor} if cursor else {}),
        }

    @method(server, "session/history")
    async def session_history(ls: TrellisServer, p: wire.Params) -> Any:
        return wire.turns(await ls.daemon.history(p.string("sessionId", required=True)))

    @method(server, "session/turns")
    async def session_turns(ls: TrellisServer, p: wire.Params) -> Any:
        return wire.turns(await ls.daemon.turns(p.string("sessionId", required=True)))

    @method(server, "session/turn")
    async def session_turn(ls: TrellisServer, p: wire.Params) -> Any:
        session_id, prompt = (
            p.string("sessionId", required=True),
            p.string("prompt", required=True, nonempty=True),
        )
        overrides = {
            "model": p.string("model"),
            "temperature": p.number("temperature"),
            "maxSteps": p.integer("maxSteps", low=1, high=10_000),
            "verify": wire.verify(p.obj("verify")),
        }
        return wire.turn_result(await ls.daemon.turn(session_id, prompt, overrides))

    @method(server, "session/branch")
    async def session_branch(ls: TrellisServer, p: wire.Params) -> Any:
        session_id, turn_id = p.string("sessionId", required=True), p.nullable_string("turnId")
        return wire.session(await ls.daemon.branch(session_id, turn_id))

    @method(server, "session/steer")
    async def session_steer(ls: TrellisServer, p: wire.Params) -> Any:
        session_id, text = (
            p.string("sessionId", required=True),
            p.string("text", required=True, nonempty=True),
        )
        ref, new = await ls.daemon.steer(session_id, text, p.string("clientMsgId"))
        receipt = {"turnId": ref.turn_id, "runId": ref.run_id, "queued": True}
        return receipt if new else {**receipt, "duplicate": True}

    @method(server, "session/cancel")
    async def session_cancel(ls: TrellisServer, p: wire.Params) -> Any:
        ref = await ls.daemon.cancel(p.string("sessionId", required=True))
        return {"cancelled": False} if ref is None else {"cancelled": True, **wire.turn_ref(ref)}

    @method(server, "session/resume")
    async def session_resume(ls: TrellisServer, p: wire.Params) -> Any:
        session_id, turn_id = (
            p.string("sessionId", required=True),
            p.string("turnId", required=True),
        )
        return wire.turn_result(await ls.daemon.resume(session_id, turn_id))

    @method(server, "session/takeover")
    async def session_takeover(ls: TrellisServer, p: wire.Params) -> Any:
        return wire.session(await ls.daemon.takeover(p.string("sessionId", required=True)))
