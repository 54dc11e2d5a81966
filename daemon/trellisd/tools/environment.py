"""The environment of the programs the model runs (``run_command``, a turn's check) and of
the MCP servers a session starts.

A program the model starts runs with its window's environment (the one the editor started
``trellisd`` in; the shared daemon is handed it with the window's hello) less its secrets:
the model can print its environment (``env``), and what it prints is stored in the step and
sent to the model's service. Left out:

- every provider key the daemon knows (``TRELLISD_API_KEY``, ``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, ``OPENROUTER_API_KEY``), always;
- every variable whose name says it holds a secret (``secrecy.secret_name``): it contains ``KEY``,
  ``SECRET``, ``TOKEN``, ``PASSWORD``, ``PASSWD``, ``CREDENTIAL`` or ``COOKIE``, or one of
  its ``_``-separated words is ``PASS``, ``PWD``, ``PAT``, ``DSN`` or ``AUTH``, in any case
  (``GITHUB_TOKEN``, ``aws_secret_access_key``, ``GH_PAT``, ``DB_PASS``, ``SENTRY_DSN``,
  ``NPM_CONFIG__AUTH``, ``SSH_AUTH_SOCK``);
- every variable whose value holds a URL with a user or a password in it
  (``DATABASE_URL=postgres://app:pw@db/app``, ``http_proxy=http://u:p@proxy:3128``);

unless named in ``TRELLISD_PASS_ENV``, a comma-separated list of variable names in the
window's environment (``TRELLISD_PASS_ENV=NPM_TOKEN,PIP_INDEX_KEY``), else the config file's
``passEnv`` list. It cannot let a provider key through. The daemon sets the window's
environment and list for the requests of each window (``use_environment``); a program started
where none was set (no window) gets an empty environment.

An MCP stdio server gets less: only ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TERM``,
``TMPDIR``, ``USER`` and ``SHELL`` of the window's environment, and what its entry's ``env``
names (``server_environment``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType

from ..rendezvous import PROVIDER_KEY_VARIABLES
from ..secrecy import secret_name, secret_variable

__all__ = ["child_environment", "secret_name", "server_environment", "use_environment"]

PASS_VARIABLE = "TRELLISD_PASS_ENV"
PROVIDER_KEYS = frozenset({"TRELLISD_API_KEY", *PROVIDER_KEY_VARIABLES})
SERVER_VARIABLES = frozenset({"PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "SHELL"})
KEEP_VARIABLE = "TRELLISD_MCP_KEEP"
"""Names the MCP launcher keeps of its environment, dropping what the MCP SDK adds."""


# A context variable, not an argument: the window's environment is wanted where a program
# starts (``run_command``, a turn's check, an MCP server), below the tool and MCP seams, by
# the tasks of a turn that outlives the request that started it. It is set once in the task
# that serves the window, and every task started from there (its turns) inherits it.
_environment: ContextVar[tuple[Mapping[str, str] | None, tuple[str, ...]] | None] = ContextVar(
    "trellisd_environment", default=None
)
_NOTHING: Mapping[str, str] = MappingProxyType({})


def use_environment(environment: Mapping[str, str] | None, passed: tuple[str, ...]) -> None:
    """The programs started from the calling task on run in ``environment`` (a window's,
    read from it at the edge; None: an empty one), and may see ``passed`` (its effective
    ``passEnv``) of its secrets."""
    _environment.set((environment, passed))


def window_variables() -> Mapping[str, str]:
    window = _environment.get()
    return _NOTHING if window is None or window[0] is None else window[0]


def child_environment(
    parent: Mapping[str, str] | None = None, passed: tuple[str, ...] | None = None
) -> dict[str, str]:
    """``parent`` (else the window's environment ``use_environment`` set) without its
    secrets; ``passed`` (else the window's list, else ``TRELLISD_PASS_ENV``)
    let through."""
    window = _environment.get()
    if parent is None:
        parent = window_variables()
    names = passed if passed is not None else window[1] if window is not None else None
    if names is None:
        names = tuple(name.strip() for name in parent.get(PASS_VARIABLE, "").split(","))
    passed_set = set(names)
    return {
        name: value
        for name, value in parent.items()
        if name not in PROVIDER_KEYS and (name in passed_set or not secret_variable(name, value))
    }


def server_environment(own: Mapping[str, str] | None = None) -> dict[str, str]:
    """What an MCP stdio server starts with: the allowed variables of the window's
    environment, its entry's own ``env`` over them, and the names the launcher keeps."""
    parent = window_variables()
    chosen = {
        name: value
        for name, value in parent.items()
        if (name in SERVER_VARIABLES or name.startswith("LC_")) and name not in PROVIDER_KEYS
    }
    chosen.update(own or {})
    return {**chosen, KEEP_VARIABLE: ",".join(chosen)}
