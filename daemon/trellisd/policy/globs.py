"""The glob patterns of a policy's rules.

A path pattern is matched against the whole root-relative posix path (``src/app.py``; the
root itself is ``.``), anchored at the root:

    ``*``   any characters but ``/``                ``*.py`` is a file at the top only
    ``**``  any characters, ``/`` included           ``**`` is everything
    ``**/`` any number of folders, none included     ``**/*.py`` is any Python file
    ``x/**`` everything under ``x``, and ``x`` itself
    ``?``   one character but ``/``;  ``[abc]``, ``[!abc]`` one character of (not of) a set

A leading ``./`` or ``/`` is dropped: patterns are relative to the root whatever they say.

A command pattern is matched against the whole command line (``shlex.join(argv)``), and
there ``*`` matches any characters, spaces and ``/`` included: ``pytest*`` is ``pytest``
with any arguments (and ``pytest-watch``; write ``pytest`` and ``pytest *`` to mean only
pytest), ``git status`` is exactly that command line.
"""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def path_pattern(pattern: str) -> re.Pattern[str]:
    pattern = pattern.removeprefix("./").lstrip("/") or "."
    if pattern.endswith("/**") and len(pattern) > 3:
        return re.compile(_translate(pattern[:-3]) + r"(?:/.*)?", re.DOTALL)
    return re.compile(_translate(pattern), re.DOTALL)


@lru_cache(maxsize=1024)
def command_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern), re.DOTALL)


def matches_path(pattern: str, path: str) -> bool:
    return path_pattern(pattern).fullmatch(path) is not None


def matches_command(pattern: str, command: str) -> bool:
    return command_pattern(pattern).match(command) is not None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            if j - i == 1:
                out.append("[^/]*")
            elif (i == 0 or pattern[i - 1] == "/") and j < n and pattern[j] == "/":
                out.append("(?:.*/)?")
                j += 1
            else:
                out.append(".*")
            i = j
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
            else:
                chars = pattern[i + 1 : j]
                negate = chars[0] in "!^"
                body = "".join(ch if ch == "-" else re.escape(ch) for ch in chars[negate:])
                out.append("[" + ("^" if negate else "") + body + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)
