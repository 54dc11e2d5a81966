"""The daemon's own model settings, which every session and turn lays its choice over."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ProviderSettings
from ..records import ProviderChoice


@dataclass
class Defaults:
    """The environment's settings with ``initializationOptions`` laid over them; an editor
    that sends ``initialize`` again changes them for the turns that start afterwards."""

    provider: ProviderSettings

    def for_session(self, choice: ProviderChoice) -> ProviderSettings:
        """The settings a session's turns use: its own choice over the defaults."""
        return self.provider.merged(choice, "provider")
