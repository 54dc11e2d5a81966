"""What the walls around a program are: the mode, the network, and the paths it may write,
may not write and may not even read.

Three modes, from the loosest to the strictest:

- ``off``: the program runs with all of the rights of the user running the daemon;
- ``workspace-write`` (the default): it may write the session's root, a private temporary
  folder (``/tmp`` inside, a memory file system of at most ``temp_bytes``) and the caches
  the user named in the config file (``writable``); everything else is read-only. Inside
  the root the protected paths (``PROTECTED``) stay read-only;
- ``read-only``: it may write its private temporary folder only.

In both confined modes the secrets (``SECRET_PATHS`` under the home folder, the daemon's
store and config folders, and what the user adds: ``hidden``) are not even readable, and
the host's ``/tmp`` and ``/run`` (where sockets of other programs live) are out of sight.

The network is ``False`` (the programs of a session share a loopback of their own,
``netns.Loopback``, so a dev server one started is reached by the next, and a test suite's
local server works; nothing else), ``True`` (the host's network), or a tuple of
``"host:port"`` it may reach through a proxy (``trellisd.sandbox.network``).

A project's ``.trellisd.toml`` may only make the walls stricter (``stricter_mode``,
``narrower_network``); the user (the config file, ``initializationOptions``,
``session/open``) decides freely.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol


class SharedLoopback(Protocol):
    """A session's private loopback, as the walls use it (``netns.Loopback`` is the one)."""

    problem: str | None
    """Why the session's programs do not share a loopback here (each has its own)."""

    async def enter(self, bwrap: str) -> list[str] | None:
        """The argv prefix that starts bubblewrap inside the session's network, or None."""


SandboxMode = Literal["workspace-write", "read-only", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("off", "workspace-write", "read-only")
"""From the loosest to the strictest."""
DEFAULT_MODE: SandboxMode = "workspace-write"

Network = bool | tuple[str, ...]
HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):[0-9]{1,5}$")

SECRET_PATHS: tuple[str, ...] = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".pypirc",
    ".npmrc",
    ".password-store",
)
"""Folders and files under the home folder that hold credentials: hidden in both confined
modes."""

EDITOR_FILES: tuple[str, ...] = (
    ".gitmodules",
    ".vscode",
    ".idea",
    ".zed",
    ".helix",
    ".nvim.lua",
    ".nvimrc",
    ".exrc",
)
"""Files and folders of the root whose content git or an editor runs commands from."""

PROTECTED: tuple[str, ...] = (
    ".git/hooks",
    ".git/config",
    ".trellisd.toml",
    ".envrc",
    *EDITOR_FILES,
)
"""Root-relative paths that stay read-only under ``workspace-write``: what they hold makes
git, an editor, a shell or the daemon run commands or loosen the policy. The rest of
``.git`` (objects, refs, the index, logs, ``HEAD``) stays writable, so that ``git commit``,
``git stash`` and ``git checkout`` work inside the walls."""

DEFAULT_TEMP_BYTES = 256 * 1024 * 1024
DEFAULT_PROCESSES = 1024


def mode_strictness(mode: SandboxMode) -> int:
    return SANDBOX_MODES.index(mode)


def stricter_mode(base: SandboxMode, project: SandboxMode | None) -> SandboxMode:
    """``project``'s mode if it is at least as strict as ``base``; else ``base``."""
    if project is None or mode_strictness(project) < mode_strictness(base):
        return base
    return project


def narrower_network(base: Network, project: Network | None) -> Network:
    """What a project's ``network`` leaves of ``base``: it may turn it off, or narrow it to
    a list (of what ``base`` allows), never open it."""
    if project is None or project is True:
        return base
    if project is False or base is False:
        return False
    if base is True:
        return tuple(project)
    return tuple(p for p in project if p in base)


def network_problem(value: Any) -> str | None:
    """Why ``value`` is not a network setting, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, str) and HOST_PORT.match(v) and 0 < int(v.rsplit(":", 1)[1]) < 65536
        for v in value
    ):
        return None
    return "must be true, false or a list of 'host:port' strings"


def network_of(value: Any) -> Network:
    return value if isinstance(value, bool) else tuple(value)


def network_wire(network: Network) -> bool | list[str]:
    return network if isinstance(network, bool) else list(network)


@dataclass(frozen=True)
class Walls:
    """The walls of the programs a session starts. ``writable``: the caches the user named
    (only under ``workspace-write``); ``hidden``: every path no program may read."""

    mode: SandboxMode
    network: Network
    root: Path
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    temp_bytes: int = DEFAULT_TEMP_BYTES
    processes: int = DEFAULT_PROCESSES
    unconfined_servers: frozenset[str] = field(default_factory=frozenset)
    """The names of the user's own MCP servers that run outside the walls."""
    quarantine: Path | None = None
    """Where a protected path a program created is moved (a folder of the daemon's, hidden
    from programs); None: it is removed."""
    loopback: SharedLoopback | None = field(default=None, compare=False, repr=False)
    """The session's private loopback, which its walled programs share when the network is
    not ``True``; None: each program gets a loopback of its own."""

    @property
    def confined(self) -> bool:
        return self.mode != "off"

    def record(self) -> dict[str, Any]:
        """What a step's record and ``run/events`` say of the walls."""
        return {"mode": self.mode, "network": network_wire(self.network)}

    def to_wire(self) -> dict[str, Any]:
        """What ``session/policy`` shows of the walls: where programs may write, what they
        may not read, what stays read-only in the root."""
        writes = self.mode == "workspace-write"
        writable = [str(self.root), *map(str, self.writable)] if writes else []
        return {
            **self.record(),
            "writable": [*writable, "/tmp"] if self.confined else [],
            "hidden": [str(p) for p in self.hidden] if self.confined else [],
            "protected": list(PROTECTED) if writes else [],
            "tempBytes": self.temp_bytes,
            "processes": self.processes,
        }

    def unconfined(self) -> Walls:
        """These walls turned off (an approved escalation)."""
        return Walls("off", True, self.root)


def secret_paths(home: Path, extra: Sequence[str | Path] = ()) -> tuple[Path, ...]:
    """The secrets under ``home`` and ``extra`` (``~`` expanded against ``home``)."""
    found = [home / name for name in SECRET_PATHS]
    for item in extra:
        text = str(item)
        found.append(home / text[2:] if text.startswith("~/") else Path(text))
    return tuple(found)


def hidden_around(secret: Path, shown: Sequence[Path]) -> list[Path]:
    """What to hide so that ``secret`` is hidden but what is ``shown`` (the root, a cache)
    is not: ``secret`` itself, or, when it holds something shown (a store folder with the
    root in it), its entries but for the way to what is shown, in turn. Links are passed
    over (what they lead to has rules of its own). Real paths in, real paths out."""

    def within(path: Path, folder: Path) -> bool:
        return path == folder or folder in path.parents

    if not any(within(place, secret) for place in shown):
        return [secret]
    if any(secret == place for place in shown) or not secret.is_dir():
        return []
    try:
        entries = sorted(secret.iterdir())
    except OSError:
        return []
    found: list[Path] = []
    for entry in entries:
        if not entry.is_symlink():
            found += hidden_around(entry, shown)
    return found
