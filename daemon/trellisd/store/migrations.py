"""Numbered forward migrations; ``PRAGMA user_version`` is how many have been applied.

Append new steps; never edit one that has shipped.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
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
    # 6: change sets. ``blob``: text contents, once each by SHA-256, zlib-compressed, whole or
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
)
