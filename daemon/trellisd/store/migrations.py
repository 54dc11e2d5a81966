"""Numbered forward migrations; ``PRAGMA user_version`` is how many have been applied.

Append new steps; never edit one that has shipped. A step is SQL, or a function given the
connection (inside the migration's transaction) for what SQL alone cannot compute.

Steps are additive within a compatibility level: they add tables and columns that older
readers ignore, so a trellisd that knows fewer steps can still read the store (and refuses to
write it). ``OLDEST_READER`` is the oldest schema that can read a store this version writes:
a step that is not additive (drops or renames a table or column, changes what a value means,
puts rows an older reader would misread in a table it reads, or is a function) raises it to
its own number. A step after it may only create tables, indexes, triggers and views, add
columns, and fill the tables it creates (a test holds every step to that), so appending such
steps keeps every build from ``OLDEST_READER`` on reading. The store records the level, with
the build that wrote it (``build.build()``), in ``store_info``, each time a build of its schema
opens it for writing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from . import chain

Migration = str | Callable[[apsw.Connection], None]
OLDEST_READER = 15
"""Step 15 puts ``change`` entries in the sessions' logs (and later writes add them), which a
build of schema 14 reads as a log that does not verify: ``session/verify`` and a reopen's
integrity would call every session with a change set tampered with. So 15, not lower: step
16 only adds tables. Step 10 is the first schema that reads ``store_info``."""


def _session_log(con: apsw.Connection) -> None:
    """Each session's hash-chained log (``chain``), computed over the rows already there."""
    con.execute(
        """
        CREATE TABLE chain (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            body BLOB,
            hash TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) STRICT;
        ALTER TABLE session ADD COLUMN head_hash TEXT;
        """
    )
    chain.build(con)


def _log_changes(con: apsw.Connection) -> None:
    """Each change set's rows into their session's log (``chain``), after what it holds, in
    the order they were made: the stores whose logs were computed before changes were logged."""
    rows: list[tuple[Any, ...]] = con.execute(
        "SELECT t.session_id, c.id FROM change c JOIN run r ON r.id = c.run_id"
        " JOIN turn t ON t.id = r.turn_id WHERE NOT EXISTS (SELECT 1 FROM chain WHERE"
        " chain.session_id = t.session_id AND chain.kind = 'change'"
        " AND chain.ref = CAST(c.id AS TEXT)) ORDER BY c.id"
    ).fetchall()
    for session_id, change_id in rows:
        chain.record(con, session_id, "change", str(change_id))


