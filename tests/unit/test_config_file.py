"""The user's config file: its keys, its mistakes named by line and key, and its place in
the order of precedence (defaults < file < environment < initializationOptions <
session/open < session/turn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trellisd.config import InitializationOptions
from trellisd.config_file import (
    ConfigError,
    config_path,
    load_settings,
)
from trellisd.mcp.spec import McpServerSpec
from trellisd.pricing import Price
from trellisd.records import ProviderChoice
from trellisd.tools.environment import child_environment


def env_with(tmp_path: Path, text: str | None, mode: int = 0o600, **env: str) -> dict[str, str]:
    config = tmp_path / "config"
    if text is not None:
        (config / "trellisd").mkdir(parents=True, exist_ok=True)
        path = config / "trellisd" / "config.toml"
        path.write_text(text)
        path.chmod(mode)
    return {"XDG_CONFIG_HOME": str(config), "HOME": str(tmp_path), **env}


def test_the_file_is_found_under_xdg_config_home_else_the_home_folder(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/trellisd/config.toml")
    assert config_path({"HOME": "/h"}) == Path("/h/.config/trellisd/config.toml")


def test_no_file_is_the_built_in_defaults(tmp_path: Path) -> None:
    settings = load_settings(env_with(tmp_path, None))
    assert settings.file is None and settings.provider.name is None
    assert settings.policy.layers[0].name == "default" and settings.mcp_servers == ()
    assert {source for _, _, source in settings.describe()} == {"built-in default"}


def test_each_setting_comes_from_the_most_specific_source(tmp_path: Path) -> None:
    env = env_with(
        tmp_path,
        'provider = "openai"\nmodel = "file-model"\nbaseUrl = "http://file/v1"\n'
        "temperature = 0.1\nmaxTokens = 100\nmaxRetries = 5\n",
        TRELLISD_MODEL="env-model",
        OPENAI_API_KEY="sk-env",
    )
    settings = load_settings(env)
    p = settings.provider
    assert (p.name, p.model, p.base_url, p.temperature, p.max_retries) == (
        "openai",
        "env-model",
        "http://file/v1",
        0.1,
        5,
    )
    sources = {key: source for key, _, source in settings.describe()}
    assert sources["model"] == "environment TRELLISD_MODEL"
    assert sources["baseUrl"].startswith("config file ") and sources["maxRetries"] != (
        "built-in default"
    )
    assert sources["apiKey"] == "environment OPENAI_API_KEY"
    assert sources["readTimeout"] == "built-in default"
    # initializationOptions over the environment, session/open over those, the turn last.
    window = p.merged(
        InitializationOptions(model="init-model", max_tokens=7), "initializationOptions"
    )
    session = window.merged(ProviderChoice(model="open-model"), "provider")
    turn = session.merged(ProviderChoice(temperature=0.9), "turn")
    assert (window.model, window.max_tokens, window.temperature) == ("init-model", 7, 0.1)
    assert (session.model, turn.model, turn.temperature, turn.max_tokens) == (
        "open-model",
        "open-model",
        0.9,
        7,
    )


def test_another_provider_in_the_environment_does_not_take_the_files_model(
    tmp_path: Path,
) -> None:
    env = env_with(
        tmp_path,
        'provider = "openai"\nmodel = "gpt-x"\nkeyVariable = "WORK_KEY"\n',
        TRELLISD_PROVIDER="anthropic",
        WORK_KEY="sk-work",
        ANTHROPIC_API_KEY="sk-ant",
    )
    p = load_settings(env).provider
    assert (p.name, p.effective_model, p.api_key, p.key_source) == (
        "anthropic",
        "claude-sonnet-4-5",
        "sk-ant",
        "ANTHROPIC_API_KEY",
    )


def test_the_key_comes_from_the_variable_the_file_names(tmp_path: Path) -> None:
    env = env_with(tmp_path, 'provider = "openai"\nkeyVariable = "WORK_KEY"\n', WORK_KEY="sk-work")
    settings = load_settings(env)
    assert (settings.provider.api_key, settings.provider.key_source) == ("sk-work", "WORK_KEY")
    shown = " ".join(" ".join(row) for row in settings.describe())
    assert "sk-work" not in shown and "WORK_KEY (named by config file" in shown


def test_a_key_in_the_file_is_taken_only_from_a_file_no_one_else_may_read(
    tmp_path: Path,
) -> None:
    text = 'provider = "openai"\n\napiKey = "sk-in-file"\n'
    with pytest.raises(ConfigError) as refused:
        load_settings(env_with(tmp_path, text, mode=0o644))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path}/config/trellisd/config.toml:3: apiKey is refused")
    assert "chmod 600" in message and "sk-in-file" not in message and "\n" not in message
    settings = load_settings(env_with(tmp_path, text, mode=0o600))
    assert settings.provider.api_key == "sk-in-file"


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        (
            '[[mcp]]\nname = "web"\nurl = "https://x"\n\n'
            '[mcp.headers]\nAuthorization = "Bearer t"\n',
            6,
            "mcp[0].headers.Authorization",
        ),
        (
            '[[mcp]]\nname = "gh"\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "ghp_x" }\n',
            4,
            "mcp[0].env.GITHUB_TOKEN",
        ),
    ],
)
def test_a_secret_for_an_mcp_server_is_taken_only_from_a_file_no_one_else_may_read(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(env_with(tmp_path, text, mode=0o644))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path}/config/trellisd/config.toml:{line}: {key} is refused")
    assert "chmod 600" in message and "Bearer" not in message and "ghp_x" not in message
    [server] = load_settings(env_with(tmp_path, text, mode=0o600)).mcp_servers
    assert server.name in ("web", "gh")
    # A header or variable whose name says nothing of a secret is fine in any file.
    plain = text.replace("Authorization", "Accept").replace("GITHUB_TOKEN", "LOG_LEVEL")
    assert len(load_settings(env_with(tmp_path, plain, mode=0o644)).mcp_servers) == 1


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('provider = "openai"\nmodel = 3\n', 2, "model must be a string, not a number"),
        ('model = "x"\nmaxRetrys = 2\n', 2, "maxRetrys is not a config field"),
        ("provider = \n", 1, "not valid TOML"),
        ('provider = "bogus"\n', 1, "provider must be one of"),
        ("readTimeout = 0\n", 1, "readTimeout must be a positive number of seconds"),
        ('[[layers]]\nname = "a"\ndenyWrite = [1]\n', 3, "layers[0].denyWrite"),
        (
            '[[mcp]]\nname = "a"\ncommand = "x"\n\n[[mcp]]\nname = "b"\n\nurl = "ftp://x"\n',
            8,
            "mcp[1].url must be an http:// or https:// URL",
        ),
        ('[[mcp]]\nname = "a"\ncommand = "x"\nurl = "http://x"\n', 1, "needs either command"),
        ('[[mcp]]\nname = "a"\ncommand = "x"\ntimout = 5\n', 4, "mcp[0].timout is not a MCP"),
        (
            '[[mcp]]\nname = "a"\ncommand = "x"\n[[mcp]]\nname = "a"\nurl = "http://x"\n',
            5,
            "names another server",
        ),
        ('[prices."m"]\ninput = 1\noutput = "cheap"\n', 3, "prices.m.output must be a number"),
    ],
)
def test_a_mistake_is_one_line_naming_the_file_the_line_and_the_key(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(env_with(tmp_path, text))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path}/config/trellisd/config.toml:{line}: ")
    assert words in message


def test_an_environment_mistake_is_still_refused_with_a_good_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="TRELLISD_PROVIDER must be one of"):
        load_settings(env_with(tmp_path, 'model = "m"\n', TRELLISD_PROVIDER="bogus"))


def test_mcp_servers_are_a_typed_list_in_the_shape_of_session_open(tmp_path: Path) -> None:
    text = """
