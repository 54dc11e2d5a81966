"""The environment of the programs the model runs (``run_command``, a turn's check).

A program the model starts runs with the daemon's environment less its secrets: the model
can print its environment (``env``), and what it prints is stored in the step and sent to
the model's service. Left out:

- every provider key the daemon knows (``TRELLISD_API_KEY``, ``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, ``OPENROUTER_API_KEY``), always;
- every variable whose name contains ``KEY``, ``SECRET``, ``TOKEN`` or ``PASSWORD`` (in any
  case: ``GITHUB_TOKEN``, ``aws_secret_access_key``), unless named in ``TRELLISD_PASS_ENV``.

``TRELLISD_PASS_ENV`` is a comma-separated list of variable names, in the daemon's own
environment, to let through all the same (``TRELLISD_PASS_ENV=NPM_TOKEN,PIP_INDEX_KEY``);
else the config file's ``passEnv`` list. It cannot let a provider key through. The daemon
sets the list for the requests of each window (``use_passed``); MCP servers get the same
environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar

from ..config import KEY_VARIABLES

PASS_VARIABLE = "TRELLISD_PASS_ENV"
PROVIDER_KEYS = frozenset({"TRELLISD_API_KEY", *KEY_VARIABLES.values()})
SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD")


_passed: ContextVar[tuple[str, ...] | None] = ContextVar("trellisd_passed", default=None)


def use_passed(names: tuple[str, ...]) -> None:
    """The programs started from the calling task on may see ``names`` (the effective
    ``passEnv``), in place of what ``TRELLISD_PASS_ENV`` says."""
    _passed.set(names)


def child_environment(
    parent: Mapping[str, str] | None = None, passed: tuple[str, ...] | None = None
) -> dict[str, str]:
    """``parent`` (the daemon's environment by default) without its secrets; ``passed``
    (else the list ``use_passed`` set, else ``TRELLISD_PASS_ENV``) let through."""
    parent = os.environ if parent is None else parent
    names = _passed.get() if passed is None else passed
    if names is None:
        names = tuple(name.strip() for name in parent.get(PASS_VARIABLE, "").split(","))
    passed_set = set(names)
    return {
        name: value
        for name, value in parent.items()
        if name not in PROVIDER_KEYS and (name in passed_set or not secret_name(name))
    }


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a secret (``KEY``, ``SECRET``, ``TOKEN``,
    ``PASSWORD``, in any case)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)
