"""run_command and run_check: real programs, killed with their process group when they
overrun or the turn is cancelled."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waits import SAFETY_NET, alive, eventually
from trellisd.config_file import load_settings
from trellisd.tools import ToolContext, ToolFailure, run_check
from trellisd.tools.command import MAX_OUTPUT_BYTES, RunCommand
from trellisd.tools.environment import use_environment


async def gone(*pids: int) -> None:
    await eventually(lambda: not any(alive(pid) for pid in pids), f"{pids} are killed")


async def pid_from(path: Path) -> int:
    return int(
        await eventually(lambda: path.exists() and path.read_text().strip(), f"{path} is written")
    )


async def run(root: Path, **arguments: Any) -> str:
    return await RunCommand().run(arguments, ToolContext(root))


# a shell that starts a long sleep in the background, notes both pids, then waits
FAMILY = "sleep 30 & echo $! > child.pid; echo $$ > parent.pid; echo started; wait"


async def test_output_and_exit_code(tmp_path: Path) -> None:
    result = await run(tmp_path, argv=["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert result == "$ sh -c 'echo out; echo err >&2; exit 3'\nexit code 3\nout\nerr\n"


async def test_no_shell_interprets_the_arguments(tmp_path: Path) -> None:
    result = await run(tmp_path, argv=["echo", "a;", "$HOME", "`id`"])
    assert result.splitlines()[1:] == ["exit code 0", "a; $HOME `id`"]


async def test_runs_in_the_root_or_in_cwd_and_with_stdin_closed(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    assert (await run(tmp_path, argv=["pwd"])).splitlines()[2] == str(tmp_path.resolve())
    result = await run(tmp_path, argv=["pwd"], cwd="src")
    assert result.splitlines()[2] == str((tmp_path / "src").resolve())
    result = await run(tmp_path, argv=["sh", "-c", "cat; echo done"], timeout=SAFETY_NET)
    assert result.splitlines()[1:] == ["exit code 0", "done"]


async def test_a_timeout_kills_the_process_group(tmp_path: Path) -> None:
    # The kill must find the whole family started. A busy machine may take longer than a
    # short timeout to start it: then the timeout doubles, until the family was up in time.
    for timeout in (0.5, 1, 2, 4, 8, 16):
        lines = (await run(tmp_path, argv=["sh", "-c", FAMILY], timeout=timeout)).splitlines()
        if lines[2:] == ["started"]:
            break
    assert lines[1:] == [
        f"the command did not finish within {timeout:g} seconds and was killed, with the"
        " processes it started",
        "started",
    ]
    await gone(await pid_from(tmp_path / "child.pid"), await pid_from(tmp_path / "parent.pid"))


async def test_cancellation_kills_the_process_group_then_propagates(tmp_path: Path) -> None:
    task = asyncio.create_task(run(tmp_path, argv=["sh", "-c", FAMILY], timeout=60))
    child = await pid_from(tmp_path / "child.pid")
    parent = await pid_from(tmp_path / "parent.pid")
    assert alive(child) and alive(parent)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await gone(child, parent)


async def test_a_cancel_asks_first_and_says_when_it_had_to_kill(tmp_path: Path) -> None:
    told: list[tuple[str, tuple[str, ...]]] = []
    context = ToolContext(tmp_path, killed=lambda tool, argv: told.append((tool, argv)))

    async def cancel_once_running(script: str, pid_file: str) -> None:
        task = asyncio.create_task(RunCommand().run({"argv": ["sh", "-c", script]}, context))
        pid = await pid_from(tmp_path / pid_file)
        task.cancel()  # as soon as it runs: it may still be being started here
        with pytest.raises(asyncio.CancelledError):
            await task
        await gone(pid)

    # It ends when asked (SIGTERM): nothing for a person to decide.
    await cancel_once_running("echo $$ > polite.pid; exec sleep 30", "polite.pid")
    assert told == []
    # It ignores SIGTERM: killed after the grace, and said so.
    stubborn = 'trap "" TERM; echo $$ > stubborn.pid; sleep 30'
    await cancel_once_running(stubborn, "stubborn.pid")
    assert told == [("run_command", ("sh", "-c", stubborn))]


async def test_a_process_left_holding_the_output_is_killed(tmp_path: Path) -> None:
    # Were the tool to wait for the output to end, it would wait for the sleep: the safety
    # net ends the test long before.
    family = "sleep 600 & echo $! > child.pid; echo bye"
    result = await asyncio.wait_for(run(tmp_path, argv=["sh", "-c", family]), SAFETY_NET)
    assert result.splitlines()[1:] == ["exit code 0", "bye"]
    await gone(await pid_from(tmp_path / "child.pid"))


async def test_a_long_output_keeps_its_start_and_end(tmp_path: Path) -> None:
    program = "print('START' + 'x' * 100000 + 'END')"
    result = await run(tmp_path, argv=[sys.executable, "-c", program])
    assert len(result.encode()) < MAX_OUTPUT_BYTES + 500
    output = result.split("\n", 2)[2]
    assert output.startswith("START")
    assert output.endswith("END\n")
    dropped = 100000 + 9 - MAX_OUTPUT_BYTES
    assert f"\n[cut: {dropped} bytes of output left out here]\n" in output


async def test_death_by_signal_is_named(tmp_path: Path) -> None:
    result = await run(tmp_path, argv=["sh", "-c", "kill -TERM $$"])
    assert result.splitlines()[1] == "killed by signal SIGTERM"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"argv": []}, "argv must be a non-empty list of strings"),
        ({"argv": "ls -la"}, "argv must be a non-empty list of strings"),
        ({"argv": ["ls", 3]}, "argv must be a non-empty list of strings"),
        ({"argv": ["ls"], "timeout": 0}, "timeout must be a number of seconds above 0"),
        ({"argv": ["ls"], "timeout": 601}, "at most 600"),
        ({"argv": ["ls"], "timeout": "5"}, "timeout must be a number"),
        ({"argv": ["definitely-not-a-command-xyz"]}, "definitely-not-a-command-xyz: command not"),
        ({"argv": ["ls"], "cwd": "missing"}, "cwd missing is not a folder"),
    ],
)
async def test_bad_calls_are_clear_failures(
    tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolFailure, match=message):
        await run(tmp_path, **arguments)


async def test_an_empty_argument_is_passed_on_and_a_timeout_may_be_whole(tmp_path: Path) -> None:
    result = await run(tmp_path, argv=["printf", "%s|", "a", "", "b"], timeout=5, cwd="")
    assert "a||b|" in result


async def test_a_check_passes_on_the_expected_exit_code(tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("")
    check = await run_check(["ls"], 0, tmp_path, 10)
    assert check.passed and check.exit_code == 0
    assert check.output == "$ ls\nexit code 0\nmarker\n"
    check = await run_check(["sh", "-c", "exit 1"], 1, tmp_path, 10)
    assert check.passed and check.exit_code == 1


async def test_a_check_fails_on_another_exit_code_a_timeout_or_a_missing_program(
    tmp_path: Path,
) -> None:
    failed = await run_check(["sh", "-c", "echo broken; exit 2"], 0, tmp_path, 10)
    assert (failed.passed, failed.exit_code) == (False, 2)
    assert "broken" in failed.output
    slow = await run_check(["sleep", "30"], 0, tmp_path, 0.3)
    assert (slow.passed, slow.exit_code) == (False, None)
    assert "did not finish within 0.3 seconds" in slow.output
    missing = await run_check(["definitely-not-a-command-xyz"], 0, tmp_path, 10)
    assert (missing.passed, missing.exit_code) == (False, None)
    assert "command not found" in missing.output


SECRETS = {
    "TRELLISD_API_KEY": "sk-trellisd",
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-anthropic",
    "OPENROUTER_API_KEY": "sk-openrouter",
    "GITHUB_TOKEN": "ghp-token",
    "db_password": "hunter2",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "NPM_TOKEN": "npm-let-through",
    "PLAIN_SETTING": "plain-value",
}


def started_in(env: dict[str, str]) -> None:
    """The programs started from here on run in the window's environment ``env``, as the
    daemon reads it at the edge."""
    settings = load_settings({**os.environ, **env})
    use_environment(settings.environment, settings.pass_env)


async def test_commands_and_checks_do_not_see_the_daemons_secrets(tmp_path: Path) -> None:
    started_in({**SECRETS, "TRELLISD_PASS_ENV": "NPM_TOKEN, OPENAI_API_KEY"})
    for output in (
        await run(tmp_path, argv=["env"]),
        (await run_check(["env"], 0, tmp_path, 10)).output,
    ):
        for name in SECRETS:
            if name not in ("NPM_TOKEN", "PLAIN_SETTING"):
                assert SECRETS[name] not in output, name
        assert "NPM_TOKEN=npm-let-through" in output
        assert "PLAIN_SETTING=plain-value" in output
        assert "PATH=" in output


CREDENTIALS = {
    "GH_PAT": "ghp-pat",
    "DB_PASS": "db-pass",
    "MYSQL_PWD": "mysql-pwd",
    "SENTRY_DSN": "https://abc@o1.ingest.example/1",
    "ANALYTICS_DSN": "dsn-value",
    "DATABASE_URL": "postgres://app:db-url-pw@db.internal/app",
    "REDIS_CACHE": "redis://:redis-pw@cache:6379/0",
    "http_proxy": "http://proxy-user:proxy-pw@proxy:3128",
    "HTTPS_PROXY": "http://proxy-token@proxy:3128",
    "NPM_CONFIG__AUTH": "npm-auth",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "GCP_CREDENTIALS_FILE": "/secret/gcp.json",
}
HARMLESS = {
    "DOCS_URL": "https://docs.example/guide",
    "NO_PROXY": "localhost,127.0.0.1",
    "GIT_AUTHOR_NAME": "A. Author",
    "PAGER": "less",
    "MAIL_FROM": "dev@example.org",
}


async def test_credentials_under_other_names_and_in_urls_are_left_out(tmp_path: Path) -> None:
    started_in({**CREDENTIALS, **HARMLESS, "TRELLISD_PASS_ENV": "DB_PASS"})
    printed = await run(tmp_path, argv=["env"])
    for name, value in CREDENTIALS.items():
        if name != "DB_PASS":
            assert value not in printed, name
    assert "DB_PASS=db-pass" in printed
    for name, value in HARMLESS.items():
        assert f"{name}={value}" in printed
    assert "PATH=" in printed


async def test_background_processes_do_not_outlive_the_call(tmp_path: Path) -> None:
    """A process left running in the background, in the group or in a session of its own
    (``setsid``), with the output let go, is killed when the call ends."""
    script = (
        "sleep 301 >/dev/null 2>&1 & echo $! > grouped.pid;"
        " setsid sleep 302 >/dev/null 2>&1 & echo $! > escaped.pid; echo bye"
    )
    result = await run(tmp_path, argv=["sh", "-c", script])
    assert result.splitlines()[1:] == ["exit code 0", "bye"]
    grouped = await pid_from(tmp_path / "grouped.pid")
    escaped = await pid_from(tmp_path / "escaped.pid")
    await gone(grouped, escaped)
