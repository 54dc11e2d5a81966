"""Sessions as files: the ``trellisd-session`` format, versions 1 to 4, written from the
store and read back into it. ``protocol/session-files.md`` is its description.

A file is UTF-8 JSON lines, each line one object with a ``type``, each ending in ``\\n``:

    header   {"type": "header", "format": "trellisd-session", "version": 1, ...}
    session  the session: its fields, provider, policy and origin
    acpChoice     an ACP client's mode and model for it, if chosen (version 3, ``archive_choices``)
    acpRejection  each request rejected for good over ACP (version 3)
    turn     each turn of the tree, a parent before its children
    run      the turn's run, after its turn
    step     the run's steps, after their run
    event    the run's events, after their run
    change   the changes the run's steps made to files, after its events (version 2)
    blob     a text content the changes name, once, after the first change naming it; an
             image's bytes, once, after the first ``images`` event naming it (version 5)
    log      each entry of the session's log, in order (``chain.py``), after every row
    end      {"type": "end", "records": N, "sha256": "<hex>"}: the last line

``sha256`` is the SHA-256 of the file's bytes before the end line, and ``records`` how many
lines they are. A file is version 2 when it holds change sets (``archive_changes``), which a
version 1 reader would take for a log that does not verify; version 3 when it holds ACP
choices, which an older reader would drop unseen (a rejected request asked again); version 4
when its log holds ``pin`` or ``unpin`` entries, which an older reader would take for a log
that does not verify (the pins themselves stay with the store, as a fork's do); version 5
when it holds images, whose blobs an older reader would refuse as named by no change;
version 1 otherwise. A file holds
no lease and no pid: a daemon's hold on a session stays with the store it was taken in.

Writing streams the session from one read snapshot; reading checks each line as it comes
and writes it in one transaction, refused and rolled back at the first line that is not
right (``Refused``, naming the line and the check). Neither holds more than a line and the
ids of the session's turns and runs (and the digests of the contents its changes name) in
memory. A reader ignores fields it does not know, except that a field of the store's own (a
column another trellisd version added) is kept when this store has that column, and skips
records of a type it does not know.

A file's ``log`` must verify against the file's own records, as they are in the file, before
anything is imported: the records are also written, unchanged, into a scratch database beside
the import, where the log is checked as ``session/verify`` checks a store. A file with no
``log`` (written before sessions had one) is taken as it is. Either way the imported session
gets a log of its own, computed over what was imported (its root, policy and ids may differ
from the file's), so it verifies in its new store; a file without a log gives it an ``absent``
entry at the end, so that it is not taken for proven (``verified: false``), nor is a file
exported from it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import apsw
import attrs

from .. import __version__
from ..convert import camel, structure, unstructure
from ..errors import Conflict, InvalidParams
from ..policy.layers import PolicySpec
from ..records import Budget, ProviderChoice, Tokens
from ..vocabulary import EventKind, Outcome
from . import archive_choices, chain, costs, feed, images
from .archive_changes import BlobRecord, ChangeRecord, Contents, Unfit, blob_record, texts
from .archive_choices import ChoiceRecord, RejectionRecord
from .db import Database, new_id, now

FORMAT = "trellisd-session"


def untrusted_policy(policy: PolicySpec) -> PolicySpec:
    """A file's policy as it may come into this store: its rules, but not what its author
    let run unasked (an approval mode, grants), which this store's user has not given."""
    return attrs.evolve(policy, approval=None, grants=())


def untrusted_provider(provider: ProviderChoice) -> ProviderChoice:
    """A file's choice of model without its endpoint: a base URL from a file would receive
    this machine's key at the session's next turn."""
    return attrs.evolve(provider, base_url=None)


VERSION = 5
READS = (1, 2, 3, 4, 5)
"""The versions this trellisd reads."""
WITHOUT_CHANGES = 1
"""The version of a file that holds no change sets: what a version 1 reader reads whole."""
WITHOUT_CHOICES = 2
"""The version of a file with change sets and no ACP choices: what a version 2 reader reads
whole."""
WITHOUT_PINS = 3
"""The version of a file whose log holds no pin entries: what a version 3 reader reads
whole."""
WITHOUT_IMAGES = 4
"""The version of a file that holds no images: what a version 4 reader reads whole."""


