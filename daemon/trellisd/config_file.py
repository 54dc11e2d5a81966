"""The user's config file and the effective settings laid over it.

``$XDG_CONFIG_HOME/trellisd/config.toml`` (else ``~/.config/trellisd/config.toml``) holds the
user's own defaults, with the same camelCase keys as the wire::

    provider = "openai"               # openai | anthropic | openrouter | scripted
                                      # | openai-responses (OpenAI's Responses API)
    model = "gpt-4o"
    baseUrl = "https://api.openai.com/v1"
    keyVariable = "WORK_OPENAI_KEY"   # the variable holding the key
    # apiKey = "sk-..."               # only in a file no one else may read (chmod 600)
    temperature = 0.2
    maxTokens = 4096
    maxRetries = 3
    retryBudget = 60
    readTimeout = 120
    effort = "medium"                 # how hard a reasoning model thinks: low | medium | high
    approval = "ask"                  # the default approval: all | auto | ask | never
    passEnv = ["NPM_TOKEN"]           # secret-looking variables commands may see
    sandbox = "workspace-write"       # the walls: workspace-write | read-only | off
    network = false                   # false | true | ["pypi.org:443", ...]
    writable = ["~/.cache/pip"]       # caches programs may write besides the root
    hidden = ["~/work/secrets"]       # more that programs may not even read
    unconfinedMcp = ["files"]         # your own MCP servers that run without walls
    task = { enabled = true, maxConcurrent = 2 }  # the task tool: child sessions

    [[layers]]                        # the default policy layers (replace the built-in one)
    name = "mine"
    allowRead = ["**"]
    allowWrite = ["src/**"]
    allowExec = ["pytest*"]

    [prices."my-model"]               # USD per million tokens
    input = 0.5
    output = 1.5

    [[mcp]]                           # an MCP server over stdio ...
    name = "files"
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = { LOG = "1" }

    [[mcp]]                           # ... or over streamable HTTP
    name = "search"
    url = "https://example.com/mcp"

    [[hooks]]                         # a program run at an event (protocol/hooks.md)
    event = "preToolUse"              # sessionStart | sessionEnd | userPromptSubmit | preToolUse
                                      # | permissionRequest | postToolUse | preCompact
                                      # | postCompact | stop | turnEnd
    matcher = "write_*"               # tool events: a tool name or an fnmatch glob of names
    command = ["python3", "/home/me/hooks/guard.py"]
    timeout = 10                      # seconds (default 30, at most 600)

Every setting comes from the first of these that sets it, most specific first: ``session/turn``,
``session/open``, ``initializationOptions``, the environment, this file, the built-in default.
``Settings`` is the part the daemon decides before any editor speaks (file and environment),
with where each value came from (``trellisd config`` prints it). A file with a mistake is a
``ConfigError``: one line naming the file, the line and the key; the daemon does not start.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import attrs

from .config import (
    _LIMIT_WORDS,
    _LIMITS,
    DEFAULT_BASE_URLS,
    KEY_VARIABLES,
    PROVIDERS,
    ProviderSettings,
    provider_from_env,
)
from .convert import Invalid, camel, structure
from .daemon_settings import DaemonSettings, config_path
from .errors import InvalidParams
from .hooks.spec import HookSpec
from .mcp.spec import McpServerSpec
from .policy.layers import (
    Approval,
    LayerSpec,
    Policy,
    PolicySpec,
    TaskSpec,
    _approval,
    _layers,
    _network,
    _sandbox,
    _task,
)
from .policy.load import DEFAULT_POLICY
from .pricing import Price
from .records import Effort, effort_field
from .sandbox.walls import SandboxMode, network_of, network_wire, secret_paths
from .tools.environment import child_environment, secret_name

MAX_CONFIG_BYTES = 1024 * 1024
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Headers that carry credentials whatever their value (beside names with KEY, TOKEN ...)."""
PASS_VARIABLE = "TRELLISD_PASS_ENV"


class ConfigError(ValueError):
    """A config file that cannot be used: one line naming the file, the line and the key."""


# -- the file's shape ---------------------------------------------------------------------


