"""Regular expressions matched in linear time (RE2), for every pattern the model or a
repository chooses: a search's ``pattern``, a policy's globs, a ``.gitignore``.

Python's ``re`` backtracks: ``^(a+)+$`` over a 35-character line, or a glob such as
``**/a/**/a/**/a/**/b`` over a deep path, runs for minutes while holding the interpreter,
and then nothing else of the daemon runs, not even the answer to a cancel. RE2 matches in
time linear in the text and refuses at compile time what it cannot do so (backreferences,
lookaround) and what would take too much memory. Its syntax is Python's otherwise.
"""

from __future__ import annotations

from typing import Protocol

import re2  # type: ignore[import-untyped]

MAX_PATTERN_MEMORY = 8 * 1024 * 1024
"""RE2's memory budget for one compiled pattern; past it the pattern is refused."""


class LinearPattern(Protocol):
    """The part of a compiled RE2 pattern the daemon uses."""

    def search(self, text: str) -> object | None: ...

    def fullmatch(self, text: str) -> object | None: ...


class PatternError(ValueError):
    """A pattern RE2 refuses; the message says why, in RE2's words."""


def compile_linear(pattern: str, *, dot_all: bool = False) -> LinearPattern:
    """``pattern`` compiled by RE2; raises ``PatternError``."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_MEMORY
    options.dot_nl = dot_all
    try:
        compiled: LinearPattern = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise PatternError(str(reason)) from exc
    return compiled
