"""The glob patterns of a policy's rules and of the ``search`` tool's ``glob``: one dialect.

A path pattern is git's pattern syntax (``.gitignore``, read by ``pathspec``) anchored at
the session root, as git reads a pattern with a leading ``/``. It is matched against the
root-relative posix path (``src/app.py``; the root itself is ``.``):

    ``*``   any characters but ``/``                ``*.py`` is a file at the top only
    ``**``  any characters, ``/`` included           ``**`` is everything
    ``**/`` any number of folders, none included     ``**/*.py`` is any Python file
    ``x/**`` everything under ``x``, and ``x`` itself
    ``?``   one character but ``/``;  ``[abc]``, ``[!abc]`` one character of (not of) a set

A pattern that names a folder also covers what is in it, as in git (``.git`` covers
``.git/config``), except one that ends in ``/*``, which names the folder's direct entries
only (``src/*`` is not ``src/a/b``). A leading ``./`` or ``/`` is dropped: patterns are
relative to the root whatever they say.

A command pattern is matched against the whole command line (``shlex.join(argv)``), and
there ``*`` matches any characters, spaces and ``/`` included: ``pytest*`` is ``pytest``
with any arguments (and ``pytest-watch``; write ``pytest`` and ``pytest *`` to mean only
pytest), ``git status`` is exactly that command line.

Both are matched in linear time (see ``tools.linear``), so no pattern a repository writes
and no path or command line a model chooses can stall the daemon.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pathspec.patterns.gitignore import GitIgnorePatternError
from pathspec.patterns.gitignore.basic import GitIgnoreBasicPattern

from ..tools.linear import LinearPattern, PatternError, compile_linear


class GlobError(ValueError):
    """A pattern that is not a valid glob; the message says why."""


@lru_cache(maxsize=4096)
def path_pattern(pattern: str) -> LinearPattern:
    """The compiled form of a path glob; raises ``GlobError``."""
    anchored = "/" + (pattern.removeprefix("./").lstrip("/") or ".")
    regexes = [_git_regex(anchored)]
    if anchored.endswith("/**") and len(anchored) > 3:
        # ``x/**`` is also ``x`` itself
        regexes.append(_git_regex(anchored[:-3]))
    try:
        return compile_linear("|".join(f"(?:{r})" for r in regexes), dot_all=True)
    except PatternError as exc:
        raise GlobError(f"{pattern!r} is not a valid glob: {exc}") from exc


@lru_cache(maxsize=4096)
def command_pattern(pattern: str) -> LinearPattern:
    """The compiled form of a command glob; raises ``GlobError``."""
    try:
        return compile_linear(_command_regex(pattern), dot_all=True)
    except PatternError as exc:
        raise GlobError(f"{pattern!r} is not a valid glob: {exc}") from exc


def matches_path(pattern: str, path: str) -> bool:
    return path_pattern(pattern).search(path) is not None


def matches_command(pattern: str, command: str) -> bool:
    return command_pattern(pattern).fullmatch(command) is not None


def _git_regex(pattern: str) -> str:
    try:
        regex, include = GitIgnoreBasicPattern.pattern_to_regex(pattern)
    except GitIgnorePatternError as exc:
        raise GlobError(f"{pattern[1:]!r} is not a valid glob: {exc}") from exc
    if regex is None or include is None:
        raise GlobError(f"{pattern[1:]!r} is not a valid glob")
    return str(regex)


def _command_regex(pattern: str) -> str:
    """fnmatch's syntax: ``*`` anything, ``?`` one character, ``[...]`` a set."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + (i < n and pattern[i] in "!^")
            j += j < n and pattern[j] == "]"
            j = pattern.find("]", j)
            if j < 0:
                out.append(re.escape(c))
                continue
            chars = pattern[i:j]
            negate = chars[:1] in ("!", "^")
            body = "".join(ch if ch == "-" else re.escape(ch) for ch in chars[negate:])
            out.append("[" + ("^" if negate else "") + body + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
    return "".join(out)
