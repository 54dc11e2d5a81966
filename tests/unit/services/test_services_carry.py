"""A fork and an imported session over a real git repository answer their inherited turns'
changes as the origin does, and restore and revert across them; a fork starts with its
origin's budget and the spend of the path it copied."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fixtures.fake_services import Model
from tests.fixtures.git_repo import make_repo, user_state
from trellisd.policy import LayerSpec, PolicySpec
from trellisd.providers.base import ModelRequest, ProviderEvent, Stop, Usage
from trellisd.records import Budget, Spend, ToolCall
from trellisd.services import Services
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Outcome

OPEN = PolicySpec(
    layers=(LayerSpec(name="editor", allow_read=("**",), allow_write=("**",), allow_exec=("*",)),),
    approval="all",
)


class Paying(Model):
    """The fake provider, reporting 100 input and 20 output tokens for every call."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        async for event in super().stream(request):
            if isinstance(event, Stop):
                yield Usage(100, 20)
            yield event


@pytest.fixture
def model() -> Model:
    return Paying()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "# demo\n", "tracked.txt": "one\n"})


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(f"c-{name}-{len(arguments)}", name, dict(arguments))


async def two_turns(app: Services, model: Model, repo: Path) -> tuple[str, str, str]:
    """A session whose first turn writes a.txt and whose second edits it, adds b.txt and
    removes README.md by a command; ``(session_id, first, second)``."""
    sid = (await app.sessions.open(str(repo), None, None, OPEN)).session_id
    model.reply("", call("write_file", path="a.txt", content="v1\n"))
    model.reply("Written.")
    first = await app.turns.turn(TurnRequest(sid, "write a"))
    model.reply("", call("edit_file", path="a.txt", old="v1", new="v2"))
    model.reply("", call("write_file", path="b.txt", content="new\n"))
    remove = "import os; os.remove('README.md')"
    model.reply("", call("run_command", argv=[sys.executable, "-c", remove]))
    model.reply("Done.")
    second = await app.turns.turn(TurnRequest(sid, "change more"))
    assert first.outcome == second.outcome == Outcome.FINISHED
    return sid, first.turn_id, second.turn_id


async def path_of(app: Services, session_id: str) -> list[str]:
    return [t.turn_id for t in await app.sessions.history(session_id)]


def workspace(repo: Path) -> dict[str, str | None]:
    return {
        name: (repo / name).read_text() if (repo / name).exists() else None
        for name in ("a.txt", "b.txt", "README.md")
    }


async def test_a_forks_inherited_turns_answer_changes_restore_and_revert_as_the_origins(
    app: Services, model: Model, repo: Path
) -> None:
    sid, first, second = await two_turns(app, model, repo)
    git_before = user_state(repo)
    fork = await app.sessions.fork(sid, second)
    one, two = await path_of(app, fork.session_id)

    assert await app.changes.turn(two) == await app.changes.turn(second)
    assert {f.path for f in await app.changes.turn(two)} == {"README.md", "a.txt", "b.txt"}
    assert await app.changes.between(fork.session_id, one, two) == await app.changes.between(
        sid, first, second
    )

    _, back = await app.sessions.branch(fork.session_id, one, restore_files=True)
    assert back is not None and sorted(back.restored) == ["README.md", "a.txt", "b.txt"]
    assert workspace(repo) == {"a.txt": "v1\n", "b.txt": None, "README.md": "# demo\n"}

    await app.sessions.branch(fork.session_id, two, restore_files=True)
    assert workspace(repo) == {"a.txt": "v2\n", "b.txt": "new\n", "README.md": None}

    reverted = await app.changes.revert(two, force=False)
    assert sorted(reverted.restored) == ["README.md", "a.txt", "b.txt"]
    assert workspace(repo) == {"a.txt": "v1\n", "b.txt": None, "README.md": "# demo\n"}
    assert user_state(repo) | {"status": b""} == git_before | {"status": b""}
    assert (await app.sessions.verify(fork.session_id)).ok
    # the origin's own turn is as it was: its change set has no revert in it
    assert [e.kind for e in await app.runs.events(await turn_of(app, sid, second))].count(
        "reverted"
    ) == 0


async def turn_of(app: Services, session_id: str, turn_id: str) -> str:
    return next(t.run_id for t in await app.sessions.turns(session_id) if t.turn_id == turn_id)


@pytest.mark.parametrize("as_new", [False, True])
async def test_an_imported_sessions_turns_answer_changes_restore_and_revert(
    app: Services, model: Model, repo: Path, tmp_path: Path, as_new: bool
) -> None:
    sid, first, second = await two_turns(app, model, repo)
    origin_changes = await app.changes.turn(second)
    origin_net = await app.changes.between(sid, None, second)
    path = tmp_path / "session.trellisd"
    await app.archive.export(sid, str(path))
    if not as_new:
        await app.sessions.delete(sid)  # as if imported on another machine

    imported = await app.archive.import_(str(path), None, as_new)
    one, two = await path_of(app, imported.session_id)

    assert await app.changes.turn(two) == origin_changes
    assert await app.changes.between(imported.session_id, None, two) == origin_net
    await app.sessions.branch(imported.session_id, one, restore_files=True)
    assert workspace(repo) == {"a.txt": "v1\n", "b.txt": None, "README.md": "# demo\n"}
    await app.sessions.branch(imported.session_id, two, restore_files=True)
    reverted = await app.changes.revert(one, force=True)  # a.txt is as turn 2 left it
    assert reverted.restored == ["a.txt"]
    assert workspace(repo) == {"a.txt": None, "b.txt": "new\n", "README.md": None}
    assert (await app.sessions.verify(imported.session_id)).ok


async def test_a_fork_starts_with_the_origins_budget_and_the_spend_of_its_path(
    app: Services, model: Model, repo: Path
) -> None:
    sid = (await app.sessions.open(str(repo), None, None, OPEN)).session_id
    await app.budgets.set(sid, Budget(tokens=100_000))
    first = await app.turns.turn(TurnRequest(sid, "one"))
    await app.turns.turn(TurnRequest(sid, "two"))

    fork = await app.sessions.fork(sid, first.turn_id)
    assert await app.budgets.status(fork.session_id) == (
        Budget(tokens=100_000),
        Spend(120, 0.0, priced=False),
    )

    await app.turns.turn(TurnRequest(fork.session_id, "one and a half"))
    assert (await app.budgets.status(fork.session_id))[1] == Spend(240, 0.0, priced=False)
    assert (await app.budgets.status(sid))[1] == Spend(
        240, 0.0, priced=False
    )  # the origin's own two turns

    await app.budgets.set(fork.session_id, Budget(tokens=250))
    stopped = await app.turns.turn(TurnRequest(fork.session_id, "more"))
    assert stopped.outcome == Outcome.EXHAUSTED
    assert await app.budgets.status(sid) == (Budget(tokens=100_000), Spend(240, 0.0, priced=False))