@attrs.frozen
class Limits:
    """A line or a file larger than these is refused before it is read further: the file is
    untrusted input, and reading it takes memory for one line at a time."""

    header: int = 64 * 1024
    line: int = 64 * 1024 * 1024
    file: int = 8 * 1024 * 1024 * 1024


INTERRUPTED_ON_EXPORT = "the turn was running when its session was exported"

_PRIVATE = {"session": {"owner"}, "run": {"pid", "daemon_id"}, "step": {"cost"}}
"""Columns that never leave the store: who holds a session's lease, which process ran a turn,
what a step cost (priced again from its tokens by the store that imports it)."""

_RENAMED = {
    "session": {"id": "sessionId", "settings": "provider"},
    "turn": {"id": "turnId", "parent_id": "parentTurnId"},
    "run": {"id": "runId"},
    "step": {"n": "step"},
    "event": {},
    "change": {"id": "changeId"},
}
_JSON = {"settings", "policy", "imported_from", "tool_call", "detail", "budget"}
_TOKENS = ("input_tokens", "output_tokens", "cached_tokens")
_IMPLIED = {"turn": {"session_id"}}
"""Columns the file leaves out because its structure says them (a turn's session)."""


class Refused(InvalidParams):
    """A file that cannot be imported: which line, which check, and why."""


@attrs.frozen
class Header:
    format: str
    version: int
    exported_at: str | None = None


@attrs.frozen
class ImportedFromRecord:
    session_id: str
    imported_at: str
    head_hash: str | None = None
    exported_at: str | None = None


@attrs.frozen
class SessionRecord:
    session_id: str
    root: str
    title: str
    head: str | None
    created_at: str
    updated_at: str
    provider: ProviderChoice = ProviderChoice()
    policy: PolicySpec | None = None
    imported_from: ImportedFromRecord | None = None
    budget: Budget | None = None
    head_hash: str | None = None


@attrs.frozen
class TurnRecord:
    turn_id: str
    parent_turn_id: str | None
    prompt: str
    created_at: str


@attrs.frozen
class RunRecord:
    run_id: str
    turn_id: str
    outcome: str
    started_at: str
    error: str | None = None
    model: str | None = None
    ended_at: str | None = None


@attrs.frozen
class TokensRecord:
    input: int | None = None
    output: int | None = None
    cached: int | None = None


@attrs.frozen
class StepRecord:
    run_id: str
    step: int
    decision: str
    text: str
    created_at: str
    tokens: TokensRecord = TokensRecord()
    prompt: str | None = None
    tool_call: dict[str, Any] | None = None
    result: str | None = None


@attrs.frozen
class EventRecord:
    run_id: str
    seq: int
    kind: str
    detail: dict[str, Any]
    created_at: str
    step: int | None = None


@attrs.frozen
class LogRecord:
    seq: int
    kind: str
    ref: str
    hash: str
    body: str | None = None


@attrs.frozen
class End:
    records: int
    sha256: str


# Writing


class _Writer:
    """Lines out, counted and digested as they are written."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.digest, self.records = out, hashlib.sha256(), 0

    def line(self, record: dict[str, Any]) -> None:
        raw = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        self.digest.update(raw)
        self.out.write(raw)
        self.records += 1

    def end(self) -> None:
        end = {"type": "end", "records": self.records, "sha256": self.digest.hexdigest()}
        self.out.write((json.dumps(end, separators=(",", ":")) + "\n").encode())


def _rows(con: apsw.Connection, sql: str, args: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    cursor = con.execute(sql, args)
    names: list[str] | None = None
    for row in cursor:
        if names is None:
            names = [d[0] for d in cursor.getdescription()]
        yield dict(zip(names, row, strict=True))


def _record(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A store row as a file record: fields camelCase, JSON columns as JSON, token counts as
    one ``tokens`` object; private and implied columns left out."""
    out: dict[str, Any] = {"type": table}
    for column, value in row.items():
        field = _field(table, column)
        if field is None:
            continue
        if column in _JSON and value is not None:
            value = json.loads(value)
        out[field] = value
    if table == "step":
        out["tokens"] = {
            "input": row["input_tokens"],
            "output": row["output_tokens"],
            "cached": row["cached_tokens"],
        }
    if table == "session" and out.get("importedFrom") is None:
        out.pop("importedFrom", None)
    return out


