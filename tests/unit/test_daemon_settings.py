"""The daemon's own settings, read once from its environment at start-up: each variable's
value and default, and a bad value logged with its default kept (or refused where it always
was)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from trellisd.cli import UsageError, environment_settings
from trellisd.daemon_settings import DaemonSettings, max_steps, read_daemon_settings


def test_an_empty_environment_gives_every_default() -> None:
    read = read_daemon_settings({"HOME": "/home/u"})

    assert (read.max_steps, read.approval_timeout, read.heartbeat) == (100, 300.0, 2.0)
    assert (read.window_queue, read.mcp_timeout) == (32 * 1024 * 1024, 60.0)
    assert (read.acp_models, read.acp_context_window) == ((), 128_000)
    assert read.config_folder == Path("/home/u/.config/trellisd")
    assert read.prices_file == Path("/home/u/.config/trellisd/prices.json")
    assert read.stale_seconds == 15.0


def test_each_variable_sets_its_setting(tmp_path: Path) -> None:
    read = read_daemon_settings(
        {
            "TRELLISD_MAX_STEPS": "7",
            "TRELLISD_APPROVAL_TIMEOUT": "1.5",
            "TRELLISD_HEARTBEAT": "0.5",
            "TRELLISD_WINDOW_QUEUE": "4096",
            "TRELLISD_MCP_TIMEOUT": "2.5",
            "TRELLISD_MODELS": "gpt-4o, ,claude-sonnet-4-5",
            "TRELLISD_CONTEXT_WINDOW": "200000",
            "TRELLISD_PRICES": str(tmp_path / "prices.json"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "PATH": "/opt/git/bin:/usr/bin",
            "GIT_DIR": "/elsewhere/.git",
            "LANG": "C.UTF-8",
        }
    )

    assert read.max_steps == 7 and read.approval_timeout == 1.5 and read.heartbeat == 0.5
    assert read.window_queue == 4096 and read.mcp_timeout == 2.5
    assert read.acp_models == ("gpt-4o", "claude-sonnet-4-5")
    assert read.acp_context_window == 200_000
    assert read.prices_file == tmp_path / "prices.json"
    assert read.config_folder == tmp_path / "config" / "trellisd"
    assert read.search_path == "/opt/git/bin:/usr/bin"
    assert "GIT_DIR" not in read.git_environment and read.git_environment["LANG"] == "C.UTF-8"
    assert read.stale_seconds == 3.75


def test_a_bad_step_limit_is_logged_and_the_default_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert max_steps({"TRELLISD_MAX_STEPS": "lots"}) == 100

    assert "TRELLISD_MAX_STEPS" in caplog.text
    assert max_steps({"TRELLISD_MAX_STEPS": "0"}) == 100


@pytest.mark.parametrize("name", ["TRELLISD_APPROVAL_TIMEOUT", "TRELLISD_WINDOW_QUEUE"])
def test_a_number_that_is_not_one_stops_the_command_saying_which(name: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        environment_settings({name: "soon", "XDG_CONFIG_HOME": str(tmp_path)})

    assert str(refused.value) == f"{name} must be a number, not 'soon'"


def test_the_command_line_reads_the_daemons_settings_with_the_provider(tmp_path: Path) -> None:
    settings = environment_settings(
        {
            "XDG_CONFIG_HOME": str(tmp_path),
            "TRELLISD_PROVIDER": "scripted",
            "TRELLISD_MAX_STEPS": "3",
        }
    )

    assert settings.provider.name == "scripted"
    assert settings.daemon.max_steps == 3
    assert settings.daemon.config_folder == tmp_path / "trellisd"


def test_settings_built_in_code_start_from_the_defaults() -> None:
    assert DaemonSettings().max_steps == 100
    assert dict(DaemonSettings().git_environment) == {}
