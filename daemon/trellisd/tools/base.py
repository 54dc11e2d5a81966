"""The seam for the agent's tools: a ``Tool`` runs with a ``ToolContext`` confined to the
session root and answers with text for the model. A ``ToolFailure`` is a result too: the
model is told what went wrong and can adapt."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class ToolFailure(Exception):
    """The tool could not do what was asked; the message goes back to the model."""


@dataclass(frozen=True)
class ToolContext:
    root: Path

    def resolve(self, relative: Any, *, field: str = "path") -> Path:
        """The real path of ``relative`` under the root; refuses anything that leads out."""
        if not isinstance(relative, str) or not relative:
            raise ToolFailure(f"{field} must be a non-empty string")
        root = self.root.resolve()
        candidate = Path(relative)
        if candidate.is_absolute():
            raise ToolFailure(
                f"{relative} is an absolute path; give a path relative to the session root"
            )
        if ".." in candidate.parts:
            raise ToolFailure(f"{relative} leads out of the session root ('..' is refused)")
        real = Path(os.path.realpath(root / candidate))
        if real != root and root not in real.parents:
            raise ToolFailure(f"{relative} leads out of the session root through a symlink")
        return real

    def relative(self, path: Path) -> str:
        rel = path.relative_to(self.root.resolve()).as_posix()
        return rel or "."


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Do the work (blocking work in a thread) and answer with text for the model.
        Cancellation must stop the work: a command is killed, nothing is left half-written."""
        ...
