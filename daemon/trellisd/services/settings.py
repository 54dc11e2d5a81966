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
        self._own = settings.provider

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
        window = _window.get()
        return self._own if window is None else window.provider

    @provider.setter
    def provider(self, value: ProviderSettings) -> None:
        window = _window.get()
        if window is None:
            self._own = value
        else:
            window.provider = value

    def for_session(self, choice: ProviderChoice) -> ProviderSettings:
        """The settings a session's turns use: its own choice over the defaults."""
        return self.provider.merged(choice, "provider")
