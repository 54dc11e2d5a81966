"""What the tools of a session may do: a stack of named layers of glob rules (a deny in any
layer beats an allow), an approval mode (``all``, ``ask``, ``never``) and the grants the
user gave for the session.

``load_policy`` stacks the daemon's default, the project's ``.trellisd.toml`` and the
caller's ``session/open`` policy (see ``load`` for the precedence); ``Policy.check`` judges
an ``Action`` a tool declared (see ``layers`` for the order); ``globs`` says how patterns
match (one dialect with the ``search`` tool, in linear time).
"""

from __future__ import annotations

from ..tools.base import Action, ActionKind
from .layers import (
    PROTECTED_PATHS,
    Approval,
    GrantSpec,
    Layer,
    LayerSpec,
    Policy,
    PolicySpec,
    ProjectPolicy,
    Ruling,
    Verdict,
    protected_entry,
)
from .load import DEFAULT_POLICY, PROJECT_FILE, load_policy, read_project_policy

__all__ = [
    "DEFAULT_POLICY",
    "PROJECT_FILE",
    "PROTECTED_PATHS",
    "Action",
    "ActionKind",
    "Approval",
    "GrantSpec",
    "Layer",
    "LayerSpec",
    "Policy",
    "PolicySpec",
    "ProjectPolicy",
    "Ruling",
    "Verdict",
    "load_policy",
    "protected_entry",
    "read_project_policy",
]
