"""A hook's table in the config file and in a project's ``.trellisd.toml``: its keys, its
mistakes named by line and key, its matcher; and how a hook's exit code and output are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from trellisd.config_file import ConfigError, load_settings
from trellisd.errors import InvalidParams
from trellisd.hooks import HookRun, HookSpec
from trellisd.services.hooks import project_hooks


def settings_of(tmp_path: Path, text: str) -> tuple[HookSpec, ...]:
    path = tmp_path / "config" / "trellisd" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return load_settings({"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}).hooks


def test_the_config_files_hooks_are_read_in_order(tmp_path: Path) -> None:
    hooks = settings_of(
        tmp_path,
        '[[hooks]]\nevent = "preToolUse"\nmatcher = "write_*"\ncommand = ["guard", "-q"]\n'
        'timeout = 5\n\n[[hooks]]\nevent = "turnEnd"\ncommand = ["notify-send", "done"]\n',
    )
    assert hooks == (
        HookSpec("preToolUse", ("guard", "-q"), "write_*", 5.0),
        HookSpec("turnEnd", ("notify-send", "done")),
    )
    assert hooks[1].seconds == 30.0


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('event = "beforeEverything"\ncommand = ["x"]', ":4: hooks[0].event must be one of"),
        ('event = "stop"\ncommand = []', ":5: hooks[0].command must name a program"),
        ('event = "stop"\ncommand = ["x"]\ntimeout = 601', ":6: hooks[0].timeout must be"),
        ('event = "stop"\ncommand = ["x"]\ntimout = 5', ":6: hooks[0].timout is not"),
        ('event = "stop"\ncommand = ["x", "a\\u0000b"]', ":5: hooks[0].command[1] must be"),
    ],
)
def test_a_bad_hook_stops_the_daemon_naming_its_line_and_key(
    tmp_path: Path, table: str, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_of(tmp_path, f'model = "m"\n\n[[hooks]]\n{table}\n')
    assert said in str(caught.value)


def test_a_projects_hooks_come_from_its_file_and_a_bad_one_is_named(tmp_path: Path) -> None:
    (tmp_path / ".trellisd.toml").write_text(
        'approval = "ask"\n[[hooks]]\nevent = "stop"\ncommand = ["python3", "check.py"]\n'
    )
    assert project_hooks(tmp_path) == (HookSpec("stop", ("python3", "check.py")),)
    (tmp_path / ".trellisd.toml").write_text('[[hooks]]\nevent = "later"\ncommand = ["x"]\n')
    with pytest.raises(InvalidParams) as caught:
        project_hooks(tmp_path)
    assert ".trellisd.toml: hooks[0].event must be one of" in caught.value.message


def test_a_matcher_is_an_fnmatch_glob_of_tool_names_for_the_tool_events_only() -> None:
    writes = HookSpec("preToolUse", ("x",), "write_*")
    assert writes.matches("write_file") and not writes.matches("edit_file")
    assert HookSpec("postToolUse", ("x",), "mcp__gh__*").matches("mcp__gh__issue")
    assert HookSpec("preToolUse", ("x",)).matches("run_command")
    assert HookSpec("stop", ("x",), "write_*").matches(None)


def ran(code: int | None, out: str = "", err: str = "", **how: object) -> HookRun:
    return HookRun(HookSpec("preToolUse", ("x",)), code, out, err, 0.1, **how)  # type: ignore[arg-type]


def test_exit_two_blocks_with_stderr_as_the_reason() -> None:
    answer = ran(2, "", "not there\n").answer
    assert answer.blocks and answer.reason == "not there"
    assert ran(2, '{"reason": "from json"}').answer.reason == "from json"


def test_exit_zero_may_decide_in_json_and_other_output_is_context() -> None:
    assert ran(0, '{"decision": "allow"}').answer.decision == "allow"
    denied = ran(0, '{"decision": "deny", "reason": "no"}').answer
    assert denied.blocks and denied.reason == "no"
    assert ran(0, '{"context": "ticket 7"}').answer.context == "ticket 7"
    assert ran(0, "plain words\n").answer.context == "plain words"
    assert ran(0, '{"decision": "maybe"}').answer.decision is None


def test_other_exits_a_timeout_and_a_failed_start_go_on() -> None:
    assert ran(1, '{"decision": "deny"}', "boom").answer.decision is None
    assert ran(None, timed_out=True).answer.decision is None
    assert ran(None, failed="not found").answer.decision is None
    assert ran(None, timed_out=True).detail()["decision"] == "continue"
