"""Runs: one per turn, with the steps it committed and the events it recorded."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

import apsw

from ..errors import NotFound, NotRunning
from ..records import ANY_HEAD, Event, ExpectHead, ImageRef, RunSummary, Step, Thought, Tokens
from ..vocabulary import EventKind, FeedKind, Outcome, stored
from . import chain, costs, feed, images
from .db import Database, new_id, now
from .leases import Leases
from .rows import EVENT_COLUMNS, STEP_COLUMNS, event_of, step_of
from .sessions import Sessions, expect, set_title

RUNNING = Outcome.RUNNING


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
        title: str = "",
    ) -> tuple[str, str, str | None]:
        """Start a turn at the session's head (``StaleHead`` if it is not ``expect_head``);
        it becomes the head, and a session with no title takes ``title``. Returns
        ``(turn_id, run_id, parent_turn_id)``."""
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
            if title and not session.title:
                set_title(con, session_id, title)
            feed.append(con, session_id, FeedKind.TURN_STARTED, run_id, at=stamp)
            self._record_instructions(con, session_id, run_id)
        return turn_id, run_id, parent

    def _record_instructions(self, con: apsw.Connection, session_id: str, run_id: str) -> None:
        """The run's first event records the session's instructions when they changed
        (``session/instructions``) since its last run began."""
        row = con.execute(
            "SELECT instructions FROM session WHERE id = ? AND instructions_changed = 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return
        self._insert_event(
            con, session_id, run_id, EventKind.INSTRUCTIONS, None, {"instructions": row[0]}
        )
        con.execute("UPDATE session SET instructions_changed = 0 WHERE id = ?", (session_id,))

    def add_step(self, run_id: str, step: Step) -> None:
        call = step.tool_call
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            self.leases.holds(con, session_id)
            stamp = now()
            con.execute(
                "INSERT INTO step(run_id, n, decision, prompt, text, tool_call, result,"
                " input_tokens, output_tokens, cached_tokens, created_at, cost)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    stamp,
                    costs.of_step(con, run_id, step.tokens),
                ),
            )
            feed.append(con, session_id, FeedKind.STEP, run_id, step.step, at=stamp)
            chain.record(con, session_id, "step", f"{run_id}/{step.step}")

    def add_event(
        self, run_id: str, kind: EventKind, step: int | None, detail: dict[str, Any]
    ) -> int:
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            self.leases.holds(con, session_id)
            return self._insert_event(con, session_id, run_id, kind, step, detail)

    def add_images(self, run_id: str, given: list[tuple[ImageRef, bytes]]) -> None:
        """Store the images of the run's prompt, each once by SHA-256, and the ``images``
        event of its first step naming them, in one transaction."""
        with self.db.write() as con:
            session_id = self._session_of(con, run_id)
            self.leases.holds(con, session_id)
            for ref, data in given:
                images.put(con, ref.sha256, data)
            detail = images.detail(ref for ref, _ in given)
            self._insert_event(con, session_id, run_id, EventKind.IMAGES, 1, detail)

    @staticmethod
    def _insert_event(
        con: apsw.Connection,
        session_id: str,
        run_id: str,
        kind: EventKind,
        step: int | None,
        detail: dict[str, Any],
    ) -> int:
        row = con.execute(
            "SELECT coalesce(max(seq), 0) + 1 FROM event WHERE run_id = ?", (run_id,)
        ).fetchone()
        assert row is not None  # an aggregate always answers one row
        seq, stamp = int(row[0]), now()
        con.execute(
            "INSERT INTO event(run_id, seq, kind, step, detail, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, seq, kind, step, json.dumps(detail), stamp),
        )
        feed.append(con, session_id, FeedKind.EVENT, run_id, seq, at=stamp)
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
            self._insert_event(con, session_id, run_id, EventKind.STEER_HELD, None, detail)
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
            held = [] if kind == EventKind.RESUMED else [*held, json.loads(detail)]
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

    @staticmethod
    def _end(con: apsw.Connection, run_id: str, outcome: str, error: str | None, at: str) -> None:
        """Inside a write transaction: the run ends (unless its session was deleted)."""
        con.execute(
            "UPDATE run SET outcome = ?, error = ?, ended_at = ? WHERE id = ?",
            (outcome, error, at, run_id),
        )
        if con.changes():
            session_id = Runs._session_of(con, run_id)
            end = {"outcome": outcome, "error": error}
            feed.append(con, session_id, FeedKind.TURN_ENDED, run_id, detail=end, at=at)
            chain.record_state(
                con, session_id, "end", run_id, chain.end_fields(run_id, outcome, error, at)
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
                why = "the daemon running this turn stopped before it ended"
                self._end(con, run_id, Outcome.INTERRUPTED, why, now())
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
        steps = Runs._with_thoughts(
            con, [run_id], [(run_id, step_of(s)) for s in Runs._step_rows(con, run_id)]
        )
        tokens = sum((s.tokens for _, s in steps), Tokens())
        return RunSummary(
            row[0], row[1], row[2], stored(Outcome, row[3]), row[4], tokens, len(steps)
        )

    def compaction(self, run_ids: list[str]) -> tuple[str, int] | None:
        """The latest compaction among ``run_ids`` (a path's runs): its summary and how many
        turns of the path, from the first, it stands for; None when there is none."""
        if not run_ids:
            return None
        found: tuple[str, int] | None = None
        with self.db.read() as con:
            for start in range(0, len(run_ids), 500):
                chunk = run_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = con.execute(
                    "SELECT e.detail, s.result FROM event e"
                    " JOIN step s ON s.run_id = e.run_id AND s.n = e.step"
                    f" WHERE e.kind = '{EventKind.COMPACTION}' AND e.run_id IN ({marks})",
                    chunk,
                ).fetchall()
                for detail, summary in rows:
                    turns = json.loads(str(detail)).get("turns")
                    if isinstance(turns, int) and (found is None or turns >= found[1]):
                        found = (str(summary or ""), turns)
        return found

    def steps(self, run_id: str) -> list[Step]:
        with self.db.read() as con:
            self._summary(con, run_id)
            rows = [(run_id, step_of(row)) for row in self._step_rows(con, run_id)]
            return [step for _, step in self._with_thoughts(con, [run_id], rows)]

    @staticmethod
    def _with_thoughts(
        con: apsw.Connection, run_ids: list[str], steps: list[tuple[str, Step]]
    ) -> list[tuple[str, Step]]:
        """``steps`` (each with its run) with what their ``thought`` events record: the
        step's thought, and its reasoning tokens."""
        found: dict[tuple[str, int], dict[str, Any]] = {}
        for start in range(0, len(run_ids), 500):
            chunk = run_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for run_id, step, detail in con.execute(
                "SELECT run_id, step, detail FROM event"
                f" WHERE kind = '{EventKind.THOUGHT}' AND step IS NOT NULL"
                f" AND run_id IN ({marks}) ORDER BY seq",
                chunk,
            ):
                found[(str(run_id), int(step))] = json.loads(str(detail))
        if not found:
            return steps
        out = []
        for run_id, step in steps:
            detail = found.get((run_id, step.step))
            if detail is not None:
                thought = Thought.of(detail)
                tokens = detail.get("tokens")
                step = replace(
                    step,
                    thought=thought if thought.text or thought.items else None,
                    tokens=replace(
                        step.tokens, reasoning=tokens if isinstance(tokens, int) else None
                    ),
                )
            out.append((run_id, step))
        return out

    def transcripts(self, run_ids: list[str]) -> dict[str, list[Step]]:
        """The committed steps of each of ``run_ids`` (a path's runs), in one read."""
        found: dict[str, list[Step]] = {run_id: [] for run_id in run_ids}
        with self.db.read() as con:
            for start in range(0, len(run_ids), 500):
                chunk = run_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = con.execute(
                    f"SELECT run_id, {STEP_COLUMNS} FROM step WHERE run_id IN ({marks})"
                    " ORDER BY run_id, n",
                    chunk,
                )
                steps = [(str(row[0]), step_of(row[1:])) for row in rows]
                for run_id, step in self._with_thoughts(con, chunk, steps):
                    found[run_id].append(step)
        return found

    @staticmethod
    def _step_rows(con: apsw.Connection, run_id: str) -> list[tuple[Any, ...]]:
        return con.execute(
            f"SELECT {STEP_COLUMNS} FROM step WHERE run_id = ? ORDER BY n",
            (run_id,),
        ).fetchall()

    def events(self, run_id: str) -> list[Event]:
        return self.events_page(run_id, 0, -1)[0]

    def events_page(self, run_id: str, after: int, limit: int) -> tuple[list[Event], int | None]:
        """The run's events numbered after ``after``, at most ``limit`` (-1: all), and the
        number to read on from when more are recorded already, else None."""
        with self.db.read() as con:
            self._summary(con, run_id)
            rows: list[tuple[Any, ...]] = con.execute(
                f"SELECT {EVENT_COLUMNS} FROM event WHERE run_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (run_id, after, -1 if limit < 0 else limit + 1),
            ).fetchall()
        events = [event_of(row) for row in rows[: len(rows) if limit < 0 else limit]]
        more = 0 <= limit < len(rows)
        return events, events[-1].seq if more else None