MIGRATIONS: tuple[Migration, ...] = (
    # 1: sessions, the tree of turns, runs with their steps and events.
    """
    CREATE TABLE session (
        id TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        title TEXT NOT NULL,
        head TEXT,
        settings TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) STRICT;
    CREATE INDEX session_by_update ON session(updated_at DESC, id DESC);
    CREATE INDEX session_by_root ON session(root, updated_at DESC);

    CREATE TABLE turn (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session(id),
        parent_id TEXT REFERENCES turn(id),
        prompt TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT;
    CREATE INDEX turn_by_session ON turn(session_id);

    CREATE TABLE run (
        id TEXT PRIMARY KEY,
        turn_id TEXT NOT NULL UNIQUE REFERENCES turn(id),
        outcome TEXT NOT NULL,
        error TEXT,
        pid INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT
    ) STRICT;
    CREATE INDEX run_by_outcome ON run(outcome);

    CREATE TABLE step (
        run_id TEXT NOT NULL REFERENCES run(id),
        n INTEGER NOT NULL,
        decision TEXT NOT NULL,
        prompt TEXT,
        text TEXT NOT NULL,
        tool_call TEXT,
        result TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        cached_tokens INTEGER,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, n)
    ) STRICT;

    CREATE TABLE event (
        run_id TEXT NOT NULL REFERENCES run(id),
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        step INTEGER,
        detail TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) STRICT;
    """,
    # 2: the daemons using the store, and each session's writer (its lease).
    """
    CREATE TABLE daemon (
        id TEXT PRIMARY KEY,
        pid INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        heartbeat_at TEXT NOT NULL
    ) STRICT;
    ALTER TABLE session ADD COLUMN owner TEXT;
    ALTER TABLE run ADD COLUMN daemon_id TEXT;
    """,
    # 3: the policy a session was opened with.
    """
    ALTER TABLE session ADD COLUMN policy TEXT;
    """,
    # 4: the model each run used, for its cost.
    """
    ALTER TABLE run ADD COLUMN model TEXT;
    """,
    # 5: which process a daemon is, so that a reused pid is not taken for it: the boot it
    # runs in and its start time (clock ticks after boot, as in /proc/<pid>/stat).
    """
    ALTER TABLE daemon ADD COLUMN boot_id TEXT;
    ALTER TABLE daemon ADD COLUMN process_start INTEGER;
    """,
    # 6: a session's lineage (the session and turn it was forked from), its standing
    # instructions (and whether a change to them awaits the next run), and its feed: one
    # numbered entry per commit (a turn started, a step, an event, a turn ended), pointing at
    # the row it committed; a turn's end keeps the outcome it ended with. Existing sessions'
    # feeds are filled in the order their rows were written. A turn's children and a run's
    # feed entries are indexed, so that deleting a session is not quadratic.
    """
    ALTER TABLE session ADD COLUMN forked_from TEXT;
    ALTER TABLE session ADD COLUMN forked_turn TEXT;
    ALTER TABLE session ADD COLUMN instructions TEXT;
    ALTER TABLE session ADD COLUMN instructions_changed INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE feed (
        session_id TEXT NOT NULL REFERENCES session(id),
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        run_id TEXT NOT NULL REFERENCES run(id),
        n INTEGER,
        detail TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) STRICT;
    CREATE INDEX feed_by_run ON feed(run_id);
    CREATE INDEX turn_by_parent ON turn(parent_id);

    INSERT INTO feed(session_id, seq, kind, run_id, n, detail, created_at)
    SELECT session_id,
           row_number() OVER (PARTITION BY session_id ORDER BY created_at, rank, n),
           kind, run_id, n, detail, created_at
    FROM (
        SELECT t.session_id, 'turnStarted' AS kind, r.id AS run_id, NULL AS n,
               NULL AS detail, t.created_at, 0 AS rank
        FROM turn t JOIN run r ON r.turn_id = t.id
        UNION ALL
        SELECT t.session_id, 'step', s.run_id, s.n, NULL, s.created_at, 1
        FROM step s JOIN run r ON r.id = s.run_id JOIN turn t ON t.id = r.turn_id
        UNION ALL
        SELECT t.session_id, 'event', e.run_id, e.seq, NULL, e.created_at, 1
        FROM event e JOIN run r ON r.id = e.run_id JOIN turn t ON t.id = r.turn_id
        UNION ALL
        SELECT t.session_id, 'turnEnded', r.id, NULL,
               json_object('outcome', r.outcome, 'error', r.error), r.ended_at, 2
        FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.ended_at IS NOT NULL
    );
    """,
    # 7: search over titles, prompts and replies (FTS5), kept by triggers; and where an
    # imported session came from. A session's title is the row -session.rowid, a turn's
    # prompt and reply the row turn.rowid, so each trigger reaches its row by rowid. Prefixes
    # of 2 and 3 characters are indexed: a word being typed is searched as a prefix.
    """
    ALTER TABLE session ADD COLUMN imported_from TEXT;

    CREATE VIRTUAL TABLE search USING fts5(
        title, prompt, reply, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
    );
    INSERT INTO search(rowid, title, prompt, reply) SELECT -rowid, title, '', '' FROM session;
    INSERT INTO search(rowid, title, prompt, reply)
        SELECT t.rowid, '', t.prompt,
               (SELECT coalesce(group_concat(text, ''), '') FROM
                   (SELECT s.text FROM run r JOIN step s ON s.run_id = r.id
                    WHERE r.turn_id = t.id ORDER BY s.n))
        FROM turn t;

    CREATE TRIGGER search_session_insert AFTER INSERT ON session BEGIN
        INSERT INTO search(rowid, title, prompt, reply) VALUES (-new.rowid, new.title, '', '');
    END;
    CREATE TRIGGER search_session_title AFTER UPDATE OF title ON session BEGIN
        UPDATE search SET title = new.title WHERE rowid = -new.rowid;
    END;
    CREATE TRIGGER search_session_delete AFTER DELETE ON session BEGIN
        DELETE FROM search WHERE rowid = -old.rowid;
    END;
    CREATE TRIGGER search_turn_insert AFTER INSERT ON turn BEGIN
        INSERT INTO search(rowid, title, prompt, reply) VALUES (new.rowid, '', new.prompt, '');
    END;
    CREATE TRIGGER search_turn_delete AFTER DELETE ON turn BEGIN
        DELETE FROM search WHERE rowid = old.rowid;
    END;
    CREATE TRIGGER search_step_insert AFTER INSERT ON step BEGIN
        UPDATE search SET reply = reply || new.text
            WHERE rowid = (SELECT t.rowid FROM run r JOIN turn t ON t.id = r.turn_id
                           WHERE r.id = new.run_id);
    END;
    CREATE TRIGGER search_step_delete AFTER DELETE ON step BEGIN
        UPDATE search SET reply = (SELECT coalesce(group_concat(text, ''), '') FROM
                                      (SELECT text FROM step WHERE run_id = old.run_id
                                       ORDER BY n))
            WHERE rowid = (SELECT t.rowid FROM run r JOIN turn t ON t.id = r.turn_id
                           WHERE r.id = old.run_id);
    END;
    """,
    # 8: change sets. ``blob``: text contents, once each by SHA-256, zlib-compressed, whole or
    # as a line delta against ``base`` (another blob). ``change``: a file a step changed, with
    # its content before and after (the SHA-256 and size of every side; the text in ``blob``).
    """
    CREATE TABLE blob (
        sha256 TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        base TEXT REFERENCES blob(sha256),
        depth INTEGER NOT NULL,
        data BLOB NOT NULL
    ) STRICT;

    CREATE TABLE change (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES run(id),
        step INTEGER,
        path TEXT NOT NULL,
        source TEXT NOT NULL,
        before_kind TEXT NOT NULL,
        before_sha256 TEXT,
        before_size INTEGER NOT NULL,
        after_kind TEXT NOT NULL,
        after_sha256 TEXT,
        after_size INTEGER NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT;
    CREATE INDEX change_by_run ON change(run_id, id);
    """,
    # 9: each session's tamper-evident log, computed over the rows already there.
    _session_log,
    # 10: what an older trellisd needs to know to read the store: the oldest schema able to
    # read it, and the version that wrote it (written by ``Database`` after each migration).
    """
    CREATE TABLE store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
    """,
    # 11: the project MCP servers the user approved, by root and exact command line.
    """
    CREATE TABLE mcp_approval (
        root TEXT NOT NULL,
        command_line TEXT NOT NULL,
        approved_at TEXT NOT NULL,
        PRIMARY KEY (root, command_line)
    ) STRICT;
    """,
    # 12: remembered approvals: a grant kept with its session (``scope`` 'session', ``owner``
    # the session's id) or with every session over a folder ('project', the root). A
    # session's grants go with it.
    """
    CREATE TABLE approval_grant (
        scope TEXT NOT NULL CHECK (scope IN ('session', 'project')),
        owner TEXT NOT NULL,
        kind TEXT NOT NULL,
        target TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (scope, owner, kind, target)
    ) STRICT;
    CREATE TRIGGER approval_grant_session_delete AFTER DELETE ON session BEGIN
        DELETE FROM approval_grant WHERE scope = 'session' AND owner = old.id;
    END;
    """,
    # 13: a branch's compactions (events of kind ``compaction``, each on the step that holds
    # the summary), found among the runs of a path without reading their other events.
    """
    CREATE INDEX event_compaction ON event(run_id, step) WHERE kind = 'compaction';
    """,
    # 14: a session's budget (``budgets``): what all its turns together may spend, as JSON
    # ``{"tokens": ..., "usd": ...}``; NULL for none.
    """
    ALTER TABLE session ADD COLUMN budget TEXT;
    """,
    # 15: change sets in the sessions' logs: each change row an entry, logged from now on as
    # it is written; those already there appended to their session's log.
    _log_changes,
    # 16: what an ACP client chose for a session (``acp_choices``): its mode and model, and the
    # requests rejected for good (``reject_always``), by the request's summary. They go with
    # the session.
    """
    CREATE TABLE acp_choice (
        session_id TEXT PRIMARY KEY,
        mode TEXT,
        model TEXT,
        updated_at TEXT NOT NULL
    ) STRICT;
    CREATE TABLE acp_rejection (
        session_id TEXT NOT NULL,
        summary TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, summary)
    ) STRICT;
    CREATE TRIGGER acp_choice_session_delete AFTER DELETE ON session BEGIN
        DELETE FROM acp_choice WHERE session_id = old.id;
        DELETE FROM acp_rejection WHERE session_id = old.id;
    END;
    """,
    # 17: pinned turns (``session/pin``, ``pins``): the turns of a session sent verbatim
    # whatever is compacted. They go with the session. Each pin and unpin is a ``pin`` or
    # ``unpin`` entry of the session's log, which an older reader's tail check passes (their
    # bytes are kept in the log) and only its full ``session/verify`` does not know.
    """
    CREATE TABLE pin (
        session_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, turn_id)
    ) STRICT;
    CREATE TRIGGER pin_session_delete AFTER DELETE ON session BEGIN
        DELETE FROM pin WHERE session_id = old.id;
    END;
    """,
    # 18: recoveries (``recoveries``): the runs whose cancel had to kill a running command
    # (events of kind ``recovery``), found without reading their other events, for a
    # session's pending decision and each turn's ``recovery``.
    """
    CREATE INDEX event_recovery ON event(run_id, seq) WHERE kind = 'recovery';
    """,
    # 19: how many rows of the kinds the log records each session holds (``held``) and how
    # many log entries record such rows (``logged``), kept by triggers as rows and entries are
    # written or deleted, so that a reopen's cheap check compares two numbers instead of
    # counting a long session's rows (``chain.tail_sound``).
    """
    CREATE TABLE log_rows (
        session_id TEXT PRIMARY KEY,
        held INTEGER NOT NULL,
        logged INTEGER NOT NULL
    ) STRICT;
    INSERT INTO log_rows (session_id, held, logged)
        SELECT s.id,
            1 + (SELECT count(*) FROM turn t WHERE t.session_id = s.id)
            + (SELECT count(*) FROM run r JOIN turn t ON t.id = r.turn_id
               WHERE t.session_id = s.id)
            + (SELECT count(*) FROM step x JOIN run r ON r.id = x.run_id
               JOIN turn t ON t.id = r.turn_id WHERE t.session_id = s.id)
            + (SELECT count(*) FROM event x JOIN run r ON r.id = x.run_id
               JOIN turn t ON t.id = r.turn_id WHERE t.session_id = s.id)
            + (SELECT count(*) FROM change x JOIN run r ON r.id = x.run_id
               JOIN turn t ON t.id = r.turn_id WHERE t.session_id = s.id),
            (SELECT count(*) FROM chain c WHERE c.session_id = s.id
             AND c.kind IN ('session', 'turn', 'run', 'step', 'event', 'change'))
        FROM session s;
    CREATE TRIGGER log_rows_session_insert AFTER INSERT ON session BEGIN
        INSERT OR REPLACE INTO log_rows (session_id, held, logged) VALUES (new.id, 1, 0);
    END;
    CREATE TRIGGER log_rows_session_delete AFTER DELETE ON session BEGIN
        DELETE FROM log_rows WHERE session_id = old.id;
    END;
    CREATE TRIGGER log_rows_turn_insert AFTER INSERT ON turn BEGIN
        UPDATE log_rows SET held = held + 1 WHERE session_id = new.session_id;
    END;
    CREATE TRIGGER log_rows_turn_delete AFTER DELETE ON turn BEGIN
        UPDATE log_rows SET held = held - 1 WHERE session_id = old.session_id;
    END;
    CREATE TRIGGER log_rows_run_insert AFTER INSERT ON run BEGIN
        UPDATE log_rows SET held = held + 1 WHERE session_id = (
            SELECT session_id FROM turn WHERE id = new.turn_id
        );
    END;
    CREATE TRIGGER log_rows_run_delete AFTER DELETE ON run BEGIN
        UPDATE log_rows SET held = held - 1 WHERE session_id = (
            SELECT session_id FROM turn WHERE id = old.turn_id
        );
    END;
    CREATE TRIGGER log_rows_step_insert AFTER INSERT ON step BEGIN
        UPDATE log_rows SET held = held + 1 WHERE session_id = (
            SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = new.run_id
        );
    END;
    CREATE TRIGGER log_rows_step_delete AFTER DELETE ON step BEGIN
        UPDATE log_rows SET held = held - 1 WHERE session_id = (
            SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = old.run_id
        );
    END;
    CREATE TRIGGER log_rows_event_insert AFTER INSERT ON event BEGIN
        UPDATE log_rows SET held = held + 1 WHERE session_id = (
            SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = new.run_id
        );
    END;
    CREATE TRIGGER log_rows_event_delete AFTER DELETE ON event BEGIN
        UPDATE log_rows SET held = held - 1 WHERE session_id = (
            SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = old.run_id
        );
    END;
    CREATE TRIGGER log_rows_change_insert AFTER INSERT ON change BEGIN
        UPDATE log_rows SET held = held + 1 WHERE session_id = (
            SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = new.run_id
        );
    END;
    CREATE TRIGGER log_rows_change_delete AFTER DELETE ON change BEGIN
        UPDATE log_rows SET held = held - 1 WHERE session_id = (
            SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = old.run_id
        );
    END;
    CREATE TRIGGER log_rows_chain_insert AFTER INSERT ON chain
    WHEN new.kind IN ('session', 'turn', 'run', 'step', 'event', 'change') BEGIN
        UPDATE log_rows SET logged = logged + 1 WHERE session_id = new.session_id;
    END;
    CREATE TRIGGER log_rows_chain_delete AFTER DELETE ON chain
    WHEN old.kind IN ('session', 'turn', 'run', 'step', 'event', 'change') BEGIN
        UPDATE log_rows SET logged = logged - 1 WHERE session_id = old.session_id;
    END;
    """,
    # 20: what each step cost in USD (``costs``), priced as it commits with its run's model;
    # NULL when that model's price, or a token figure the price needs, is unknown. A turn's
    # cost is the sum of its steps'. Older readers ignore the column; the steps already there
    # are priced once, in the same transaction, by the build that adds it (``costs.fill``).
    """
    ALTER TABLE step ADD COLUMN cost REAL;
    """,
    # 21: the changes a command may share with another session's (``changes``): a path a
    # command of another session, running at the same time in the same work tree, changed too,
    # or that another session's file tool wrote then. Each mark names that other session and
    # turn; a mark goes with its change. Not in the log: a mark only makes a restore ask first.
    """
    CREATE TABLE change_share (
        change_id INTEGER NOT NULL REFERENCES change(id) ON DELETE CASCADE,
        session_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        PRIMARY KEY (change_id, session_id, turn_id)
    ) STRICT;
    """,
    # 22: the git worktrees the daemon made for sessions (``worktrees``), one row per folder,
    # written before each git step that makes or removes one (``state``: ``creating``,
    # ``ready`` or ``removing``, by ``daemon_id``), so that a start after a crash adopts or
    # prunes what it finds. ``session_id`` is NULL until the session is made, in the same
    # transaction that makes the row ``ready``. Older readers ignore the table.
    """
    CREATE TABLE worktree (
        path TEXT PRIMARY KEY,
        session_id TEXT UNIQUE,
        checkout TEXT NOT NULL,
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('creating', 'ready', 'removing')),
        daemon_id TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT;
    """,
    # 23: the session each child session was started from (the ``task`` tool, ``parents``);
    # a session a person opened has no row. Not in the log: the child's own log is whole.
    """
    CREATE TABLE session_parent (
        session_id TEXT PRIMARY KEY REFERENCES session(id) ON DELETE CASCADE,
        parent_session_id TEXT NOT NULL
    ) STRICT;
    CREATE INDEX session_parent_of ON session_parent(parent_session_id);
    """,
)
COSTED = 20
"""The schema whose steps carry their cost: a store migrated past it has its older steps
priced (``costs.fill``)."""
