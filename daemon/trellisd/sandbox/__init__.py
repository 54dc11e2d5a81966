"""The walls around every program the daemon starts for a session: ``run_command``, a
turn's check, an MCP stdio server.

``walls`` says what they are (the mode, the network, what may be written, what is hidden)
and how a project may only make them stricter; ``bwrap`` builds them with bubblewrap and
sweeps what a program left on a protected path; ``limits`` bounds the processes a program
may run; ``doctor`` says what works on this machine. ``network`` (a proxy that lets only
the listed ``host:port`` through), ``relay`` and ``landlock`` come with the network
allow-lists.
"""

from __future__ import annotations

from .bwrap import HOW_TO_TURN_OFF, Launch, WallsUnavailable, confine
from .walls import (
    DEFAULT_MODE,
    PROTECTED,
    SANDBOX_MODES,
    SECRET_PATHS,
    Network,
    SandboxMode,
    Walls,
    narrower_network,
    network_of,
    network_problem,
    network_wire,
    secret_paths,
    stricter_mode,
)

__all__ = [
    "DEFAULT_MODE",
    "HOW_TO_TURN_OFF",
    "PROTECTED",
    "SANDBOX_MODES",
    "SECRET_PATHS",
    "Launch",
    "Network",
    "SandboxMode",
    "Walls",
    "WallsUnavailable",
    "confine",
    "narrower_network",
    "network_of",
    "network_problem",
    "network_wire",
    "secret_paths",
    "stricter_mode",
]
