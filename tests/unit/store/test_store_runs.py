"""Runs: the steps and events a turn commits, its token sums, and runs whose daemon died."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.waits import SAFETY_NET
from trellisd.errors import NotFound
from trellisd.records import Session, Step, Tokens, ToolCall
from trellisd.store import Store

OpenSession = Callable[..., Session]
TakeTurn = Callable[..., tuple[str, str]]

# A daemon in another process that starts turns and never ends them: it prints the run ids,
# then either exits at once, as if killed, or stays alive until its stdin closes.
OTHER_DAEMON = """
import os, sys
from trellisd.records import ProviderChoice
from trellisd.store import Store
store = Store(sys.argv[1], lambda pid: True)
store.leases.register()
session = store.sessions.create("/work/other", "", ProviderChoice(), store.leases.daemon_id)
_, done, _ = store.runs.begin(session.session_id, "a turn that ended")
store.runs.finish(done, "finished")
_, running, _ = store.runs.begin(session.session_id, "a turn still running")
print(done, running, flush=True)
if sys.argv[2] == "stay":
    sys.stdin.read()
os._exit(0)
"""


@pytest.fixture
def other_daemon(db_path: Path, store: Store) -> Iterator[Callable[[str], tuple[str, str]]]:
    """Start another daemon's runs on the same file; returns ``(finished, running)``."""
    staying: list[subprocess.Popen[str]] = []

    def start(mode: str) -> tuple[str, str]:
        command = [sys.executable, "-c", OTHER_DAEMON, str(db_path), mode]
        if mode == "exit":
            done, running = subprocess.run(
                command, capture_output=True, text=True, check=True, timeout=SAFETY_NET
            ).stdout.split()
            return done, running
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        staying.append(process)
        assert process.stdout is not None
        done, running = process.stdout.readline().split()
        return done, running

    yield start
    for process in staying:
        process.communicate(timeout=SAFETY_NET)


def test_steps_come_back_in_order_as_they_were_committed(
    store: Store, open_session: OpenSession
) -> None:
    sid = open_session().session_id
    _, run_id, _ = store.runs.begin(sid, "fix it")
    steps = [
        Step(
            1,
            "tool",
            "fix it",
            "Looking. ",
            ToolCall("c1", "read_file", {"path": "a.py"}),
            "print(1)\n",
            Tokens(50, 5, 0),
        ),
        Step(
            2,
            "tool",
            "and test it",
            "",
            ToolCall("c2", "run_command", {"argv": ["pytest"]}),
            "1 passed",
            Tokens(0, 0, 0),
        ),
        Step(3, "reply", None, "Fixed.", None, None, Tokens(70, 2, 40)),
    ]
    for step in steps:
        store.runs.add_step(run_id, step)
    store.runs.finish(run_id, "finished")

    assert store.runs.steps(run_id) == steps
    summary = store.runs.summary(run_id)
    assert (summary.run_id, summary.session_id, summary.outcome, summary.error) == (
        run_id,
        sid,
        "finished",
        None,
    )
    assert summary.steps == 3
    assert summary.tokens == Tokens(120, 7, 40)


def test_a_run_token_sum_is_unknown_where_any_step_did_not_report_it(
    store: Store, open_session: OpenSession, take_turn: TakeTurn
) -> None:
    sid = open_session().session_id
    _, run_id = take_turn(
        sid,
        "go",
        Step(1, "tool", "go", "", ToolCall("c", "list_dir", {}), ".", Tokens(10, 2, None)),
        Step(2, "cancelled", None, "half", None, None, Tokens(None, None, None)),
    )
    _, known_id = take_turn(sid, "again")

    assert store.runs.summary(run_id).tokens == Tokens(None, None, None)
    assert store.runs.summary(known_id).tokens == Tokens(1, 1, 0)


def test_a_run_with_no_steps_counts_no_tokens(store: Store, open_session: OpenSession) -> None:
    sid = open_session().session_id
    turn_id, run_id, _ = store.runs.begin(sid, "go")
    store.runs.finish(run_id, "error", "the model is down")

    summary = store.runs.summary(run_id)
    assert (summary.outcome, summary.error, summary.steps) == ("error", "the model is down", 0)
    assert summary.tokens == Tokens(0, 0, 0)
    turn = store.sessions.turn(sid, turn_id)
    assert (turn.reply, turn.tokens) == ("", Tokens(0, 0, 0))


def test_events_are_numbered_per_run_and_come_back_in_order(
    store: Store, open_session: OpenSession
) -> None:
    sid = open_session().session_id
    _, first, _ = store.runs.begin(sid, "one")
    seqs = [
        store.runs.add_event(first, "model", None, {"model": "m1"}),
        store.runs.add_event(first, "retry", 1, {"attempt": 2, "delay": 0.5, "reason": "503"}),
        store.runs.add_event(first, "steered", 2, {"text": "also check b.py"}),
    ]
    store.runs.finish(first, "finished")
    _, second, _ = store.runs.begin(sid, "two")
    second_seq = store.runs.add_event(second, "model", None, {"model": "m2"})

    assert seqs == [1, 2, 3] and second_seq == 1
    events = store.runs.events(first)
    assert [(e.seq, e.kind, e.step, e.detail) for e in events] == [
        (1, "model", None, {"model": "m1"}),
        (2, "retry", 1, {"attempt": 2, "delay": 0.5, "reason": "503"}),
        (3, "steered", 2, {"text": "also check b.py"}),
    ]
    assert [e.detail for e in store.runs.events(second)] == [{"model": "m2"}]


@pytest.mark.parametrize("read", ["summary", "steps", "events"])
def test_an_unknown_run_is_not_found(store: Store, read: str) -> None:
    with pytest.raises(NotFound) as missing:
        getattr(store.runs, read)("r-nope")
    assert missing.value.message == "unknown run r-nope"
    assert missing.value.data == {"runId": "r-nope"}


def test_only_runs_whose_daemon_process_is_dead_are_marked_interrupted(
    store: Store,
    open_session: OpenSession,
    other_daemon: Callable[[str], tuple[str, str]],
) -> None:
    dead_done, dead_running = other_daemon("exit")
    live_done, live_running = other_daemon("stay")
    _, own_running, _ = store.runs.begin(open_session().session_id, "my own turn")

    marked = store.runs.mark_interrupted()

    assert marked == [dead_running]
    outcomes = {
        run_id: store.runs.summary(run_id)
        for run_id in (dead_done, dead_running, live_done, live_running, own_running)
    }
    assert {run_id: s.outcome for run_id, s in outcomes.items()} == {
        dead_done: "finished",
        dead_running: "interrupted",
        live_done: "finished",
        live_running: "running",
        own_running: "running",
    }
    assert outcomes[dead_running].error == "the daemon running this turn stopped before it ended"
    assert store.runs.mark_interrupted() == []
