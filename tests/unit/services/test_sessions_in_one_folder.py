"""Several sessions at work in one git folder at once, each with real commands: a turn's change
set holds what its session did, a path two sessions' commands may both have changed is marked
shared on both sides, a file tool's write is its own session's alone, and no revert deletes or
rewrites another session's file unless ``force``.

A command that must be caught mid-run waits at a ``Gate`` until the test lets it end: the
order is the test's, whatever the machine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.fixtures.fake_services import Editor, Model
from tests.fixtures.gates import Gate, gates_in
from tests.fixtures.git_repo import make_repo
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.errors import Conflict
from trellisd.policy import LayerSpec, PolicySpec
from trellisd.records import FileChange, ProviderChoice, Sharer, ToolCall, TurnResult
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Outcome

OPEN = PolicySpec(
    layers=(LayerSpec(name="editor", allow_read=("**",), allow_write=("**",), allow_exec=("*",)),),
    approval="all",
)


class Folk:
    """Sessions over one repository, each with its own model."""

    def __init__(self, app: Services, models: dict[str, Model], repo: Path, fifos: Path) -> None:
        self.app, self.models, self.repo, self.fifos = app, models, repo, fifos
        self.gates: list[Gate] = []
        self.sessions: dict[str, str] = {}
        self.closed = False

    async def open(self, name: str, folder: str = "") -> None:
        """``name``'s session, rooted at ``folder`` of the repository (its top: "")."""
        self.models[name] = Model()
        choice = ProviderChoice(model=name)
        root = self.repo / folder
        root.mkdir(exist_ok=True)
        session = await self.app.sessions.open(str(root), None, choice, OPEN)
        self.sessions[name] = session.session_id

    def gate(self, name: str) -> Gate:
        gate = Gate(self.fifos, name)
        self.gates.append(gate)
        return gate

    def command(self, name: str, script: str) -> asyncio.Task[TurnResult]:
        """``name``'s session runs one turn: one ``sh -c script``, then it is done."""
        call = ToolCall(f"run-{name}", "run_command", {"argv": ["sh", "-c", script]})
        self.models[name].reply("", call)
        self.models[name].reply("Done.")
        return asyncio.ensure_future(self._turn(name))

    def write(self, name: str, path: str, text: str) -> asyncio.Task[TurnResult]:
        call = ToolCall(f"write-{name}", "write_file", {"path": path, "content": text})
        self.models[name].reply("", call)
        self.models[name].reply("Done.")
        return asyncio.ensure_future(self._turn(name))

    async def _turn(self, name: str) -> TurnResult:
        result = await self.app.turns.turn(TurnRequest(self.sessions[name], f"work, {name}"))
        assert result.outcome == Outcome.FINISHED, result.error
        return result

    def sharer(self, name: str, turn: TurnResult) -> Sharer:
        return Sharer(self.sessions[name], turn.turn_id)

    def files(self) -> dict[str, str]:
        """The sessions' files on disk."""
        names = ("a.txt", "b.txt", "b2.txt", "c.txt")
        return {n: (self.repo / n).read_text() for n in names if (self.repo / n).exists()}

    async def close(self) -> None:
        for gate in self.gates:
            gate.unblock()
        if not self.closed:
            self.closed = True
            await self.app.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "# demo\n"})


@pytest_asyncio.fixture
async def folk(tmp_path: Path, editor: Editor, repo: Path) -> AsyncIterator[Folk]:
    models: dict[str, Model] = {}
    app = await services.start(
        tmp_path / "store.db",
        ProviderSettings(name="openai"),
        editor,
        lambda settings: models[settings.model or ""],
    )
    group = Folk(app, models, repo, gates_in(repo))
    try:
        yield group
    finally:
        await group.close()


def shared(changes: list[FileChange]) -> dict[str, set[Sharer]]:
    """Each listed path, with the turns it is shared with."""
    return {c.path: set(c.shared_with) for c in changes}


async def while_a_waits(
    folk: Folk, script: str, folder_b: str = ""
) -> tuple[TurnResult, TurnResult]:
    """A's command writes a.txt and waits while B's turn (rooted at ``folder_b``) runs
    ``script`` whole; then A's ends. ``(turn_a, turn_b)``."""
    await folk.open("a")
    await folk.open("b", folder_b)
    gate = folk.gate("a")
    running_a = folk.command("a", gate.script("echo a > a.txt"))
    await gate.reached()
    turn_b = await folk.command("b", script)
    await gate.release()
    return await running_a, turn_b


async def refused(app: Services, turn: TurnResult) -> Conflict:
    with pytest.raises(Conflict) as caught:
        await app.changes.revert(turn.turn_id, force=False)
    return caught.value


