"""``trellisd run`` as a CI job runs it: a real subprocess against a model server on 127.0.0.1
streaming real SSE bytes. The text streams to stderr, ``--json`` prints one object on stdout,
the exit code says the outcome, nobody is asked, Ctrl-C cancels cleanly, and eight runs in
parallel, exported, import into one store where every session's log checks."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import TEST_KEY
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer, Reply
from tests.fixtures.waits import SAFETY_NET, until
from trellisd.processes import pid_alive
from trellisd.services.archive import ArchiveService
from trellisd.store.facade import AsyncStore

RESULT_FIELDS = [
    "outcome",
    "sessionId",
    "turnId",
    "reply",
    "spent",
    "paths",
    "headHash",
    "worktree",
]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        lines = self.stdout.splitlines()
        assert len(lines) == 1, self.stdout
        result: dict[str, Any] = json.loads(lines[0])
        assert list(result) == RESULT_FIELDS
        return result


class Jobs(ModelServer):
    """A model that does each job it is given, whatever order the jobs' calls come in: asked
    first, it writes ``done.txt`` holding the prompt; told the write's result, it says so."""

    def _next(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        if messages and messages[-1].get("role") == "tool":
            return Reply(text="Done.")
        prompt = [m["content"] for m in messages if m.get("role") == "user"][-1]
        write = {"path": "done.txt", "content": f"{prompt}\n"}
        return Reply(tool_calls=[{"name": "write_file", "arguments": write}])


def environment(tmp_path: Path, url: str, **settings: str) -> dict[str, str]:
    return hermetic_env(
        tmp_path / "home",
        TRELLISD_PROVIDER="openai",
        TRELLISD_BASE_URL=url,
        TRELLISD_API_KEY=TEST_KEY,
        TRELLISD_MODEL="test-model",
        **settings,
    )


async def start(
    tmp_path: Path, url: str, *args: str, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trellisd",
        "run",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env or environment(tmp_path, url),
    )


async def finish(process: asyncio.subprocess.Process) -> Ran:
    out, err = await asyncio.wait_for(process.communicate(), SAFETY_NET)
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


async def run(tmp_path: Path, url: str, *args: str, **settings: str) -> Ran:
    env = environment(tmp_path, url, **settings)
    return await finish(await start(tmp_path, url, *args, env=env))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


def db(tmp_path: Path) -> list[str]:
    return ["--db", str(tmp_path / "store.db")]


async def history(store_file: Path, session_id: str) -> list[str]:
    store = await AsyncStore.open(store_file, pid_alive)
    try:
        return [t.outcome for t in await store.sessions.history(session_id)]
    finally:
        await store.close()


async def test_the_text_streams_to_stderr_and_the_result_is_one_object_on_stdout(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    model.reply("The answer is forty-two.")
    ran = await run(
        tmp_path, model.url, "what is it?", "--root", str(root), "--json", *db(tmp_path)
    )

    assert ran.code == 0, ran.stderr
    assert ran.stderr == "The answer is forty-two.\n"
    result = ran.result
    assert result["outcome"] == "finished" and result["reply"] == "The answer is forty-two."
    assert result["paths"] == [] and len(result["headHash"]) == 64
    assert result["spent"]["tokens"] >= 0
    assert await history(tmp_path / "store.db", result["sessionId"]) == ["finished"]


async def test_without_json_stdout_stays_empty(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    model.reply("Quiet.")
    ran = await run(tmp_path, model.url, "hi", "--root", str(root), *db(tmp_path))
    assert (ran.code, ran.stdout, ran.stderr) == (0, "", "Quiet.\n")


async def test_a_verified_run_exits_0_naming_what_it_changed(tmp_path: Path, root: Path) -> None:
    with Jobs() as jobs:
        ran = await run(
            tmp_path,
            jobs.url,
            "make it",
            "--root",
            str(root),
            "--verify",
            "test -f 'done.txt'",
            "--approval",
            "all",
            "--json",
            *db(tmp_path),
        )
    assert ran.code == 0, ran.stderr
    assert (ran.result["outcome"], ran.result["paths"]) == ("success", ["done.txt"])
    assert (root / "done.txt").read_text() == "make it\n"


async def test_a_check_that_never_passes_exits_3(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    model.reply("I think it is fine.")
    ran = await run(
        tmp_path,
        model.url,
        "fix it",
        "--root",
        str(root),
        "--verify",
        "false",
        "--max-steps",
        "1",
        "--json",
        *db(tmp_path),
    )
    assert ran.code == 3, ran.stderr
    assert ran.result["outcome"] == "failure"


async def test_a_budget_that_runs_out_exits_4(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    ran = await run(
        tmp_path,
        model.url,
        "spend",
        "--root",
        str(root),
        "--budget-usd",
        "0.01",
        "--json",
        *db(tmp_path),
    )
    assert ran.code == 4, ran.stderr
    assert ran.result["outcome"] == "exhausted"
    assert "trellisd run: exhausted: " in ran.stderr and "budget" in ran.stderr
    assert model.requests == []


async def test_a_provider_that_fails_exits_1(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    model.reply(status=400, error_body='{"error": {"message": "no such model"}}')
    ran = await run(
        tmp_path,
        model.url,
        "hi",
        "--root",
        str(root),
        "--json",
        *db(tmp_path),
        TRELLISD_MAX_RETRIES="0",
    )
    assert ran.code == 1, ran.stderr
    assert ran.result["outcome"] == "error"
    assert "trellisd run: error: " in ran.stderr and "Traceback" not in ran.stderr


async def test_bad_usage_exits_2_before_anything_runs(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    ran = await run(tmp_path, model.url, "hi", "--root", str(root), "--max-steps", "0")
    assert (ran.code, ran.stdout) == (2, "")
    assert ran.stderr == "trellisd: run: --max-steps must be from 1 to 10000\n"
    assert not (tmp_path / "home" / ".local" / "share" / "trellisd").exists()


async def test_with_nobody_to_ask_a_command_is_refused(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    model.reply(tool_calls=[{"name": "run_command", "arguments": {"argv": ["touch", "x.txt"]}}])
    model.reply("I may not run it.")
    ran = await run(tmp_path, model.url, "touch it", "--root", str(root), "--json", *db(tmp_path))

    assert ran.code == 0, ran.stderr
    assert not (root / "x.txt").exists()
    assert "[denied] run_command wants to exec touch x.txt" in ran.stderr
    tool_results = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert "did not approve" in tool_results[0]["content"]
    assert ran.result["reply"] == "I may not run it."


async def test_ctrl_c_cancels_the_turn_and_records_it(
    tmp_path: Path, model: ModelServer, root: Path
) -> None:
    held = model.reply("Working on it now", hold=threading.Event(), hold_at=2)
    export = tmp_path / "run.trellisd"
    process = await start(
        tmp_path,
        model.url,
        "work",
        "--root",
        str(root),
        "--json",
        "--export",
        str(export),
        *db(tmp_path),
    )
    assert process.stderr is not None
    await until(held.served, "the model was asked")
    streamed = await asyncio.wait_for(process.stderr.readuntil(b"on "), SAFETY_NET)
    assert streamed == b"Working on "  # streamed while the turn runs, before it ends

    process.send_signal(signal.SIGINT)
    ran = await finish(process)

    assert ran.code == 130, ran.stderr
    assert "[cancelling]" in ran.stderr and "Traceback" not in ran.stderr
    result = ran.result
    assert result["outcome"] == "cancelled" and result["turnId"] is not None
    assert await history(tmp_path / "store.db", result["sessionId"]) == ["cancelled"]
    assert export.is_file()


async def test_eight_runs_fan_out_and_their_exports_fan_in_to_one_store(tmp_path: Path) -> None:
    with Jobs() as jobs:
        processes = []
        for n in range(8):
            job = tmp_path / f"job{n}"
            (job / "root").mkdir(parents=True)
            processes.append(
                await start(
                    tmp_path,
                    jobs.url,
                    f"job {n}",
                    "--root",
                    str(job / "root"),
                    "--db",
                    str(job / "store.db"),
                    "--verify",
                    "test -f done.txt",
                    "--approval",
                    "all",
                    "--export",
                    str(job / "session.trellisd"),
                    "--json",
                )
            )
        runs = await asyncio.gather(*(finish(p) for p in processes))

    assert [r.code for r in runs] == [0] * 8, [r.stderr for r in runs]
    results = [r.result for r in runs]
    assert {(r["outcome"], tuple(r["paths"])) for r in results} == {("success", ("done.txt",))}
    for n in range(8):
        assert (tmp_path / f"job{n}" / "root" / "done.txt").read_text() == f"job {n}\n"

    store = await AsyncStore.open(tmp_path / "mine.db", pid_alive)
    try:
        archive = ArchiveService(store)
        for n, result in enumerate(results):
            session = await archive.import_(
                str(tmp_path / f"job{n}" / "session.trellisd"), None, False
            )
            assert session.session_id == result["sessionId"]
            assert session.imported_from is not None
            assert session.imported_from.head_hash == result["headHash"]
            verdict = await store.sessions.verify(session.session_id)
            assert verdict.verified, verdict
            [turn] = await store.sessions.history(session.session_id)
            assert (turn.prompt, turn.outcome) == (f"job {n}", "success")
        page, _ = await store.sessions.page(None, 50, None)
        assert len(page) == 8
    finally:
        await store.close()
