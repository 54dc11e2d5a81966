"""``trellisd run`` in-process: its command line, and each outcome a CI job would read off the
exit code, over a real store in a temp folder and a fake provider."""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path

import pytest

from tests.fixtures.fake_services import Model
from tests.fixtures.git_repo import git, make_repo
from tests.fixtures.waits import SAFETY_NET
from trellisd.cli import UsageError, parser, run_request
from trellisd.config import ProviderSettings
from trellisd.config_file import Settings
from trellisd.headless import ExitCode, Headless, HeadlessResult, HeadlessRun
from trellisd.processes import pid_alive
from trellisd.providers.base import ProviderError
from trellisd.records import ToolCall
from trellisd.services.archive import ArchiveService
from trellisd.store.facade import AsyncStore
from trellisd.vocabulary import Outcome

SETTINGS = Settings(ProviderSettings(name="openai"))


def args(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["run", *argv])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture
def model() -> Model:
    return Model()


def headless(tmp_path: Path, model: Model, request: HeadlessRun) -> tuple[Headless, io.StringIO]:
    out = io.StringIO()
    return Headless(tmp_path / "store.db", SETTINGS, request, out, lambda s: model), out


async def run(tmp_path: Path, model: Model, request: HeadlessRun) -> tuple[HeadlessResult, str]:
    runner, out = headless(tmp_path, model, request)
    return await runner.run(), out.getvalue()


def write(path: str) -> ToolCall:
    return ToolCall(f"call-{path}", "write_file", {"path": path, "content": "made\n"})


# The command line


def test_the_command_line_is_the_run_it_asks_for(root: Path, tmp_path: Path) -> None:
    request = run_request(
        args(
            "fix the tests",
            "--root",
            str(root),
            "--verify",
            "pytest -q 'tests/a b.py'",
            "--max-steps",
            "7",
            "--budget-usd",
            "0.5",
            "--approval",
            "all",
            "--export",
            str(tmp_path / "out.trellisd"),
        )
    )
    assert request == HeadlessRun(
        "fix the tests",
        root,
        None,
        ("pytest", "-q", "tests/a b.py"),
        7,
        0.5,
        "all",
        tmp_path / "out.trellisd",
    )
    assert request.turn("s-1").verify == (["pytest", "-q", "tests/a b.py"], 0)
    assert request.turn("s-1").budget is not None and request.turn("s-1").budget.usd == 0.5


def test_by_default_a_new_session_here_refusing_what_would_ask() -> None:
    request = run_request(args("hello", "--json"))
    assert request == HeadlessRun("hello")
    assert request.approval == "never" and request.turn("s-1").verify is None


def test_continuing_a_session_names_it() -> None:
    assert run_request(args("go on", "--session", "s-7")).session_id == "s-7"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["   "], "PROMPT must not be empty"),
        (["x", "--verify", "pytest 'unclosed"], "--verify cannot be split into words"),
        (["x", "--verify", "  "], "--verify names no command"),
        (["x", "--max-steps", "0"], "--max-steps must be from 1 to 10000"),
        (["x", "--budget-usd", "-1"], "--budget-usd must be more than 0"),
        (["x", "--budget-usd", "nan"], "--budget-usd must be more than 0"),
        (["x", "--root", "/no/such/folder"], "--root /no/such/folder is not an existing folder"),
        (["x", "--export", "/no/such/folder/f.trellisd"], "the folder of --export"),
    ],
)
def test_a_mistake_is_named_before_anything_runs(argv: list[str], says: str) -> None:
    with pytest.raises(UsageError, match="run: ") as caught:
        run_request(args(*argv))
    assert says in str(caught.value)


def test_a_worktree_is_asked_for_with_or_without_its_name() -> None:
    assert run_request(args("x", "--worktree")).worktree is True
    assert run_request(args("x", "--worktree", "fix-login")).worktree == "fix-login"
    assert run_request(args("x")).worktree is None
    with pytest.raises(UsageError, match="--worktree makes a new session"):
        run_request(args("x", "--session", "s-1", "--worktree"))


def test_a_new_root_and_a_continued_session_cannot_go_together() -> None:
    with pytest.raises(SystemExit) as caught:
        args("x", "--root", ".", "--session", "s-1")
    assert caught.value.code == 2


# Outcomes