async def test_a_command_waiting_while_another_session_runs_one_lists_that_work_as_shared(
    folk: Folk,
) -> None:
    """The user's scenario: A's command writes a.txt and waits; B's writes b.txt and b2.txt
    meanwhile. A's change set holds a.txt as its own; b.txt and b2.txt, which A's command
    could have written too, are marked shared with B's turn on both sides, and neither
    revert touches them without force."""
    turn_a, turn_b = await while_a_waits(folk, "echo b > b.txt && echo b2 > b2.txt")

    a = shared(await folk.app.changes.turn(turn_a.turn_id))
    b = shared(await folk.app.changes.turn(turn_b.turn_id))
    by_a, by_b = folk.sharer("a", turn_a), folk.sharer("b", turn_b)
    assert a == {"a.txt": set(), "b.txt": {by_b}, "b2.txt": {by_b}}
    assert b == {"b.txt": {by_a}, "b2.txt": {by_a}}

    before = folk.files()
    conflict = await refused(folk.app, turn_a)
    assert conflict.data["paths"] == ["b.txt", "b2.txt"]
    assert conflict.data["shared"][0] == {
        "path": "b.txt",
        "sharedWith": [{"sessionId": by_b.session_id, "turnId": by_b.turn_id}],
    }
    assert (await refused(folk.app, turn_b)).data["paths"] == ["b.txt", "b2.txt"]
    with pytest.raises(Conflict) as branching:
        await folk.app.sessions.branch(folk.sessions["a"], None, restore_files=True)
    assert branching.value.data["paths"] == ["b.txt", "b2.txt"]
    assert (await folk.app.sessions.get(folk.sessions["a"])).head == turn_a.turn_id
    assert folk.files() == before == {"a.txt": "a\n", "b.txt": "b\n", "b2.txt": "b2\n"}

    forced = await folk.app.changes.revert(turn_a.turn_id, force=True)
    assert forced.restored == ["a.txt", "b.txt", "b2.txt"]
    assert folk.files() == {}


async def test_the_reverse_order_takes_back_the_marks_of_what_the_later_command_did_not_change(
    folk: Folk,
) -> None:
    """B's command starts first, writes b.txt and waits; A's writes a.txt and waits too; B
    ends first, while A runs: all B changed is marked shared with A until A ends and shows
    it never changed b.txt. What both could have written (a.txt) stays shared."""
    await folk.open("a")
    await folk.open("b")
    gate_b, gate_a = folk.gate("b"), folk.gate("a")
    running_b = folk.command("b", gate_b.script("echo b > b.txt"))
    await gate_b.reached()
    running_a = folk.command("a", gate_a.script("echo a > a.txt"))
    await gate_a.reached()
    await gate_b.release()
    turn_b = await running_b

    while_a_runs = shared(await folk.app.changes.turn(turn_b.turn_id))
    assert set(while_a_runs) == {"a.txt", "b.txt"}
    assert all(len(marks) == 1 for marks in while_a_runs.values())
    conflict = await refused(folk.app, turn_b)
    assert conflict.data["paths"] == ["a.txt", "b.txt"]  # A might still change b.txt

    await gate_a.release()
    turn_a = await running_a
    by_a, by_b = folk.sharer("a", turn_a), folk.sharer("b", turn_b)
    assert while_a_runs == {"a.txt": {by_a}, "b.txt": {by_a}}
    assert shared(await folk.app.changes.turn(turn_a.turn_id)) == {"a.txt": {by_b}}
    assert shared(await folk.app.changes.turn(turn_b.turn_id)) == {"a.txt": {by_a}, "b.txt": set()}

    assert (await refused(folk.app, turn_b)).data["paths"] == ["a.txt"]
    assert (await refused(folk.app, turn_a)).data["paths"] == ["a.txt"]
    assert folk.files() == {"a.txt": "a\n", "b.txt": "b\n"}


async def test_a_file_tools_write_during_another_sessions_command_is_its_own_alone(
    folk: Folk,
) -> None:
    """B's write_file lands while A's command waits: it is not in A's change set at all, so
    A's revert removes a.txt and leaves b.txt, and B's revert removes b.txt alone."""
    await folk.open("a")
    await folk.open("b")
    gate = folk.gate("a")
    running_a = folk.command("a", gate.script("echo a > a.txt"))
    await gate.reached()
    turn_b = await folk.write("b", "b.txt", "written by b\n")
    await gate.release()
    turn_a = await running_a

    assert shared(await folk.app.changes.turn(turn_a.turn_id)) == {"a.txt": set()}
    assert shared(await folk.app.changes.turn(turn_b.turn_id)) == {"b.txt": set()}
    reverted = await folk.app.changes.revert(turn_a.turn_id, force=False)
    assert reverted.restored == ["a.txt"]
    assert folk.files() == {"b.txt": "written by b\n"}
    assert (await folk.app.changes.revert(turn_b.turn_id, force=False)).restored == ["b.txt"]
    assert folk.files() == {}