@functools.cache
def _field(table: str, column: str) -> str | None:
    """The file's name for a column (None: left out of the file)."""
    left_out = _PRIVATE.get(table, set()) | _IMPLIED.get(table, set())
    if column in left_out or column in _TOKENS:
        return None
    return _RENAMED[table].get(column, camel(column))


def write(db: Database, session_id: str, out: IO[bytes], exported_at: str) -> int:
    """Write the session's whole tree to ``out`` from one snapshot of the store; returns how
    many turns it holds (``NotFound`` for an unknown session)."""
    from .sessions import Sessions

    writer = _Writer(out)
    turns = 0
    written: set[str] = set()  # the contents written as blobs

    def once(sha256: str) -> None:
        """A ``blob`` record of the content, unless one was written."""
        blob = None if sha256 in written else blob_record(con, sha256)
        if blob is not None:
            writer.line(blob)
            written.add(sha256)

    with db.snapshot() as con:
        Sessions._get(con, session_id)
        changed = con.execute(
            "SELECT 1 FROM change c JOIN run r ON r.id = c.run_id JOIN turn t ON t.id = r.turn_id"
            " WHERE t.session_id = ? LIMIT 1",
            (session_id,),
        ).fetchone()
        chosen = archive_choices.any_of(con, session_id)
        pinned = con.execute(
            "SELECT 1 FROM chain WHERE session_id = ? AND kind IN ('pin', 'unpin') LIMIT 1",
            (session_id,),
        ).fetchone()
        pictured = bool(images.of_session(con, session_id))
        writer.line(
            {
                "type": "header",
                "format": FORMAT,
                "version": _version(bool(changed), chosen, bool(pinned), pictured),
                "exportedAt": exported_at,
                "exportedBy": f"trellisd {__version__}",
            }
        )
        for row in _rows(con, "SELECT * FROM session WHERE id = ?", (session_id,)):
            writer.line(_record("session", row))
        for record in archive_choices.records(con, session_id):
            writer.line(record)
        for turn in _rows(
            con, "SELECT * FROM turn WHERE session_id = ? ORDER BY rowid", (session_id,)
        ):
            turns += 1
            writer.line(_record("turn", turn))
            for run in _rows(con, "SELECT * FROM run WHERE turn_id = ?", (turn["id"],)):
                writer.line(_record("run", run))
                for table, order in (("step", "n"), ("event", "seq")):
                    for row in _rows(
                        con,
                        f"SELECT * FROM {table} WHERE run_id = ? ORDER BY {order}",
                        (run["id"],),
                    ):
                        writer.line(_record(table, row))
                        if table == "event" and row["kind"] == EventKind.IMAGES:
                            for ref in images.refs(row["detail"]):
                                once(ref.sha256)
                for row in _rows(
                    con, "SELECT * FROM change WHERE run_id = ? ORDER BY id", (run["id"],)
                ):
                    writer.line(_record("change", row))
                    for sha256 in texts(row):
                        once(sha256)
        for seq, kind, ref, body, digest in con.execute(
            "SELECT seq, kind, ref, body, hash FROM chain WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ):
            kept = None if body is None else bytes(body).decode()
            writer.line(
                {"type": "log", "seq": seq, "kind": kind, "ref": ref, "body": kept, "hash": digest}
            )
    writer.end()
    return turns


def _version(changed: bool, chosen: bool, pinned: bool = False, pictured: bool = False) -> int:
    """The oldest version that reads the file whole."""
    if pictured:
        return VERSION
    if pinned:
        return WITHOUT_IMAGES
    return WITHOUT_PINS if chosen else WITHOUT_CHOICES if changed else WITHOUT_CHANGES


# Reading


class _Lines:
    """The file's records, each checked for size and JSON, and its end line checked against
    what came before it (count and digest)."""

    def __init__(self, source: IO[bytes], path: str, limits: Limits) -> None:
        self.source, self.path, self.limits = source, path, limits
        self.number, self.total, self.digest = 0, 0, hashlib.sha256()

    def refuse(self, check: str, problem: str, line: int | None = None) -> Refused:
        line = self.number if line is None else line
        return Refused(
            f"{self.path} cannot be imported: line {line}: {problem}",
            field="path",
            path=self.path,
            line=line,
            check=check,
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            limit = self.limits.header if self.number == 0 else self.limits.line
            raw = self.source.readline(limit + 1)
            if not raw:
                raise self.refuse(
                    "truncated",
                    "the file ends without its end line: it is cut short"
                    if self.number
                    else "the file is empty",
                    self.number + 1,
                )
            self.number += 1
            self.total += len(raw)
            record = self._parse(raw, limit)
            if record.get("type") == "end":
                self._end(record)
                return
            self.digest.update(raw)
            yield record

    def _parse(self, raw: bytes, limit: int) -> dict[str, Any]:
        foreign = self.number == 1
        if len(raw) > limit:
            if foreign:
                raise self.refuse("format", "this is not a trellisd session file")
            raise self.refuse("size", f"the line is longer than {_size(limit)}")
        if self.total > self.limits.file:
            raise self.refuse("size", f"the file is larger than {_size(self.limits.file)}")
        if not raw.endswith(b"\n"):
            raise self.refuse("truncated", "the line is cut short: the file is truncated")
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        except RecursionError:
            raise self.refuse(
                "json", "the line nests arrays and objects too deep to be read"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            if foreign:
                raise self.refuse("format", "this is not a trellisd session file")
            raise self.refuse("json", "not a JSON object with a type")
        return record

    def _end(self, record: dict[str, Any]) -> None:
        end = self.structure(record, End, "end")
        if end.records != self.number - 1:
            raise self.refuse(
                "count",
                f"the end line counts {end.records} records, the file has {self.number - 1}",
            )
        if end.sha256 != self.digest.hexdigest():
            raise self.refuse(
                "digest",
                "the SHA-256 digest does not match the content: the file was changed or damaged",
            )
        if self.source.read(1):
            raise self.refuse("end", "lines follow the end line", self.number + 1)

    def structure(self, record: dict[str, Any], cls: type[Any], kind: str) -> Any:
        try:
            return structure(record, cls, kind)
        except InvalidParams as exc:
            raise self.refuse("record", exc.message) from None


class _Ids:
    """The file's ids as the store will have them: the same, or new ones (``as_new``)."""

    def __init__(self, as_new: bool) -> None:
        self.as_new = as_new
        self.new: dict[str, str] = {}

    def __call__(self, old: str, prefix: str) -> str:
        if not self.as_new:
            return old
        if old not in self.new:
            self.new[old] = new_id(prefix)
        return self.new[old]

    def rewrite(self, value: Any) -> Any:
        """``value`` (an event's detail) with every id of the session in it rewritten."""
        if not self.new:
            return value
        if isinstance(value, str):
            return self.new.get(value, value)
        if isinstance(value, list):
            return [self.rewrite(v) for v in value]
        if isinstance(value, dict):
            return {k: self.rewrite(v) for k, v in value.items()}
        return value


class _Import:
    """One file going into the store, inside one write transaction."""

    def __init__(
        self,
        con: apsw.Connection,
        lines: _Lines,
        root: str | None,
        as_new: bool,
        imported_at: str,
    ) -> None:
        self.con, self.lines, self.root, self.imported_at = con, lines, root, imported_at
        self.ids = _Ids(as_new)
        self.columns = {
            table: {str(row[1]) for row in con.execute(f"PRAGMA table_info({table})")}
            for table in _RENAMED
        }
        self.session_id = ""
        self.exported_at: str | None = None  # the file's, from its header
        self.head: str | None = None
        self.turns: dict[str, bool] = {}  # a turn of the file (new id): has its run
        self.runs: set[str] = set()
        self.contents = Contents()
        self.changes: set[int] = set()  # the file's change numbers: its log names each once
        self.chosen = False  # the file's acpChoice is read
        self.proof = _Proof(con)

    def run(self) -> str:
        records = iter(self.lines)
        first = next(records, None)
        if first is None or first.get("type") != "header" or first.get("format") != FORMAT:
            raise self.lines.refuse("format", "this is not a trellisd session file")
        header = self.lines.structure(first, Header, "header")
        if header.version not in READS:
            raise self.lines.refuse(
                "version",
                f"the file is format version {header.version}, written by a newer trellisd;"
                f" this one reads versions {', '.join(map(str, READS))}",
            )
        self.exported_at = header.exported_at
        second = next(records, None)
        if second is None or second["type"] != "session":
            raise self.lines.refuse("order", "the session must follow the header")
        self.session(second)
        readers: dict[str, Callable[[dict[str, Any]], None]] = {
            "turn": self.turn,
            "run": self.run_record,
            "step": self.step,
            "event": self.event,
            "change": self.change,
            "blob": self.blob,
            "acpChoice": self.choice,
            "acpRejection": self.rejection,
            "log": self.log,
        }
        try:
            self.proof.add(second)
            for record in records:
                kind = record["type"]
                if kind == "session" or kind == "header":
                    raise self.lines.refuse("order", f"a second {kind} record")
                if kind in readers:
                    readers[kind](record)
                    self.proof.add(record)
            self.finish()
            proven = self.verify(str(second.get("sessionId")))
        finally:
            self.proof.close()
        chain.build_session(self.con, self.session_id, proven)
        feed.build_session(self.con, self.session_id)
        return self.session_id

    def log(self, raw: dict[str, Any]) -> None:
        self.lines.structure(raw, LogRecord, "log")

    def change(self, raw: dict[str, Any]) -> None:
        record: ChangeRecord = self.lines.structure(raw, ChangeRecord, "change")
        run_id = self._run_of(record.run_id, f"change {record.change_id}")
        if record.change_id in self.changes:
            raise self.refuse(f"change {record.change_id} appears twice")
        self.changes.add(record.change_id)
        try:
            self.contents.change(record)
        except Unfit as exc:
            raise self.refuse(exc.problem, exc.check) from None
        before, after = record.sides()
        self.insert(
            "change",
            {
                "run_id": run_id,
                "step": record.step,
                "path": record.path,
                "source": record.source,
                "before_kind": before.kind.value,
                "before_sha256": before.sha256,
                "before_size": before.size,
                "after_kind": after.kind.value,
                "after_sha256": after.sha256,
                "after_size": after.size,
                "created_at": record.created_at,
            },
            raw,
        )

    def blob(self, raw: dict[str, Any]) -> None:
        record: BlobRecord = self.lines.structure(raw, BlobRecord, "blob")
        try:
            self.contents.blob(self.con, record)
        except Unfit as exc:
            raise self.refuse(exc.problem, exc.check) from None

    def choice(self, raw: dict[str, Any]) -> None:
        record: ChoiceRecord = self.lines.structure(raw, ChoiceRecord, "acpChoice")
        if self.chosen:
            raise self.lines.refuse("order", "a second acpChoice record")
        self.chosen = True
        archive_choices.choose(self.con, self.session_id, record, self.imported_at)

    def rejection(self, raw: dict[str, Any]) -> None:
        record: RejectionRecord = self.lines.structure(raw, RejectionRecord, "acpRejection")
        if not archive_choices.reject(self.con, self.session_id, record, self.imported_at):
            raise self.refuse(f"acpRejection {record.summary!r} appears twice")

    def verify(self, file_session_id: str) -> bool:
        """Refuse the file when its log does not verify against its own records; whether
        it proves the session (a file without a log, or whose log is marked ``absent``,
        does not)."""
        verdict = self.proof.verify(file_session_id)
        if verdict is None or verdict.ok:
            return verdict is not None and not verdict.absent
        bad = verdict.first_bad
        at = "" if bad is None else f" at entry {bad.seq} ({bad.kind} {bad.id})"
        raise self.lines.refuse(
            "log",
            f"the session's log does not verify{at}: {verdict.reason};"
            " the file was changed after it was exported",
            line=2,
        )

    def refuse(self, problem: str, check: str = "reference") -> Refused:
        return self.lines.refuse(check, problem)

    def insert(self, table: str, values: dict[str, Any], raw: dict[str, Any]) -> None:
        """Insert ``values`` (columns) and the fields of ``raw`` this version does not know
        but this store keeps (a column another trellisd version added)."""
        known = _known(table, tuple(values))
        for field, value in raw.items():
            if field in known:
                continue
            column = _snake(field)
            if (
                column in self.columns[table]
                and column not in values
                and column not in _PRIVATE.get(table, ())
                and (value is None or isinstance(value, str | int | float))
            ):
                values[column] = value
        names = ", ".join(values)
        marks = ", ".join("?" * len(values))
        self.con.execute(f"INSERT INTO {table}({names}) VALUES ({marks})", tuple(values.values()))

    def taken(self, table: str, column: str, value: str, what: str) -> None:
        if self.con.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (value,)).fetchone():
            raise Conflict(
                f"{what} {value} is already in this store: import it with asNew (trellisd import"
                " --as-new) to keep both as separate sessions",
                **{camel(f"{what}_id"): value},
                path=self.lines.path,
            )

    def session(self, raw: dict[str, Any]) -> None:
        if isinstance(raw.get("budget"), str):  # written before the budget was an object
            with contextlib.suppress(ValueError):
                raw = {**raw, "budget": json.loads(raw["budget"])}
        record: SessionRecord = self.lines.structure(raw, SessionRecord, "session")
        if not self.ids.as_new:
            self.taken("session", "id", record.session_id, "session")
        self.session_id = self.ids(record.session_id, "s")
        self.head = None if record.head is None else self.ids(record.head, "t")
        imported_from = ImportedFromRecord(
            record.session_id, self.imported_at, record.head_hash, self.exported_at
        )
        self.insert(
            "session",
            {
                "id": self.session_id,
                "root": self.root or record.root,
                "title": record.title,
                "head": self.head,
                "settings": json.dumps(unstructure(untrusted_provider(record.provider))),
                "created_at": record.created_at,
                "updated_at": self.imported_at,
                "policy": None
                if record.policy is None
                else json.dumps(unstructure(untrusted_policy(record.policy))),
                "head_hash": None,  # the session's own log is computed once it is in
                "budget": self.budget(record.budget),
                "imported_from": json.dumps(
                    {
                        "sessionId": imported_from.session_id,
                        "headHash": imported_from.head_hash,
                        "exportedAt": imported_from.exported_at,
                        "importedAt": imported_from.imported_at,
                    }
                ),
            },
            raw,
        )

    def budget(self, budget: Budget | None) -> str | None:
        """The session's budget as the store keeps it: it only ever caps what the session's
        turns may spend, so the file's is kept as it is, if it caps something."""
        if budget is None or (budget.tokens is None and budget.usd is None):
            return None
        if (budget.tokens is not None and budget.tokens < 1) or (
            budget.usd is not None and not 0 < budget.usd < float("inf")
        ):
            raise self.lines.refuse(
                "record", "session.budget must cap at least 1 token and more than 0 USD", line=2
            )
        return json.dumps(unstructure(budget))

    def turn(self, raw: dict[str, Any]) -> None:
        record: TurnRecord = self.lines.structure(raw, TurnRecord, "turn")
        if not self.ids.as_new:
            self.taken("turn", "id", record.turn_id, "turn")
        turn_id = self.ids(record.turn_id, "t")
        if turn_id in self.turns:
            raise self.refuse(f"turn {record.turn_id} appears twice")
        parent = None
        if record.parent_turn_id is not None:
            parent = self.ids(record.parent_turn_id, "t")
            if parent not in self.turns:
                raise self.refuse(
                    f"turn {record.turn_id} follows {record.parent_turn_id}, which is not"
                    " before it in the file"
                )
        self.turns[turn_id] = False
        self.insert(
            "turn",
            {
                "id": turn_id,
                "session_id": self.session_id,
                "parent_id": parent,
                "prompt": record.prompt,
                "created_at": record.created_at,
            },
            raw,
        )

    def run_record(self, raw: dict[str, Any]) -> None:
        record: RunRecord = self.lines.structure(raw, RunRecord, "run")
        if record.outcome not in set(Outcome):
            raise self.refuse(f"outcome {record.outcome!r} is not one trellisd knows", "record")
        if not self.ids.as_new:
            self.taken("run", "id", record.run_id, "run")
        turn_id = self.ids(record.turn_id, "t")
        if self.turns.get(turn_id, True):
            raise self.refuse(
                f"run {record.run_id} is of turn {record.turn_id}, which is not before it"
                " in the file or already has a run"
            )
        self.turns[turn_id] = True
        run_id = self.ids(record.run_id, "r")
        self.runs.add(run_id)
        running = record.outcome == Outcome.RUNNING
        self.insert(
            "run",
            {
                "id": run_id,
                "turn_id": turn_id,
                "outcome": Outcome.INTERRUPTED if running else record.outcome,
                "error": INTERRUPTED_ON_EXPORT if running else record.error,
                "pid": 0,
                "started_at": record.started_at,
                "ended_at": self.imported_at if running else record.ended_at,
                "model": record.model,
            },
            raw,
        )

    def _run_of(self, old: str, what: str) -> str:
        run_id = self.ids(old, "r")
        if run_id not in self.runs:
            raise self.refuse(f"{what} of run {old}, which is not before it in the file")
        return run_id

    def step(self, raw: dict[str, Any]) -> None:
        record: StepRecord = self.lines.structure(raw, StepRecord, "step")
        run_id = self._run_of(record.run_id, f"step {record.step}")
        tool_call = record.tool_call
        self._unique(
            "step",
            {
                "run_id": run_id,
                "n": record.step,
                "decision": record.decision,
                "prompt": record.prompt,
                "text": record.text,
                "tool_call": None if tool_call is None else json.dumps(tool_call),
                "result": record.result,
                "input_tokens": record.tokens.input,
                "output_tokens": record.tokens.output,
                "cached_tokens": record.tokens.cached,
                "created_at": record.created_at,
                "cost": costs.of_step(self.con, run_id, Tokens(*attrs.astuple(record.tokens))),
            },
            raw,
            f"step {record.step} of run {record.run_id}",
        )

    def event(self, raw: dict[str, Any]) -> None:
        record: EventRecord = self.lines.structure(raw, EventRecord, "event")
        run_id = self._run_of(record.run_id, f"event {record.seq}")
        if record.kind == EventKind.IMAGES:
            try:
                self.contents.images(record.detail)
            except Unfit as exc:
                raise self.refuse(exc.problem, exc.check) from None
        self._unique(
            "event",
            {
                "run_id": run_id,
                "seq": record.seq,
                "kind": record.kind,
                "step": record.step,
                "detail": json.dumps(self.ids.rewrite(record.detail)),
                "created_at": record.created_at,
            },
            raw,
            f"event {record.seq} of run {record.run_id}",
        )

    def _unique(self, table: str, values: dict[str, Any], raw: dict[str, Any], what: str) -> None:
        try:
            self.insert(table, values, raw)
        except apsw.ConstraintError:
            raise self.refuse(f"{what} appears twice") from None

    def finish(self) -> None:
        if self.head is not None and self.head not in self.turns:
            raise self.lines.refuse(
                "reference", "the session's head is not a turn of the file", line=2
            )
        without = [turn for turn, has_run in self.turns.items() if not has_run]
        if without:
            raise self.lines.refuse(
                "reference", f"turn {without[0]} has no run", line=self.lines.number
            )
        missing = self.contents.missing()
        if missing is not None:
            raise self.lines.refuse(
                "reference",
                f"a change or an image names content {missing}, which the file does not hold",
                line=self.lines.number,
            )


_PROVEN = ("session", "turn", "run", "step", "event", "change", "chain")
"""The tables a file's log is checked against, in the scratch database."""


class _Proof:
    """A scratch database holding the file's records as the file says them, against which
    the file's log is verified (``chain.verify``) before the import commits."""

    def __init__(self, con: apsw.Connection) -> None:
        self.scratch = apsw.Connection("")  # private and temporary, on disk if it grows
        self.columns: dict[str, set[str]] = {}
        self.session_id = ""
        self.logged = False
        for name, sql in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN"
            f" ({', '.join('?' * len(_PROVEN))})",
            _PROVEN,
        ):
            self.scratch.execute(sql)
            self.columns[name] = {
                str(row[1]) for row in self.scratch.execute(f"PRAGMA table_info({name})")
            }

    def add(self, raw: dict[str, Any]) -> None:
        """A record of the file, as its row, unchanged."""
        table = "chain" if raw["type"] == "log" else raw["type"]
        if table not in self.columns:
            return  # a record no log entry is computed from (a change's content)
        values = _row(table, raw)
        if table == "session":
            self.session_id = str(values.get("id"))
        elif table == "turn":
            values["session_id"] = self.session_id
        elif table == "run":
            values["pid"] = 0
        elif table == "chain":
            self.logged = True
            values["session_id"] = self.session_id
            body = values.get("body")
            values["body"] = None if body is None else str(body).encode()
        values = {c: v for c, v in values.items() if c in self.columns[table]}
        names, marks = ", ".join(values), ", ".join("?" * len(values))
        try:
            self.scratch.execute(
                f"INSERT INTO {table}({names}) VALUES ({marks})", tuple(values.values())
            )
        except apsw.ConstraintError:
            pass  # the import refuses it, naming its line

    def verify(self, session_id: str) -> chain.LogVerdict | None:
        """The file's log checked against its records; None for a file without a log."""
        if not self.logged:
            return None
        return chain.verify(self.scratch, session_id)

    def close(self) -> None:
        self.scratch.close()


def _row(table: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A file record as the store row it was written from (``_record`` undone)."""
    if table == "chain":
        return {k: v for k, v in raw.items() if k != "type"}
    columns = {field: column for column, field in _RENAMED[table].items()}
    values: dict[str, Any] = {}
    for field, value in raw.items():
        if field == "type":
            continue
        if table == "step" and field == "tokens" and isinstance(value, dict):
            for column, part in zip(_TOKENS, ("input", "output", "cached"), strict=True):
                values[column] = value.get(part)
            continue
        column = columns.get(field, _snake(field))
        if column in _JSON and value is not None:
            value = json.dumps(value)
        values[column] = value
    return values


def read(
    db: Database,
    source: IO[bytes],
    path: str,
    root: str | None,
    as_new: bool,
    imported_at: str,
    limits: Limits = Limits(),
) -> str:
    """Import the session file ``source`` (named ``path`` in refusals) in one transaction;
    returns the session's id in this store. ``Refused`` for a file that is not a whole,
    undamaged session file; ``Conflict`` for a session the store has (unless ``as_new``)."""
    with db.write() as con:
        return _Import(con, _Lines(source, path, limits), root, as_new, imported_at).run()


def _size(limit: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if limit >= scale:
            return f"{limit / scale:g} {unit}"
    return f"{limit} bytes"


@functools.cache
def _known(table: str, columns: tuple[str, ...]) -> frozenset[str]:
    """The fields of a record this version reads into ``columns``."""
    return frozenset(_RENAMED[table].values()) | {camel(c) for c in columns} | {"type", "tokens"}


@functools.cache
def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def export_file(db: Database, session_id: str, path: Path) -> tuple[int, int]:
    """Export the session to ``path`` atomically: written to a temporary file in the same
    folder, flushed to the disk, then renamed over ``path``. A crash at any point leaves
    ``path`` as it was. Returns ``(bytes, turns)``."""
    with atomic_file(path) as out:
        turns = write(db, session_id, out, now())
        size = out.tell()
    return size, turns


def import_file(db: Database, path: Path, root: str | None, as_new: bool) -> str:
    with path.open("rb") as source:
        return read(db, source, str(path), root, as_new, now())


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[IO[bytes]]:
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself reaches the disk
    finally:
        os.close(folder)