def _closed_servers(raw: Any) -> None:
    """An ``[[mcp]]`` table with a key an MCP server does not have is refused (a typo must
    not pass), as every other key of the file; ``.trellisd.toml`` and ``session/open`` ignore
    keys they do not know."""
    if not isinstance(raw, list):
        return
    known = sorted(camel(a.name) for a in attrs.fields(McpServerSpec))
    for index, entry in enumerate(raw):
        for key in sorted(entry) if isinstance(entry, dict) else ():
            if key not in known:
                where = f"mcp[{index}].{key}"
                raise InvalidParams(
                    f"{where} is not a MCP server field (expected {', '.join(known)})",
                    field=where,
                )


def mcp_servers(specs: tuple[McpServerSpec, ...], where: str) -> tuple[McpServerSpec, ...]:
    """The servers, their names unique; ``InvalidParams`` naming the one at fault."""
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        if spec.name in seen:
            field_name = f"{where}[{index}].name"
            raise InvalidParams(
                f"{field_name} {spec.name!r} names another server too", field=field_name
            )
        seen.add(spec.name)
    return specs


@attrs.frozen
class PriceSpec:
    closed: ClassVar[str] = "price"

    input: float = attrs.field(metadata={"must": "be a number of USD per million tokens"})
    output: float = attrs.field(metadata={"must": "be a number of USD per million tokens"})
    cached: float | None = attrs.field(
        default=None, metadata={"must": "be a number of USD per million tokens"}
    )

    def __attrs_post_init__(self) -> None:
        for name in ("input", "output", "cached"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise Invalid("must be zero or more", name)


def _limit(attr: str) -> Any:
    least = _LIMITS[attr]

    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and value < least:
            raise Invalid.of(attribute, f"must be {_LIMIT_WORDS[least]}")

    return attrs.field(default=None, validator=check)


def _provider_name(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and value not in PROVIDERS:
        raise Invalid.of(attribute, f"must be one of {', '.join(PROVIDERS)}")


@attrs.frozen
class ConfigFile:
    """The keys of ``config.toml``; unknown keys are refused (a typo must not pass)."""

    closed: ClassVar[str] = "config"

    provider: str | None = attrs.field(default=None, validator=_provider_name)
    model: str | None = None
    base_url: str | None = None
    key_variable: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    script: str | None = None
    temperature: float | None = _limit("temperature")
    max_tokens: int | None = _limit("max_tokens")
    max_retries: int | None = _limit("max_retries")
    retry_budget: float | None = _limit("retry_budget")
    read_timeout: float | None = _limit("read_timeout")
    effort: Effort | None = effort_field()
    approval: Approval | None = _approval()
    layers: tuple[LayerSpec, ...] = _layers()
    sandbox: SandboxMode | None = _sandbox()
    network: Any = _network()
    writable: tuple[str, ...] = attrs.field(default=(), metadata={"must": "be a list of paths"})
    hidden: tuple[str, ...] = attrs.field(default=(), metadata={"must": "be a list of paths"})
    unconfined_mcp: tuple[str, ...] = attrs.field(
        default=(), metadata={"must": "be a list of MCP server names"}
    )
    task: TaskSpec | None = _task()
    pass_env: tuple[str, ...] = attrs.field(default=(), metadata={"must": "be a list of names"})
    prices: dict[str, Any] = attrs.field(factory=dict)
    mcp: tuple[McpServerSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of [[mcp]] tables"}
    )
    hooks: tuple[HookSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of [[hooks]] tables"}
    )


# -- reading it ---------------------------------------------------------------------------


def read_config(path: Path) -> tuple[ConfigFile, str] | None:
    """The file at ``path`` and its text; None when there is none. ``ConfigError`` for a
    file that cannot be used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: is not a regular file")
        raw = f.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KiB; not read")
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: line 1: not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_toml_error(path, exc)) from None
    except RecursionError:
        raise ConfigError(f"{path}: nests tables and arrays too deep to be read") from None
    try:
        _closed_servers(data.get("mcp"))
        parsed = structure(data, ConfigFile, "")
        for name, entry in parsed.prices.items():
            structure(entry, PriceSpec, f"prices.{name}")
        mcp_servers(parsed.mcp, "mcp")
    except InvalidParams as exc:
        key = str(exc.data.get("field", ""))
        raise ConfigError(f"{path}:{_line_of(text, key)}: {exc.message}") from None
    if parsed.api_key is not None and info.st_mode & 0o077:
        raise ConfigError(
            f"{path}:{_line_of(text, 'apiKey')}: apiKey is refused: others may read this file"
            f" (mode {stat.S_IMODE(info.st_mode):o}); run chmod 600 {path}, or name the variable"
            " that holds the key with keyVariable"
        )
    if info.st_mode & 0o077:
        for key in _secrets_written(parsed.mcp):
            raise ConfigError(
                f"{path}:{_line_of(text, key)}: {key} is refused: its name says it holds a"
                f" secret and others may read this file (mode {stat.S_IMODE(info.st_mode):o});"
                f" run chmod 600 {path}"
            )
    return parsed, text


def _secrets_written(servers: tuple[McpServerSpec, ...]) -> list[str]:
    """The keys of MCP servers' ``headers`` and ``env`` whose names say they hold a secret
    (an ``Authorization`` header, a ``*TOKEN*`` variable ...), as dotted keys."""
    found = []
    for index, spec in enumerate(servers):
        for part, pairs in (("headers", spec.headers), ("env", spec.env)):
            for name in pairs or {}:
                if secret_name(name) or name.lower() in SECRET_HEADERS:
                    found.append(f"mcp[{index}].{part}.{name}")
    return found


def _toml_error(path: Path, exc: tomllib.TOMLDecodeError) -> str:
    """tomllib says ``... (at line 3, column 7)``: the line goes first, as in every error."""
    message = str(exc)
    found = re.search(r"\(at line (\d+), column \d+\)$", message)
    if found is None:
        return f"{path}: not valid TOML: {message}"
    return f"{path}:{found.group(1)}: not valid TOML: {message[: found.start()].strip()}"


def _line_of(text: str, key: str) -> int:
    """The line (1-based) where the dotted ``key`` (``mcp[1].command``, ``prices.x.input``,
    ``layers[0].denyWrite[2]``) is written, as near as the file shows it; 1 when not found."""
    parts = [p for p in re.split(r"\.|\[(\d+)\]", key) if p]
    lines = text.splitlines()
    start, table = 0, ""
    best = 1
    i = 0
    while i < len(parts):
        part = parts[i]
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        name = f"{table}.{part}" if table else part
        if nxt is not None and nxt.isdigit():
            # the nth [[name]] header
            headers = [
                n
                for n, line in enumerate(lines)
                if re.match(rf"\s*\[\[\s*{re.escape(name)}\s*\]\]", line)
            ]
            if int(nxt) < len(headers):
                start, table, best = headers[int(nxt)], "", headers[int(nxt)] + 1
                i += 2
                continue
        header = next(
            (
                n
                for n, line in enumerate(lines)
                if re.match(rf"\s*\[\s*{_key_pattern(name)}\s*\]", line)
            ),
            None,
        )
        if header is not None:
            start, table, best = header, "", header + 1
            i += 1
            continue
        assignment = next(
            (
                n
                for n in range(start, len(lines))
                if re.match(rf"\s*{_key_pattern(part)}\s*=", lines[n])
                and (n == start or not lines[n].lstrip().startswith("["))
            ),
            None,
        )
        if assignment is not None:
            return assignment + 1
        table = name
        i += 1
    return best


def _key_pattern(dotted: str) -> str:
    return r"\s*\.\s*".join(rf"(?:{re.escape(p)}|\"{re.escape(p)}\")" for p in dotted.split("."))


# -- the effective settings ---------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The daemon's settings before any editor speaks: the built-in defaults, the config
    file over them, the environment over that. ``sources`` says, for each key of
    ``describe``, where its value came from."""

    provider: ProviderSettings
    policy: Policy = DEFAULT_POLICY
    pass_env: tuple[str, ...] = ()
    prices: Mapping[str, Price] = field(default_factory=dict)
    mcp_servers: tuple[McpServerSpec, ...] = ()
    hooks: tuple[HookSpec, ...] = ()  # the config file's [[hooks]]
    file: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    # The environment these settings were read from, less its secrets: the one the model's
    # programs and MCP servers start in (``tools.environment``); None: an empty one.
    environment: Mapping[str, str] | None = field(default=None, repr=False)
    # How the daemon process runs, from its own environment (``cli``); in the shared daemon,
    # a window's settings carry the daemon's.
    daemon: DaemonSettings = field(default_factory=DaemonSettings)

    def describe(self) -> list[tuple[str, str, str]]:
        """``(key, value, source)`` for every setting, keys redacted."""
        p = self.provider
        src = self.sources
        rows: list[tuple[str, Any]] = [
            ("provider", p.name),
            ("model", p.effective_model),
            ("baseUrl", p.effective_base_url),
            ("apiKey", "(set, not shown)" if p.api_key else None),
            ("temperature", p.temperature),
            ("maxTokens", p.max_tokens),
            ("maxRetries", p.max_retries),
            ("retryBudget", p.retry_budget),
            ("readTimeout", p.read_timeout),
            ("effort", p.effort),
            ("approval", self.policy.effective_approval),
            ("layers", ", ".join(layer.name for layer in self.policy.layers) or "(none)"),
            ("sandbox", self.policy.effective_sandbox),
            ("network", json.dumps(network_wire(self.policy.effective_network))),
            ("writable", ", ".join(map(str, self.policy.writable)) or "(none)"),
            ("hidden", ", ".join(map(str, self.policy.hidden)) or "(none)"),
            ("unconfinedMcp", ", ".join(self.policy.unconfined_servers) or "(none)"),
            ("task", _task_row(self.policy)),
            ("passEnv", ", ".join(self.pass_env) or "(none)"),
            ("prices", ", ".join(sorted(self.prices)) or "(built-in only)"),
            ("mcp", ", ".join(s.name for s in self.mcp_servers) or "(none)"),
            ("hooks", ", ".join(h.event for h in self.hooks) or "(none)"),
        ]
        return [
            (key, "(none)" if value is None else str(value), src.get(key, "built-in default"))
            for key, value in rows
        ]


def load_settings(env: Mapping[str, str]) -> Settings:
    """The settings of ``env`` and the config file it points at. ``ConfigError`` (a
    ``ValueError``) for a file or a variable that cannot be used."""
    path = config_path(env)
    read = read_config(path)
    parsed = read[0] if read is not None else ConfigFile()
    where = f"config file {path}"
    sources: dict[str, str] = {}
    changes: dict[str, Any] = {}
    for attr in (
        "provider",
        "model",
        "base_url",
        "script",
        "temperature",
        "max_tokens",
        "max_retries",
        "retry_budget",
        "read_timeout",
        "effort",
    ):
        value = getattr(parsed, attr)
        if value is not None:
            changes["name" if attr == "provider" else attr] = value
            sources[camel(attr)] = where
    if parsed.key_variable and env.get(parsed.key_variable):
        changes["api_key"] = env[parsed.key_variable]
        changes["key_source"] = parsed.key_variable
        sources["apiKey"] = f"{parsed.key_variable} (named by {where})"
    elif parsed.api_key:
        changes["api_key"] = parsed.api_key
        changes["key_source"] = f"{path} apiKey"
        sources["apiKey"] = where
    base = dataclasses.replace(ProviderSettings(), **changes)
    provider = provider_from_env(env, base)
    _env_sources(env, base, provider, sources)
    policy = DEFAULT_POLICY
    if parsed.layers:
        policy = Policy.of(PolicySpec(layers=parsed.layers, approval=parsed.approval))
        sources["layers"] = where
    if parsed.approval is not None:
        policy = dataclasses.replace(policy, approval=parsed.approval)
        sources["approval"] = where
    policy = _walls(policy, parsed, env, path, where, sources)
    if parsed.task is not None:  # the default policy's task tool: off unless it says so
        policy = dataclasses.replace(policy, task=parsed.task.policy())
        sources["task"] = where
    pass_env: tuple[str, ...] = parsed.pass_env
    if parsed.pass_env:
        sources["passEnv"] = where
    if env.get(PASS_VARIABLE, "").strip():
        pass_env = tuple(n.strip() for n in env[PASS_VARIABLE].split(",") if n.strip())
        sources["passEnv"] = f"environment {PASS_VARIABLE}"
    prices = {
        name: Price.of(spec.input, spec.output, spec.cached)
        for name, entry in parsed.prices.items()
        for spec in (structure(entry, PriceSpec, f"prices.{name}"),)
    }
    if prices:
        sources["prices"] = where
    if parsed.mcp:
        sources["mcp"] = where
    if parsed.hooks:
        sources["hooks"] = where
    return Settings(
        provider=provider,
        policy=policy,
        pass_env=pass_env,
        prices=prices,
        mcp_servers=mcp_servers(parsed.mcp, "mcp"),
        hooks=parsed.hooks,
        file=str(path) if read is not None else None,
        sources=sources,
        environment=child_environment(env, pass_env),
    )


def _walls(
    policy: Policy,
    parsed: ConfigFile,
    env: Mapping[str, str],
    path: Path,
    where: str,
    sources: dict[str, str],
) -> Policy:
    """``policy`` with the config file's walls: its mode and network, the caches programs
    may write, and what they may not read (the secrets under the home folder, the config
    folder and the user's ``hidden``)."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    for key in ("sandbox", "network", "writable", "hidden", "unconfined_mcp"):
        if getattr(parsed, key) not in (None, ()):
            sources[camel(key)] = where
    return dataclasses.replace(
        policy,
        sandbox=parsed.sandbox,
        network=None if parsed.network is None else network_of(parsed.network),
        writable=tuple(_expanded(home, p) for p in parsed.writable),
        hidden=(*secret_paths(home, parsed.hidden), path.parent),
        unconfined_servers=parsed.unconfined_mcp,
    )


def _task_row(policy: Policy) -> str:
    task = policy.effective_task
    return f"on, {task.max_concurrent} at once" if task.enabled else "off"


def _expanded(home: Path, given: str) -> Path:
    return home / given[2:] if given.startswith("~/") else Path(given)


_ENV_OF = {
    "provider": "TRELLISD_PROVIDER",
    "model": "TRELLISD_MODEL",
    "baseUrl": "TRELLISD_BASE_URL",
    "script": "TRELLISD_SCRIPT",
    "temperature": "TRELLISD_TEMPERATURE",
    "maxTokens": "TRELLISD_MAX_TOKENS",
    "maxRetries": "TRELLISD_MAX_RETRIES",
    "retryBudget": "TRELLISD_RETRY_BUDGET",
    "readTimeout": "TRELLISD_READ_TIMEOUT",
}


def _env_sources(
    env: Mapping[str, str],
    base: ProviderSettings,
    provider: ProviderSettings,
    sources: dict[str, str],
) -> None:
    """Where the environment decided a provider setting over the file."""
    for key, var in _ENV_OF.items():
        if env.get(var):
            sources[key] = f"environment {var}"
    if provider.name != base.name:
        if not env.get("TRELLISD_PROVIDER"):  # picked by the key the environment holds
            sources["provider"] = f"environment {provider.key_source or 'TRELLISD_SCRIPT'}"
        for key in ("model", "baseUrl"):
            if not env.get(_ENV_OF[key]):
                sources.pop(key, None)
        if (
            provider.name == "openrouter"
            and env.get("OPENROUTER_MODEL")
            and not env.get("TRELLISD_MODEL")
        ):
            sources["model"] = "environment OPENROUTER_MODEL"
    if provider.key_source and provider.key_source != base.key_source:
        sources["apiKey"] = f"environment {provider.key_source}"
    elif not provider.api_key:
        sources.pop("apiKey", None)
    if provider.base_url is None and provider.name in DEFAULT_BASE_URLS:
        sources.pop("baseUrl", None)


__all__ = [
    "KEY_VARIABLES",
    "ConfigError",
    "ConfigFile",
    "Settings",
    "config_path",
    "load_settings",
    "mcp_servers",
    "read_config",
]