async def test_a_finished_turn_streams_its_text_and_exits_0(
    tmp_path: Path, model: Model, root: Path
) -> None:
    model.reply("All done here.")
    result, out = await run(tmp_path, model, HeadlessRun("say it", root))

    assert result.exit_code == ExitCode.FINISHED == 0
    assert out == "All done here.\n"
    shown = result.to_json()
    assert list(shown) == [
        "outcome",
        "sessionId",
        "turnId",
        "reply",
        "spent",
        "paths",
        "headHash",
        "worktree",
    ]
    assert shown["worktree"] is None
    assert shown["outcome"] == "finished" and shown["reply"] == "All done here."
    assert shown["sessionId"].startswith("s-") and shown["turnId"].startswith("t-")
    assert shown["paths"] == [] and len(shown["headHash"]) == 64
    assert set(shown["spent"]) == {"tokens", "usd"}


async def test_a_verified_turn_exits_0_with_its_changes(
    tmp_path: Path, model: Model, root: Path
) -> None:
    model.reply("", write("done.txt"))
    model.reply("Made it.")
    request = HeadlessRun("make it", root, verify=("test", "-f", "done.txt"), approval="all")
    result, out = await run(tmp_path, model, request)

    assert (result.outcome, result.exit_code) == (Outcome.SUCCESS, ExitCode.FINISHED)
    assert result.paths == ("done.txt",)
    assert "[approved] write_file wants to write done.txt" in out
    assert '[tool] write_file {"path": "done.txt"' in out


async def test_a_run_in_a_worktree_changes_its_branch_and_leaves_the_checkout_alone(
    tmp_path: Path, model: Model
) -> None:
    checkout = make_repo(tmp_path / "checkout", {"README.md": "hello\n"})
    model.reply("", write("done.txt"))
    model.reply("Made it on a branch.")
    request = HeadlessRun("make it", checkout, approval="all", worktree="ci-job-3")
    result, _ = await run(tmp_path, model, request)

    assert result.exit_code == ExitCode.FINISHED and result.paths == ("done.txt",)
    shown = result.to_json()["worktree"]
    assert shown["branch"] == "trellisd/ci-job-3" and shown["base"] == "main"
    assert (Path(shown["path"]) / "done.txt").read_text() == "made\n"
    assert not (checkout / "done.txt").exists()
    assert "trellisd/ci-job-3" in git(checkout, "branch", "--list", "trellisd/*")


async def test_a_check_that_never_passes_exits_3(tmp_path: Path, model: Model, root: Path) -> None:
    request = HeadlessRun("make it", root, verify=("false",), max_steps=2)
    result, _ = await run(tmp_path, model, request)
    assert (result.outcome, result.exit_code) == (Outcome.FAILURE, ExitCode.VERIFY_FAILED)
    assert ExitCode.VERIFY_FAILED == 3


async def test_steps_run_out_without_a_check_exits_4(
    tmp_path: Path, model: Model, root: Path
) -> None:
    model.reply("", ToolCall("c1", "list_dir", {"path": "."}))
    result, _ = await run(tmp_path, model, HeadlessRun("look", root, max_steps=1))
    assert (result.outcome, result.exit_code) == (Outcome.EXHAUSTED, ExitCode.EXHAUSTED)
    assert ExitCode.EXHAUSTED == 4


async def test_a_budget_that_cannot_be_kept_exits_4_saying_why(
    tmp_path: Path, model: Model, root: Path
) -> None:
    result, _ = await run(tmp_path, model, HeadlessRun("spend", root, budget_usd=0.01))
    assert (result.outcome, result.exit_code) == (Outcome.EXHAUSTED, ExitCode.EXHAUSTED)
    assert result.error is not None and "budget" in result.error
    assert model.requests == []


async def test_a_provider_that_fails_exits_1(tmp_path: Path, root: Path) -> None:
    def broken(settings: ProviderSettings) -> Model:
        raise ProviderError("no provider is configured: set TRELLISD_PROVIDER")

    out = io.StringIO()
    runner = Headless(tmp_path / "store.db", SETTINGS, HeadlessRun("hi", root), out, broken)
    result = await runner.run()
    assert (result.outcome, result.exit_code) == (Outcome.ERROR, ExitCode.ERROR)
    assert ExitCode.ERROR == 1
    assert result.error == "no provider is configured: set TRELLISD_PROVIDER"
    assert result.turn_id is not None  # the turn is recorded as error


async def test_an_unknown_session_exits_1_with_no_turn(tmp_path: Path, model: Model) -> None:
    result, _ = await run(tmp_path, model, HeadlessRun("hi", session_id="s-unknown"))
    assert (result.outcome, result.exit_code) == (Outcome.ERROR, ExitCode.ERROR)
    assert result.error is not None and "unknown session s-unknown" in result.error
    assert result.to_json() == {
        "outcome": "error",
        "sessionId": "s-unknown",
        "turnId": None,
        "reply": None,
        "spent": None,
        "paths": [],
        "headHash": None,
        "worktree": None,
    }