[[mcp]]
name = "files"
command = "npx"
args = ["-y", "server", "."]
env = { LOG = "1" }
cwd = "/tmp"
timeout = 30

[[mcp]]
name = "search"
url = "https://example.com/mcp"
headers = [{ name = "X-Team", value = "a" }]
"""
    settings = load_settings(env_with(tmp_path, text))
    assert settings.mcp_servers == (
        McpServerSpec(
            "files",
            command="npx",
            args=("-y", "server", "."),
            env={"LOG": "1"},
            cwd="/tmp",
            timeout=30.0,
        ),
        McpServerSpec("search", url="https://example.com/mcp", headers={"X-Team": "a"}),
    )


def test_the_default_policy_and_prices_come_from_the_file(tmp_path: Path) -> None:
    text = """
approval = "never"

[[layers]]
name = "mine"
allowRead = ["**"]

[prices."my-model"]
input = 0.5
output = 1.5
"""
    settings = load_settings(env_with(tmp_path, text))
    assert [layer.name for layer in settings.policy.layers] == ["mine"]
    assert settings.policy.effective_approval == "never"
    assert settings.prices == {"my-model": Price(0.5, 1.5, 0.5)}


def test_pass_env_comes_from_the_file_unless_the_environment_names_it(tmp_path: Path) -> None:
    settings = load_settings(env_with(tmp_path, 'passEnv = ["NPM_TOKEN"]\n'))
    assert settings.pass_env == ("NPM_TOKEN",)
    parent = {"NPM_TOKEN": "n", "GH_TOKEN": "g", "OPENAI_API_KEY": "k", "PATH": "/bin"}
    assert child_environment(parent, settings.pass_env) == {"NPM_TOKEN": "n", "PATH": "/bin"}
    over = load_settings(
        env_with(tmp_path, 'passEnv = ["NPM_TOKEN"]\n', TRELLISD_PASS_ENV="GH_TOKEN")
    )
    assert over.pass_env == ("GH_TOKEN",)
    assert {k: src for k, _, src in over.describe()}["passEnv"] == "environment TRELLISD_PASS_ENV"


def test_the_task_tool_is_turned_on_by_the_file_and_off_without_it(tmp_path: Path) -> None:
    settings = load_settings(env_with(tmp_path, "task = { enabled = true, maxConcurrent = 3 }\n"))
    task = settings.policy.effective_task
    assert (task.enabled, task.max_concurrent) == (True, 3)
    row = {key: (value, source) for key, value, source in settings.describe()}["task"]
    assert row == ("on, 3 at once", f"config file {tmp_path}/config/trellisd/config.toml")
    assert not load_settings(env_with(tmp_path, 'model = "m"\n')).policy.effective_task.enabled
    with pytest.raises(ConfigError, match="maxConcurrent must be an integer from 1 to 16"):
        load_settings(env_with(tmp_path, "task = { enabled = true, maxConcurrent = 99 }\n"))


def test_the_effort_comes_from_the_file_under_the_session_s_and_the_turn_s(
    tmp_path: Path,
) -> None:
    settings = load_settings(env_with(tmp_path, 'provider = "openai"\neffort = "medium"\n'))
    p = settings.provider
    assert p.effort == "medium" and p.describe()["effort"] == "medium"
    assert ("effort", "medium", f"config file {tmp_path}/config/trellisd/config.toml") in (
        settings.describe()
    )
    session = p.merged(ProviderChoice(effort="low"), "provider")
    assert session.effort == "low"
    assert session.merged(ProviderChoice(effort="high"), "turn").effort == "high"
    assert session.merged(ProviderChoice(model="other"), "turn").effort == "low"


def test_an_effort_of_no_known_level_is_a_mistake_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(env_with(tmp_path, 'effort = "max"\n'))
    assert str(refused.value).endswith("effort must be low, medium or high")
