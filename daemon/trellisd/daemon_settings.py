"""The daemon process's own settings: read once from its environment at start-up (``cli``),
carried in ``Settings.daemon`` and handed down to the parts that use them (the store's
heartbeat, the turn loop's step limit, approvals, MCP calls, the ACP model picker, git
snapshots, prices). Nothing below the command line reads the environment itself.

In the shared daemon these are the daemon's, whichever window asks: a window's environment
chooses its provider, policy, MCP servers and the environment of its programs
(``config_file.load_settings``), not how the daemon runs.

    TRELLISD_MAX_STEPS         the step limit of a turn that names none (default 100)
    TRELLISD_APPROVAL_TIMEOUT  seconds an approval waits for an answer (default 300)
    TRELLISD_HEARTBEAT         seconds between the daemon's heartbeats in the store (default 2)
    TRELLISD_WINDOW_QUEUE      bytes the shared daemon holds for a window that does not read
                               (default 32 MiB)
    TRELLISD_MCP_TIMEOUT       seconds an MCP tool call may take unless its server sets its
                               own ``timeout`` (default 60)
    TRELLISD_MODELS            for ``trellisd acp``: more models for the client's model picker
    TRELLISD_CONTEXT_WINDOW    for ``trellisd acp``: the size usage is shown against
                               (default 128000)
    TRELLISD_PRICES            the price file (default $XDG_CONFIG_HOME/trellisd/prices.json)
    XDG_CONFIG_HOME, HOME      the user's config folder (where the logs are anchored)
    PATH                       where ``git`` and an MCP server's program are looked for
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

log = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 100
DEFAULT_APPROVAL_TIMEOUT = 300.0
DEFAULT_HEARTBEAT = 2.0
DEFAULT_WINDOW_QUEUE = 32 * 1024 * 1024
DEFAULT_MCP_TIMEOUT = 60.0
DEFAULT_ACP_CONTEXT_WINDOW = 128_000
CONFIG_FILE = "config.toml"
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class DaemonSettings:
    """How the daemon process runs. The defaults (a daemon built in code, as in tests) are
    each variable's, and no folder of the user's: no log anchors, no price file, the
    system's default ``PATH`` and an empty environment for git."""

    max_steps: int = DEFAULT_MAX_STEPS
    approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT
    heartbeat: float = DEFAULT_HEARTBEAT
    window_queue: int = DEFAULT_WINDOW_QUEUE
    mcp_timeout: float = DEFAULT_MCP_TIMEOUT
    acp_models: tuple[str, ...] = ()
    acp_context_window: int = DEFAULT_ACP_CONTEXT_WINDOW
    config_folder: Path | None = None
    """The user's trellisd folder (``$XDG_CONFIG_HOME/trellisd``), where logs are anchored."""
    prices_file: Path | None = None
    search_path: str = os.defpath
    """``PATH``: where ``git`` and an MCP server's program are looked for."""
    git_environment: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False
    )
    """The environment git runs in: the daemon's, less every ``GIT_*`` variable."""

    @property
    def commands_folder(self) -> Path | None:
        """The user's custom commands (``<name>.md``), beside the config file; None: none."""
        return None if self.config_folder is None else self.config_folder / "commands"

    @property
    def stale_seconds(self) -> float:
        """How long a daemon whose process cannot be seen goes without a heartbeat before
        it is taken for gone: 15 s at the default."""
        return 7.5 * self.heartbeat


def read_daemon_settings(env: Mapping[str, str]) -> DaemonSettings:
    """The settings of ``env`` (the process's environment, at start-up). A value that cannot
    be used is logged and its default taken, but for ``TRELLISD_APPROVAL_TIMEOUT`` and
    ``TRELLISD_WINDOW_QUEUE``: a ``ValueError`` naming the variable, which stops the command."""
    return DaemonSettings(
        max_steps=max_steps(env),
        approval_timeout=approval_timeout(env),
        heartbeat=heartbeat_seconds(env),
        window_queue=window_queue(env),
        mcp_timeout=mcp_timeout(env),
        acp_models=tuple(m.strip() for m in env.get("TRELLISD_MODELS", "").split(",") if m.strip()),
        acp_context_window=acp_context_window(env),
        config_folder=config_path(env).parent,
        prices_file=prices_path(env),
        search_path=env.get("PATH", os.defpath),
        git_environment=MappingProxyType(
            {k: v for k, v in env.items() if not k.startswith("GIT_")}
        ),
    )


def config_path(env: Mapping[str, str]) -> Path:
    """Where the user's config file is looked for."""
    return _user_folder(env) / CONFIG_FILE


def prices_path(env: Mapping[str, str]) -> Path:
    """Where the user's price file is looked for."""
    if env.get("TRELLISD_PRICES"):
        return Path(env["TRELLISD_PRICES"]).expanduser()
    return _user_folder(env) / "prices.json"


def _user_folder(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".config"
    )
    return Path(base) / "trellisd"


def max_steps(env: Mapping[str, str]) -> int:
    """``TRELLISD_MAX_STEPS``, the step limit of a turn that names none; 100 when it is unset
    or not a whole number of at least 1 (which is logged)."""
    raw = env.get("TRELLISD_MAX_STEPS", "").strip()
    if not raw:
        return DEFAULT_MAX_STEPS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        log.warning(
            "TRELLISD_MAX_STEPS must be a whole number of at least 1, not %r; using %d",
            raw,
            DEFAULT_MAX_STEPS,
        )
        return DEFAULT_MAX_STEPS
    return value


def approval_timeout(env: Mapping[str, str]) -> float:
    """``TRELLISD_APPROVAL_TIMEOUT``: seconds an approval waits; 300 when unset."""
    return _number(env, "TRELLISD_APPROVAL_TIMEOUT", float, DEFAULT_APPROVAL_TIMEOUT)


def window_queue(env: Mapping[str, str]) -> int:
    """``TRELLISD_WINDOW_QUEUE``: bytes held for a window that does not read; 32 MiB."""
    return _number(env, "TRELLISD_WINDOW_QUEUE", int, DEFAULT_WINDOW_QUEUE)


def _number(env: Mapping[str, str], name: str, kind: type[N], default: N) -> N:
    raw = env.get(name) or ""
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {raw!r}") from None


def heartbeat_seconds(env: Mapping[str, str]) -> float:
    """Seconds between heartbeats: ``TRELLISD_HEARTBEAT``, else 2."""
    try:
        seconds = float(env.get("TRELLISD_HEARTBEAT", str(DEFAULT_HEARTBEAT)))
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < 3600:
        log.warning("TRELLISD_HEARTBEAT must be a number of seconds; using 2")
        seconds = DEFAULT_HEARTBEAT
    return seconds


def mcp_timeout(env: Mapping[str, str]) -> float:
    """``TRELLISD_MCP_TIMEOUT``: seconds a call may take unless its server sets its own
    ``timeout``; 60 when unset or not a positive number."""
    raw = env.get("TRELLISD_MCP_TIMEOUT", "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_MCP_TIMEOUT
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        log.warning("TRELLISD_MCP_TIMEOUT must be seconds from 0 to 3600, not %r", raw)
        return DEFAULT_MCP_TIMEOUT
    return seconds


def acp_context_window(env: Mapping[str, str]) -> int:
    """``TRELLISD_CONTEXT_WINDOW`` as ``trellisd acp`` shows usage against it; 128000 when
    unset or not a positive whole number."""
    value = env.get("TRELLISD_CONTEXT_WINDOW", "")
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_ACP_CONTEXT_WINDOW


__all__ = ["DaemonSettings", "config_path", "prices_path", "read_daemon_settings"]
