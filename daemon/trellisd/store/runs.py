"""Runs: one per turn, with the steps it committed and the events it recorded."""

from __future__ import annotations

import json
import os
from typing import Any

import apsw

from ..errors import NotFound, NotRunning
from ..records import ANY_HEAD, Event, ExpectHead, RunSummary, Step, Tokens, ToolCall
from ..vocabulary import Outcome
from . import chain
from .db import Database, now
from .leases import Leases
from .sessions import Sessions, expect, new_id, set_title

RUNNING = Outcome.RUNNING


def _step(row: tuple[Any, ...]) -> Step:
    call = json.loads(row[4]) if row[4] is not None else None
    return Step(
        step=row[0],
        decision=row[1],
        prompt=row[2],
        text=row[3],
        tool_call=ToolCall(**call) if call else None,
        result=row[5],
        tokens=Tokens(row[6], row[7], row[8]),
    )


def _title(prompt: str) -> str:
    """A session with no title is named after its first prompt."""
    line = prompt.strip().splitlines()[0] if prompt.strip() else "untitled"
    return line if len(line) <= 60 else line[:59] + "\u2026"


class Runs:
    def __init__(self, db: Database, leases: Leases) -> None:
        self.db = db
        self.leases = leases
        self._ends: dict[str, tuple[str, str | None, str]] = {}

    def begin(
        self,
        session_id: str,
        prompt: str,
        model: str | None = None,
        expect_head: ExpectHead = ANY_HEAD,
    ) -> tuple[str, str, str | None]:
        """Start a turn at the session's head (``StaleHead`` if it is not ``expect_head``);
        it becomes the head. Returns ``(turn_id, run_id, parent_turn_id)``."""
        turn_id, run_id, stamp = new_id("t"), new_id("r"), now()
        with self.db.write() as con:
            session = Sessions._get(con, session_id)
            expect(session, expect_head)
            parent = session.head
            self.leases.acquire(con, session_id)
            con.execute(
                "INSERT INTO turn(id, session_id, parent_id, prompt, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (turn_id, session_id, parent, prompt, stamp),
            )
            con.execute(
                "INSERT INTO run(id, turn_id, outcome, pid, daemon_id, started_at, model)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, turn_id, RUNNING, os.getpid(), self.leases.daemon_id, stamp, model),
            )
            con.execute(
                "UPDATE session SET head = ?, updated_at = ? WHERE id = ?",
                (turn_id, stamp, session_id),
            )
            chain.record(con, session_id, "turn", turn_id)
            chain.record(con, session_id, "run", run_id)
            if not session.title:
                set_title(con, session_id, _title(prompt))
        return turn_id, run_id, parent

    def add_step(self, run_id: str, step: Step) -> None:
        call = step.tool_call
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            self.leases.holds(con, session_id)
            con.execute(
                "INSERT INTO step(run_id, n, decision, prompt, text, tool_call, result,"
                " input_tokens, output_tokens, cached_tokens, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    step.step,
                    step.decision,
                    step.prompt,
                    step.text,
                    json.dumps({"id": call.id, "name": call.name, "arguments": call.arguments})
                    if call
                    else None,
                    step.result,
                    step.tokens.input,
                    step.tokens.output,
                    step.tokens.cached,
                    now(),
                ),
            )
            chain.record(con, session_id, "step", f"{run_id}/{step.step}")

    def add_event(self, run_id: str, kind: str, step: int | None, detail: dict[str, Any]) -> int:
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            self.leases.holds(con, session_id)
            return self._event(con, session_id, run_id, kind, step, detail)

    @staticmethod
    def _event(
        con: apsw.Connection,
        session_id: str,
        run_id: str,
        kind: str,
        step: int | None,
        detail: dict[str, Any],
    ) -> int:
        row = con.execute(
            "SELECT coalesce(max(seq), 0) + 1 FROM event WHERE run_id = ?", (run_id,)
        ).fetchone()
        assert row is not None  # an aggregate always answers one row
        seq = int(row[0])
        con.execute(
            "INSERT INTO event(run_id, seq, kind, step, detail, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, seq, kind, step, json.dumps(detail), now()),
        )
        chain.record(con, session_id, "event", f"{run_id}/{seq}")
        return seq

    def hold_steer(self, run_id: str, detail: dict[str, str]) -> bool:
        """Keep a steer for a paused run, delivered when it resumes (a ``steer-held``
        event); False when its ``clientMsgId`` is already held. Takes the session's lease
        if it is free."""
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            row = con.execute("SELECT outcome FROM run WHERE id = ?", (run_id,)).fetchone()
            if row is None or row[0] != Outcome.PAUSED:
                raise NotRunning(
                    f"run {run_id} is no longer paused; steer the session again",
                    sessionId=session_id,
                )
            self.leases.acquire(con, session_id)
            ids = {d.get("clientMsgId") for d in self._held(con, run_id)}
            if "clientMsgId" in detail and detail["clientMsgId"] in ids:
                return False
            self._event(con, session_id, run_id, "steer-held", None, detail)
        return True

    def held_steers(self, run_id: str) -> list[dict[str, str]]:
        """The steers held for the run since it last resumed, oldest first."""
        with self.db.read() as con:
            return self._held(con, run_id)

    @staticmethod
    def _held(con: apsw.Connection, run_id: str) -> list[dict[str, str]]:
        held: list[dict[str, str]] = []
        for kind, detail in con.execute(
            "SELECT kind, detail FROM event WHERE run_id = ? AND kind IN"
            " ('steer-held', 'resumed') ORDER BY seq",
            (run_id,),
        ):
            held = [] if kind == "resumed" else [*held, json.loads(detail)]
        return held

    def finish(self, run_id: str, outcome: str, error: str | None = None) -> None:
        """End the run. An end the store cannot take now (a full disk, say) is kept and
        written by ``mark_interrupted``, the daemon's heartbeat, once the store takes it."""
        self._ends[run_id] = (outcome, error, now())
        self._write_ends()

    def _write_ends(self) -> None:
        with self.db.write() as con:
            for run_id, (outcome, error, at) in self._ends.items():
                self._end(con, run_id, outcome, error, at)
        self._ends.clear()

    def _end(
        self, con: apsw.Connection, run_id: str, outcome: str, error: str | None, at: str
    ) -> None:
        con.execute(
            "UPDATE run SET outcome = ?, error = ?, ended_at = ? WHERE id = ?",
            (outcome, error, at, run_id),
        )
        chain.record_state(
            con,
            self._session_of(con, run_id),
            "end",
            run_id,
            chain.end_fields(run_id, outcome, error, at),
        )

    def resume(self, run_id: str) -> None:
        """An interrupted run runs again, under this daemon."""
        self._ends.pop(run_id, None)
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            self.leases.acquire(con, session_id)
            con.execute(
                "UPDATE run SET outcome = ?, error = NULL, ended_at = NULL, pid = ?,"
                " daemon_id = ? WHERE id = ?",
                (RUNNING, os.getpid(), self.leases.daemon_id, run_id),
            )
            chain.record_state(con, session_id, "resume", run_id, {"runId": run_id, "at": now()})

    def mark_interrupted(self) -> list[str]:
        """Mark runs left ``running`` by a daemon that is gone as ``interrupted``, after
        writing the ends of this daemon's runs that the store could not take before."""
        if self.db.read_only:
            return []  # this daemon can mark nothing, and runs nothing
        if self._ends:
            self._write_ends()
        with self.db.write() as con:
            gone = set(self.leases.gone_daemons(con))
            rows = con.execute(
                "SELECT id, daemon_id FROM run WHERE outcome = ?", (RUNNING,)
            ).fetchall()
            known = {row[0] for row in con.execute("SELECT id FROM daemon")}
            stopped = [
                str(run_id)
                for run_id, daemon_id in rows
                if daemon_id in gone or daemon_id not in known
            ]
            for run_id in stopped:
                self._end(
                    con,
                    run_id,
                    Outcome.INTERRUPTED,
                    "the daemon running this turn stopped before it ended",
                    now(),
                )
            for daemon_id in gone:
                con.execute("DELETE FROM daemon WHERE id = ?", (daemon_id,))
        return stopped

    @staticmethod
    def _session_of(con: apsw.Connection, run_id: str) -> str:
        row = con.execute(
            "SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"unknown run {run_id}", runId=run_id)
        session_id: str = row[0]
        return session_id

    def summary(self, run_id: str) -> RunSummary:
        with self.db.read() as con:
            return self._summary(con, run_id)

    @staticmethod
    def _summary(con: apsw.Connection, run_id: str) -> RunSummary:
        row = con.execute(
            "SELECT r.id, r.turn_id, t.session_id, r.outcome, r.error FROM run r"
            " JOIN turn t ON t.id = r.turn_id WHERE r.id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"unknown run {run_id}", runId=run_id)
        steps = [_step(s) for s in Runs._step_rows(con, run_id)]
        tokens = sum((s.tokens for s in steps), Tokens())
        return RunSummary(row[0], row[1], row[2], row[3], row[4], tokens, len(steps))

    def steps(self, run_id: str) -> list[Step]:
        with self.db.read() as con:
            self._summary(con, run_id)
            return [_step(row) for row in self._step_rows(con, run_id)]

    @staticmethod
    def _step_rows(con: apsw.Connection, run_id: str) -> list[tuple[Any, ...]]:
        return con.execute(
            "SELECT n, decision, prompt, text, tool_call, result, input_tokens, output_tokens,"
            " cached_tokens FROM step WHERE run_id = ? ORDER BY n",
            (run_id,),
        ).fetchall()

    def events(self, run_id: str) -> list[Event]:
        with self.db.read() as con:
            self._summary(con, run_id)
            rows: list[tuple[Any, ...]] = con.execute(
                "SELECT seq, kind, step, detail, created_at FROM event"
                " WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [
            Event(
                int(seq),
                str(kind),
                None if step is None else int(step),
                json.loads(str(detail)),
                str(at),
            )
            for seq, kind, step, detail, at in rows
        ]
