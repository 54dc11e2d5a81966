"""The model settings every session and turn lays its choice over: the daemon's own, or, for
a request from a window of the shared daemon, that window's (its environment and its
``initializationOptions``), so two windows with two providers or two keys work side by side."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from ..config import ProviderSettings
from ..records import ProviderChoice


@dataclass
class WindowSettings:
    """A window's settings; an editor that sends ``initialize`` again changes them for the
    turns it starts afterwards."""

    provider: ProviderSettings


_window: ContextVar[WindowSettings | None] = ContextVar("trellisd_window", default=None)


def use_window(settings: WindowSettings) -> None:
    """The requests served from the calling task on (and the turns they run) use ``settings``."""
    _window.set(settings)


class Defaults:
    """The settings of the window a request came from, else the daemon's own."""

    def __init__(self, provider: ProviderSettings) -> None:
        self._own = provider

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
