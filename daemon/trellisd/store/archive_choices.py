"""An ACP client's choices for a session in session files (``archive``): one ``acpChoice``
record (the session's mode and model) and an ``acpRejection`` record for each request
rejected for good, right after the session record, written only when the session has any.

The file is untrusted: a mode that would let the session's turns write and run unasked
(``auto``) is not taken from it, as a file's policy brings no approval mode (``archive``'s
``untrusted_policy``); the session opens in the mode its policy gives. A model is a name the
session's provider is asked for, as the file's ``provider`` is. Rejections only ever make the
session ask less and deny more, so they are taken as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apsw
import attrs

from ..convert import Invalid
from .acp_choices import MODES

UNASKED = "auto"
"""The mode a file cannot bring: writes and commands the policy allows, run without asking."""


def _model(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value == "":
        raise Invalid.of(attribute, "must be a model's name or null")


def _mode(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and value not in MODES:
        raise Invalid.of(attribute, f"must be one of {', '.join(MODES)}")


@attrs.frozen
class ChoiceRecord:
    mode: str | None = attrs.field(default=None, validator=_mode)
    model: str | None = attrs.field(default=None, validator=_model)


@attrs.frozen
class RejectionRecord:
    summary: str


def any_of(con: apsw.Connection, session_id: str) -> bool:
    """Whether the session has choices to write (the file is then version 3)."""
    return bool(
        con.execute(
            "SELECT 1 FROM acp_choice WHERE session_id = ? AND (mode IS NOT NULL OR"
            " model IS NOT NULL) UNION ALL SELECT 1 FROM acp_rejection WHERE session_id = ?"
            " LIMIT 1",
            (session_id, session_id),
        ).fetchone()
    )


def records(con: apsw.Connection, session_id: str) -> Iterator[dict[str, Any]]:
    """The session's ``acpChoice`` and ``acpRejection`` records (none: it has no choices)."""
    for mode, model in con.execute(
        "SELECT mode, model FROM acp_choice WHERE session_id = ?"
        " AND (mode IS NOT NULL OR model IS NOT NULL)",
        (session_id,),
    ):
        yield {"type": "acpChoice", "mode": mode, "model": model}
    for (summary,) in con.execute(
        "SELECT summary FROM acp_rejection WHERE session_id = ? ORDER BY created_at, summary",
        (session_id,),
    ):
        yield {"type": "acpRejection", "summary": summary}


def choose(con: apsw.Connection, session_id: str, record: ChoiceRecord, at: str) -> None:
    """Keep the file's choice for the imported session, but a mode it cannot bring."""
    mode = None if record.mode == UNASKED else record.mode
    if mode is None and record.model is None:
        return
    con.execute(
        "INSERT INTO acp_choice(session_id, mode, model, updated_at) VALUES (?, ?, ?, ?)",
        (session_id, mode, record.model, at),
    )


def reject(con: apsw.Connection, session_id: str, record: RejectionRecord, at: str) -> bool:
    """Keep a rejection for the imported session; False when the file named it already."""
    try:
        con.execute(
            "INSERT INTO acp_rejection(session_id, summary, created_at) VALUES (?, ?, ?)",
            (session_id, record.summary, at),
        )
    except apsw.ConstraintError:
        return False
    return True
