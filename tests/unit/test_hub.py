"""The hub in-process, with windows of the test's own: every follower of a session is told of
its turns and asked its approvals, the first answer decides, and a window that leaves is told
nothing more."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fixtures.waits import eventually
from trellisd.hub import Hub, Window
from trellisd.records import TurnRef
from trellisd.services.running import Running
from trellisd.vocabulary import Decision

REF = TurnRef("s-1", "t-1", "r-1")
REQUEST = {"tool": "run_command", "arguments": {"command": "make"}, "summary": "run make"}


class FakeNotifier:
    """Records what the window was told; what a test does not look at is let pass."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.thoughts: list[str] = []
        self.ended: list[str] = []
        self.modes: list[tuple[str, str]] = []

    def token(self, turn: TurnRef, step: int, text: str) -> None:
        self.tokens.append(text)

    def thought(self, turn: TurnRef, step: int, text: str) -> None:
        self.thoughts.append(text)

    def turn_ended(self, turn: TurnRef, result: Any) -> None:
        self.ended.append(turn.turn_id)

    def mode_changed(self, session_id: str, approval: str) -> None:
        self.modes.append((session_id, approval))

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


class FakeWindow:
    """A window whose approval questions wait until the test answers them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pid: int | None = None
        self._notifier = FakeNotifier()
        self.questions: list[asyncio.Future[Decision]] = []
        self.asked = asyncio.Event()
        self.withdrawn = asyncio.Event()
        self.closed = False

    @property
    def notifier(self) -> Any:
        return self._notifier

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        question: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self.questions.append(question)
        self.asked.set()
        try:
            return await question
        except asyncio.CancelledError:
            self.withdrawn.set()
            raise

    async def close(self, final: bytes = b"") -> None:
        self.closed = True


def attached(hub: Hub, *names: str) -> list[FakeWindow]:
    windows = [FakeWindow(name) for name in names]
    for window in windows:
        seam: Window = window
        hub.attach(seam)
        hub.follow(seam, REF.session_id)
    return windows


def outsider(hub: Hub) -> FakeWindow:
    """A window that follows another session than the others'."""
    other = FakeWindow("other")
    hub.attach(other)
    hub.follow(other, "s-2")
    return other


async def test_every_window_following_a_session_is_told_of_its_turn() -> None:
    hub = Hub(approval_timeout=60)
    left, right = attached(hub, "left", "right")
    other = outsider(hub)

    hub.notifier.token(REF, 1, "Hel")
    hub.notifier.token(REF, 1, "lo")
    hub.notifier.turn_ended(REF, None)  # type: ignore[arg-type]

    for window in (left, right):
        assert window.notifier.tokens == ["Hel", "lo"]
        assert window.notifier.ended == ["t-1"]
    assert other.notifier.tokens == [] and other.notifier.ended == []


async def test_an_approval_is_decided_by_the_first_answer_and_withdrawn_from_the_other() -> None:
    hub = Hub(approval_timeout=60)
    left, right = attached(hub, "left", "right")

    asking = asyncio.ensure_future(hub.notifier.ask_approval(REF, REQUEST))
    await left.asked.wait()
    await right.asked.wait()
    right.questions[0].set_result(Decision.ALLOW)

    assert await asking == Decision.ALLOW
    await left.withdrawn.wait()
    assert left.questions[0].cancelled()
    assert hub.approvals == {}


async def test_a_window_that_follows_while_a_question_waits_is_asked_it_too() -> None:
    hub = Hub(approval_timeout=60)
    (first,) = attached(hub, "first")
    asking = asyncio.ensure_future(hub.notifier.ask_approval(REF, REQUEST))
    await first.asked.wait()

    (late,) = attached(hub, "late")
    await late.asked.wait()
    late.questions[0].set_result(Decision.DENY)

    assert await asking == Decision.DENY
    await first.withdrawn.wait()


async def test_a_window_that_detaches_is_told_nothing_more_and_its_question_waits_for_others() -> (
    None
):
    hub = Hub(approval_timeout=60)
    staying, leaving = attached(hub, "staying", "leaving")
    asking = asyncio.ensure_future(hub.notifier.ask_approval(REF, REQUEST))
    await leaving.asked.wait()
    await staying.asked.wait()

    hub.detach(leaving)
    hub.notifier.token(REF, 1, "after")
    await leaving.withdrawn.wait()

    assert leaving.notifier.tokens == []
    assert staying.notifier.tokens == ["after"]
    assert hub.followers(REF.session_id) == (staying,)
    assert not asking.done()
    staying.questions[0].set_result(Decision.ALLOW_ALWAYS)
    assert await asking == Decision.ALLOW_ALWAYS


async def test_a_window_whose_own_wait_ran_out_leaves_the_decision_to_the_others() -> None:
    hub = Hub(approval_timeout=60)
    patient, impatient = attached(hub, "patient", "impatient")
    asking = asyncio.ensure_future(hub.notifier.ask_approval(REF, REQUEST))
    await impatient.asked.wait()
    await patient.asked.wait()

    (approval,) = hub.approvals[REF.session_id]
    impatient.questions[0].set_result(Decision.TIMEOUT)
    await eventually(lambda: impatient not in approval.asked, "the timeout was taken")
    assert not asking.done()
    patient.questions[0].set_result(Decision.DENY)
    assert await asking == Decision.DENY


async def test_a_mode_change_is_told_to_every_window_following_the_session() -> None:
    hub = Hub(approval_timeout=60)
    left, right = attached(hub, "left", "right")
    other = outsider(hub)

    hub.notifier.mode_changed(REF.session_id, "plan")

    assert left.notifier.modes == right.notifier.modes == [("s-1", "plan")]
    assert other.notifier.modes == []


async def test_a_fork_is_followed_by_whoever_follows_its_origin() -> None:
    hub = Hub(approval_timeout=60)
    (window,) = attached(hub, "window")

    hub.notifier.forked(REF.session_id, "s-fork")
    hub.notifier.token(TurnRef("s-fork", "t-9", "r-9"), 1, "forked")

    assert window.notifier.tokens == ["forked"]


async def test_a_thought_is_told_to_every_follower_and_kept_for_a_window_that_joins() -> None:
    hub = Hub(approval_timeout=60)
    hub.running = Running()
    hub.running.start(REF, "think")
    left, right = attached(hub, "left", "right")

    hub.notifier.thought(REF, 1, "Look at ")
    hub.notifier.thought(REF, 1, "the test.")
    hub.notifier.token(REF, 1, "Reading.")

    assert left.notifier.thoughts == right.notifier.thoughts == ["Look at ", "the test."]
    live = hub.running.snapshot(REF.session_id)
    assert live is not None and (live.step, live.thought, live.text) == (
        1,
        "Look at the test.",
        "Reading.",
    )
    hub.notifier.thought(REF, 2, "Now fix it.")  # the next step's reasoning starts afresh
    live = hub.running.snapshot(REF.session_id)
    assert live is not None and (live.step, live.thought, live.text) == (2, "Now fix it.", "")
