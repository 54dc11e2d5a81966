"""The model settings every session and turn lays its choice over: the daemon's own, or, for
a request from a window of the shared daemon, that window's (its environment and its
``initializationOptions``), so two windows with two providers or two keys work side by side."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from ..config import ProviderSettings
from ..config_file import Settings
from ..policy import Policy
from ..records import ProviderChoice
from ..tools.environment import use_environment


@dataclass
class WindowSettings:
    """A window's settings: those of its environment and the config file (``base``), and
    the provider its ``initializationOptions`` made of them; an editor that sends
    ``initialize`` again changes that for the turns it starts afterwards."""

    provider: ProviderSettings
    base: Settings


# The window a request came from, set once in the task that serves the window (``server``,
# ``acp``) from the settings it was handed, and inherited by every task started from there.
# A context variable rather than an argument because every request of a window is served in
# that task, through method tables whose handlers take the services and the params only, and a
# turn it starts outlives the request: the window's settings must reach the turn's provider,
# its policy and MCP servers when first loaded, and its programs (``tools.environment``) below
# the tool seam. Where none is set (no window: the services in-process), the daemon's own
# ``Settings``, given to ``Defaults``, are used; nothing here reads the process's environment.
_window: ContextVar[WindowSettings | None] = ContextVar("trellisd_window", default=None)


def use_window(settings: WindowSettings) -> None:
    """The requests served from the calling task on (and the turns they run) use ``settings``,
    and the programs they start run in the window's environment."""
    _window.set(settings)
    use_environment(settings.base.environment, settings.base.pass_env)


class Defaults:
    """The settings of the window a request came from, else the daemon's own."""

    def __init__(self, settings: Settings) -> None:
        self._base = settings

    @property
    def settings(self) -> Settings:
        """The file and environment's settings of the window a request came from (its MCP
        servers, its default policy), else the daemon's own."""
        window = _window.get()
        return self._base if window is None else window.base

    @property
    def policy(self) -> Policy:
        """The default policy a session's own is stacked on."""
        return self.settings.policy

    @property
    def provider(self) -> ProviderSettings:
        """The provider settings of the window a request came from (its
        ``initializationOptions`` over its environment's), else the daemon's own."""
        window = _window.get()
        return self._base.provider if window is None else window.provider

    def for_session(self, choice: ProviderChoice) -> ProviderSettings:
        """The settings a session's turns use: its own choice over the defaults."""
        return self.provider.merged(choice, "provider")
