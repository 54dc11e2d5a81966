"""The domain records, kept importable here for code written before they moved to
``trellisd.records``."""

from ..records import (
    Event,
    RunSummary,
    Session,
    SessionSummary,
    Step,
    Tokens,
    ToolCall,
    Turn,
    TurnRef,
    TurnResult,
)

__all__ = [
    "Event",
    "RunSummary",
    "Session",
    "SessionSummary",
    "Step",
    "Tokens",
    "ToolCall",
    "Turn",
    "TurnRef",
    "TurnResult",
]