async def test_three_sessions_at_once_never_revert_each_others_files_without_force(
    folk: Folk, tmp_path: Path, editor: Editor
) -> None:
    """A's and B's commands wait while C's runs and ends: each pair's common paths are
    shared, each one's own path is its own; every revert refuses what another session may
    have written, and a reopened store still knows the marks."""
    for name in "abc":
        await folk.open(name)
    gate_a, gate_b = folk.gate("a"), folk.gate("b")
    running_a = folk.command("a", gate_a.script("echo a > a.txt"))
    await gate_a.reached()
    running_b = folk.command("b", gate_b.script("echo b > b.txt"))
    await gate_b.reached()
    turn_c = await folk.command("c", "echo c > c.txt")
    await gate_b.release()
    turn_b = await running_b
    await gate_a.release()
    turn_a = await running_a

    by_a, by_b, by_c = folk.sharer("a", turn_a), folk.sharer("b", turn_b), folk.sharer("c", turn_c)
    expected = {
        turn_a.turn_id: {"a.txt": set(), "b.txt": {by_b}, "c.txt": {by_b, by_c}},
        turn_b.turn_id: {"b.txt": {by_a}, "c.txt": {by_a, by_c}},
        turn_c.turn_id: {"c.txt": {by_a, by_b}},
    }
    for turn_id, marks in expected.items():
        assert shared(await folk.app.changes.turn(turn_id)) == marks
    files = {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
    for turn in (turn_a, turn_b, turn_c):
        await refused(folk.app, turn)
        assert folk.files() == files

    await folk.close()
    reopened = await services.start(
        tmp_path / "store.db", ProviderSettings(name="openai"), editor, lambda s: Model()
    )
    try:
        for turn_id, marks in expected.items():
            assert shared(await reopened.changes.turn(turn_id)) == marks
        with pytest.raises(Conflict):
            await reopened.changes.revert(turn_b.turn_id, force=False)
        assert folk.files() == files
    finally:
        await reopened.close()


async def test_a_revert_while_another_sessions_command_runs_is_not_taken_for_its_work(
    folk: Folk,
) -> None:
    """B reverts its own write while A's command waits: the file B's revert removed is not
    in A's change set, so A's revert does not write it back."""
    await folk.open("a")
    await folk.open("b")
    written = await folk.write("b", "b.txt", "written by b\n")
    gate = folk.gate("a")
    running_a = folk.command("a", gate.script("echo a > a.txt"))
    await gate.reached()
    assert (await folk.app.changes.revert(written.turn_id, force=False)).restored == ["b.txt"]
    await gate.release()
    turn_a = await running_a

    assert shared(await folk.app.changes.turn(turn_a.turn_id)) == {"a.txt": set()}
    assert (await folk.app.changes.revert(turn_a.turn_id, force=False)).restored == ["a.txt"]
    assert folk.files() == {}


async def test_a_fork_keeps_the_marks_of_the_turns_it_copies(folk: Folk) -> None:
    turn_a, turn_b = await while_a_waits(folk, "echo b > b.txt")

    fork = await folk.app.sessions.fork(folk.sessions["a"], turn_a.turn_id)
    assert fork.head is not None and fork.head != turn_a.turn_id
    by_b = folk.sharer("b", turn_b)
    assert shared(await folk.app.changes.turn(fork.head)) == {"a.txt": set(), "b.txt": {by_b}}
    with pytest.raises(Conflict) as caught:
        await folk.app.changes.revert(fork.head, force=False)
    assert caught.value.data["paths"] == ["b.txt"]
    assert folk.files() == {"a.txt": "a\n", "b.txt": "b\n"}


async def test_sessions_rooted_in_different_folders_of_one_repository_share_by_real_path(
    folk: Folk,
) -> None:
    """B's root is a folder of A's: the same file under two names is still one path."""
    turn_a, turn_b = await while_a_waits(folk, "echo b > b.txt", "sub")

    by_a, by_b = folk.sharer("a", turn_a), folk.sharer("b", turn_b)
    assert shared(await folk.app.changes.turn(turn_a.turn_id)) == {
        "a.txt": set(),
        "sub/b.txt": {by_b},
    }
    assert shared(await folk.app.changes.turn(turn_b.turn_id)) == {"b.txt": {by_a}}
    assert (await refused(folk.app, turn_b)).data["paths"] == ["b.txt"]
    assert (folk.repo / "sub" / "b.txt").read_text() == "b\n"