async def test_with_nobody_to_ask_a_command_is_refused_and_the_model_told(
    tmp_path: Path, model: Model, root: Path
) -> None:
    model.reply("", ToolCall("c1", "run_command", {"argv": ["touch", "made.txt"]}))
    model.reply("I was not allowed.")
    result, out = await run(tmp_path, model, HeadlessRun("make it", root))

    assert result.exit_code == ExitCode.FINISHED
    assert not (root / "made.txt").exists()
    assert "[denied] run_command wants to exec touch made.txt" in out
    told = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert len(told) == 1 and "did not approve" in str(told[0])


async def test_approval_all_allows_each_ask_once(tmp_path: Path, model: Model, root: Path) -> None:
    model.reply("", write("a.txt"))
    model.reply("", write("a.txt"))
    model.reply("Twice.")
    result, out = await run(tmp_path, model, HeadlessRun("write", root, approval="all"))

    assert result.exit_code == ExitCode.FINISHED
    assert out.count("[approved] write_file wants to write a.txt") == 2
    assert (root / "a.txt").read_text() == "made\n"


async def test_an_interrupt_cancels_the_running_turn_and_records_it(
    tmp_path: Path, model: Model, root: Path
) -> None:
    export = tmp_path / "out.trellisd"
    model.reply("never said", hold=asyncio.Event())
    runner, out = headless(tmp_path, model, HeadlessRun("wait", root, export=export))
    running = asyncio.ensure_future(runner.run())
    await asyncio.wait_for(model.waiting.wait(), SAFETY_NET)

    runner.interrupt()
    result = await asyncio.wait_for(running, SAFETY_NET)

    assert (result.outcome, result.exit_code) == (Outcome.CANCELLED, ExitCode.CANCELLED)
    assert ExitCode.CANCELLED == 130
    assert "[cancelling]" in out.getvalue()
    store = await AsyncStore.open(tmp_path / "store.db", pid_alive)
    try:
        assert result.session_id is not None
        turns = await store.sessions.history(result.session_id)
        assert [t.outcome for t in turns] == [Outcome.CANCELLED]
    finally:
        await store.close()
    assert export.is_file()  # the cancelled run is exported too


async def test_an_interrupt_before_the_turn_runs_none(
    tmp_path: Path, model: Model, root: Path
) -> None:
    runner, _ = headless(tmp_path, model, HeadlessRun("wait", root))
    runner.interrupt()
    result = await runner.run()
    assert (result.outcome, result.exit_code, result.turn_id) == (
        Outcome.CANCELLED,
        ExitCode.CANCELLED,
        None,
    )
    assert model.requests == []


async def test_the_export_imports_into_another_store_with_its_lineage(
    tmp_path: Path, model: Model, root: Path
) -> None:
    model.reply("Exported.")
    export = tmp_path / "out.trellisd"
    result, out = await run(tmp_path, model, HeadlessRun("hi", root, export=export))
    assert f"[exported] session {result.session_id} to {export}" in out

    store = await AsyncStore.open(tmp_path / "other.db", pid_alive)
    try:
        session = await ArchiveService(store).import_(str(export), None, False)
        assert session.session_id == result.session_id
        assert session.imported_from is not None
        assert session.imported_from.session_id == result.session_id
        assert session.imported_from.head_hash == result.head_hash
        assert (await store.sessions.verify(session.session_id)).verified
    finally:
        await store.close()


async def test_an_export_that_cannot_be_written_exits_1(
    tmp_path: Path, model: Model, root: Path
) -> None:
    (tmp_path / "taken").mkdir()
    request = HeadlessRun("hi", root, export=tmp_path / "taken")
    result, _ = await run(tmp_path, model, request)
    assert result.outcome == Outcome.FINISHED and result.exit_code == ExitCode.ERROR
    assert result.error is not None and "could not be exported" in result.error


async def test_a_session_continued_takes_the_next_turn(
    tmp_path: Path, model: Model, root: Path
) -> None:
    model.reply("First.")
    first, _ = await run(tmp_path, model, HeadlessRun("one", root))
    model.reply("Second.")
    second, _ = await run(tmp_path, model, HeadlessRun("two", session_id=first.session_id))

    assert second.session_id == first.session_id and second.reply == "Second."
    assert second.head_hash != first.head_hash
    assert [m.content for m in model.requests[1].messages if m.role == "user"] == [
        "one",
        "two",
    ]
