"""The daemon's own model settings, which every session and turn lays its choice over."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ProviderChoice, ProviderSettings
from ..convert import structure


@dataclass
class Defaults:
    """The environment's settings with ``initializationOptions`` laid over them; an editor
    that sends ``initialize`` again changes them for the turns that start afterwards."""

    provider: ProviderSettings

    def for_session(self, stored: dict[str, object]) -> ProviderSettings:
        """The settings a session's turns use: its stored choice over the defaults."""
        return self.provider.merged(structure(stored, ProviderChoice, "provider"), "provider")
