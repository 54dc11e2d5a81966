"""Text shown to a person who must decide on it (an approval's summary), as one line that hides
nothing."""

from __future__ import annotations

import unicodedata

SUMMARY_CHARS = 500
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def summary_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` as one line that shows all it holds: line breaks, other control characters
    and invisible format characters (bidi overrides, zero-width spaces) are written as
    escapes, so no part of a command can hide from the person asked to approve it."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs"):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    line = "".join(out)
    if len(line) > limit:
        line = f"{line[:limit]}… ({len(line) - limit} more characters)"
    return line
