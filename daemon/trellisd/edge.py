"""The process's edge: how a daemon's process ends once the daemon has finished. Kept apart
from the daemon (``hub``, ``server``, ``shared`` take it as a function) so that a daemon runs
in a test, where ending is the test's to decide."""

from __future__ import annotations

import os
from typing import NoReturn


def end_process(code: int) -> NoReturn:
    """End the process with ``code`` at once: what the daemon had to finish is finished, and
    no thread left (a blocked read of stdin, the store's) holds the exit back."""
    os._exit(code)
