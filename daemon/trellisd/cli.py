"""The ``trellisd`` command line, whole: an editor's connection to the store's shared daemon
(``serve``, the default; ``--standalone`` for a daemon of its own), the shared daemon itself, its
``status`` and ``stop``, ``doctor`` (what of the walls works here), the ``demo``, ``export``
and ``import`` of a session file for scripts and backups, and ``run``: one turn with nobody
at an editor (``headless``).

Mistakes in the command line or the environment end the command before anything starts, with
one line on stderr saying what to change and exit code 2. (``__main__`` serves the plain
command line an editor starts without importing this module.)
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from . import PROTOCOL_VERSION, __version__, remote
from .build import build
from .rendezvous import shared_mode, store_file
from .view.command import REPORT_DESCRIPTION, VIEW_DESCRIPTION

if TYPE_CHECKING:
    from .config_file import Settings
    from .headless import HeadlessRun

DESCRIPTION = """\
trellisd: a coding-agent daemon that editors start over stdio and talk to in JSON-RPC
(LSP base protocol framing). It keeps durable, branchable conversations in one SQLite file.

environment:
  TRELLISD_DB          the store (default $XDG_DATA_HOME/trellisd/trellisd.db)
  TRELLISD_PROVIDER    openai | anthropic | openrouter | openai-responses | scripted
  TRELLISD_BASE_URL    the provider's endpoint (OpenAI style ends in /v1)
  TRELLISD_API_KEY     the provider's key (else OPENAI_API_KEY, ANTHROPIC_API_KEY, ...)
  TRELLISD_MODEL       the model name
  TRELLISD_SCRIPT      JSON-lines replies for the scripted provider
  TRELLISD_LOG         log level on stderr (default warning)
  TRELLISD_HEARTBEAT   seconds between the daemon's heartbeats in the store (default 2)
  TRELLISD_SHARED      0: every editor window gets a daemon of its own (as --standalone)
  TRELLISD_IDLE_EXIT   seconds the shared daemon waits with no window and no turn before it
                       exits (default 600)
  TRELLISD_HELLO_TIMEOUT  seconds a connection to the shared daemon has to say its first
                       line (default 30)
  TRELLISD_MODELS      for `trellisd acp`: more models for the client's model picker
                       (comma-separated)
  TRELLISD_CONTEXT_WINDOW  for `trellisd acp`: the context size usage is shown against
                       (default 128000)
  TRELLISD_PASS_ENV    secret-looking variables commands may see (comma-separated)
  TRELLISD_SSH         with --remote: the ssh command and its options (default ssh)

config file: $XDG_CONFIG_HOME/trellisd/config.toml (else ~/.config/trellisd/config.toml);
the environment overrides it. `trellisd config` shows what is in effect.
"""

SERVE_DESCRIPTION = """\
Serve the trellisd protocol on stdin/stdout until the editor sends exit or closes stdin.
An editor starts this; a person in a terminal wants `trellisd demo`.

Every window of a user is served by one shared daemon per store, which this command attaches
to (starting it in the background when none runs): windows share live sessions, and a turn
goes on when the window that started it closes. --standalone (or TRELLISD_SHARED=0) serves
this window from a daemon of its own, in this process, as long as the editor is connected.
"""

ACP_DESCRIPTION = """\
Serve the Agent Client Protocol (v1, newline-delimited JSON-RPC) on stdin/stdout, for Zed,
the JetBrains IDEs, codecompanion.nvim and other ACP clients. Its sessions are the store's:
a session started here continues in the native protocol, and the other way round. Writes and
commands ask the editor first (the ACP mode `ask`) unless the editor picks another mode.
It attaches to the store's shared daemon as `trellisd` does (TRELLISD_SHARED=0 serves it in
this process instead), so its sessions' turns are followed live in every window of the user.
"""

DAEMON_DESCRIPTION = """\
The shared daemon of a store, serving windows over a Unix socket under $XDG_RUNTIME_DIR/trellisd.
`trellisd` starts it when a window needs it; it exits by itself after TRELLISD_IDLE_EXIT seconds
with no window and no turn running.
"""

STATUS_DESCRIPTION = """\
Which shared daemon serves which store: its pid, its windows, the sessions they follow and the
turns running.
"""

STOP_DESCRIPTION = """\
Ask the store's shared daemon to exit once its running turns have ended, and wait until it
has. Its windows are told; starting trellisd again starts a new daemon.
"""

DEMO_DESCRIPTION = """\
A tour of trellisd, offline, in a few seconds: it starts a real daemon process and drives it
over the protocol as an editor would. A built-in scripted model reads a file, asks to edit it
(the tour approves), takes a steer, is cancelled, branches, and a second daemon process
reopens the session. The folder it works in is removed at the end. Exit status 1 if any
claim the tour checks did not hold.
"""


CONFIG_DESCRIPTION = """\
Print the settings a daemon started here would use, and where each came from: the built-in
default, the config file ($XDG_CONFIG_HOME/trellisd/config.toml, else
~/.config/trellisd/config.toml) or a variable of the environment. Keys are never shown. A
config file with a mistake is named, with its line and key, and the exit status is 2.
"""

DOCTOR_DESCRIPTION = """\
Say what of the walls around the programs the model runs works on this machine, and why not:
bubblewrap, user, pid and network namespaces, each mode's walls built for real, how a fork
bomb is bounded, the Landlock ABI, and what builds the walls here (bubblewrap, else Landlock's
weaker walls). The exit status is 0 when the default walls (workspace-write, no network) can be
built, 1 when they cannot (commands would then not run unless policy.sandbox is "off").
"""

EXPORT_DESCRIPTION = """\
Write a session's whole tree (every turn, run, step and event, its policy) to FILE as one
self-checking trellisd-session file, atomically: FILE is the whole export or as it was.
The store is opened directly; no daemon is needed, and a running one goes on.
"""

RUN_DESCRIPTION = """\
Run one turn with nobody at an editor (a CI job, a cluster job): in a new session over --root
(default: the current folder) or in --session's, through the store at --db, in this process.
The model's text streams to stderr; --json prints one result object on stdout. What the turn
would ask a person is refused, unless --approval all allows it once.

exit codes:
  0    finished (with --verify: the check passed)
  1    error: the provider, the store or the session failed (or the export)
  2    bad usage: nothing ran
  3    --verify never passed before the steps ran out
  4    exhausted: the budget (--budget-usd) or, without --verify, the steps ran out
  130  cancelled by Ctrl-C or SIGTERM (recorded; a second one stops at once)
"""

IMPORT_DESCRIPTION = """\
Read a trellisd-session file into the store, all or nothing: a damaged, cut-short or foreign
file is refused with the line and the check that failed, and leaves nothing behind. A
session the store already has is refused unless --as-new. Prints the session's id.
"""


class UsageError(Exception):
    """A mistake in the command line or environment: one line, exit code 2."""


SERVE_DB = "(default: $TRELLISD_DB, else $XDG_DATA_HOME/trellisd/trellisd.db)"
DEMO_DB = "(default: a file in the tour's temporary folder, removed at the end)"
VIEW_COMMANDS = (
    ("view", "a session in the browser (read-only, 127.0.0.1)", VIEW_DESCRIPTION, SERVE_DB),
    ("report", "a session as one self-contained HTML file", REPORT_DESCRIPTION, SERVE_DB),
)


def _shared_options(defaults: bool, db_default: str) -> argparse.ArgumentParser:
    """--db and --log-level, accepted before and after the command. The command's own copy
    has no defaults, so it does not override a value given before the command."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument(
        "--db",
        metavar="PATH",
        default=None if defaults else argparse.SUPPRESS,
        help=(
            f"the SQLite store; created on first use with its parent folders {db_default};"
            " :memory: keeps it in the daemon's memory, gone when the daemon exits"
        ),
    )
    shared.add_argument(
        "--log-level",
        default=os.environ.get("TRELLISD_LOG", "warning") if defaults else argparse.SUPPRESS,
        choices=("debug", "info", "warning", "error"),
        help="how much the daemon logs to stderr (never stdout; default warning)",
    )
    return shared


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trellisd",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_shared_options(defaults=True, db_default=SERVE_DB)],
        usage=(
            "%(prog)s [serve | acp | status | stop | config | doctor | demo | export | import"
            " | run | view | report]"
            " [--db PATH]"
            " [--log-level LEVEL]"
            " [--standalone] [--remote HOST] [-h] [--version]"
        ),
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"trellisd {build()} (protocol {PROTOCOL_VERSION})",
    )
    standalone = "serve this window from a daemon of its own, in this process"
    p.add_argument("--standalone", action="store_true", help=standalone)
    remote.add_options(p, defaults=True)
    commands = p.add_subparsers(
        title="commands",
        dest="command",
        metavar="{serve,acp,status,stop,config,doctor,demo,export,import,run,view,report}",
    )
    commands.default = "serve"
    for name, summary, description, db_default in (
        ("serve", "the daemon on stdin/stdout (the default)", SERVE_DESCRIPTION, SERVE_DB),
        ("acp", "an Agent Client Protocol agent on stdin/stdout", ACP_DESCRIPTION, SERVE_DB),
        ("daemon", argparse.SUPPRESS, DAEMON_DESCRIPTION, SERVE_DB),
        ("status", "which shared daemon serves which store", STATUS_DESCRIPTION, SERVE_DB),
        ("stop", "ask the store's shared daemon to exit", STOP_DESCRIPTION, SERVE_DB),
        ("config", "the effective settings and where each came from", CONFIG_DESCRIPTION, SERVE_DB),
        ("doctor", "what of the walls around programs works here", DOCTOR_DESCRIPTION, SERVE_DB),
        (
            "demo",
            "a tour of trellisd: a daemon driven over the protocol, offline",
            DEMO_DESCRIPTION,
            DEMO_DB,
        ),
        ("export", "write a session to a file", EXPORT_DESCRIPTION, SERVE_DB),
        ("import", "read a session from a file into the store", IMPORT_DESCRIPTION, SERVE_DB),
        ("run", "one turn with nobody at an editor, for CI", RUN_DESCRIPTION, SERVE_DB),
        *VIEW_COMMANDS,
    ):
        command = commands.add_parser(
            name,
            prog=f"trellisd {name}",
            help=summary,
            description=description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[_shared_options(defaults=False, db_default=db_default)],
        )
        if name in ("serve", "acp"):
            command.add_argument(
                "--standalone", action="store_true", default=argparse.SUPPRESS, help=standalone
            )
            remote.add_options(command, defaults=False)
        if name == "daemon":
            command.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
            command.add_argument("--socket", default=None, help=argparse.SUPPRESS)
        if name == "export":
            command.add_argument("session_id", metavar="SESSION_ID")
            command.add_argument("file", metavar="FILE", help="the file to write")
        if name == "import":
            command.add_argument("file", metavar="FILE", help="a trellisd-session file")
            command.add_argument(
                "--root", metavar="DIR", help="the session's folder here, instead of the file's"
            )
            command.add_argument(
                "--as-new",
                action="store_true",
                help="new ids for the session, its turns and runs (a copy beside the original)",
            )
        if name == "run":
            run_arguments(command)
        if name in ("view", "report"):
            from .view.command import arguments as view_arguments

            view_arguments(command, name)
    return p


def run_arguments(command: argparse.ArgumentParser) -> None:
    """``trellisd run``'s own arguments."""
    command.add_argument("prompt", metavar="PROMPT", help="what to ask the model")
    where = command.add_mutually_exclusive_group()
    where.add_argument("--root", metavar="DIR", help="the new session's folder (default: here)")
    where.add_argument("--session", metavar="ID", help="continue this session instead")
    command.add_argument(
        "--verify",
        metavar="CMD",
        help="the check that must pass (exit 0) for the turn to end; split into words as a"
        " shell would, run without one, in the root",
    )
    command.add_argument(
        "--max-steps", metavar="N", type=int, help="at most N steps (default TRELLISD_MAX_STEPS)"
    )
    command.add_argument("--budget-usd", metavar="X", type=float, help="what the turn may spend")
    command.add_argument(
        "--approval",
        choices=("never", "all"),
        default="never",
        help="what a person would answer when the turn asks: never (refuse; the default) or"
        " all (allow each once)",
    )
    command.add_argument("--export", metavar="FILE", help="write the session to FILE at the end")
    command.add_argument(
        "--worktree",
        metavar="NAME",
        nargs="?",
        const=True,
        help="work in a new git worktree of the root's repository, on branch trellisd/NAME"
        " (a short name made up when NAME is left out)",
    )
    command.add_argument(
        "--json", action="store_true", help="print one result object on stdout at the end"
    )


def store_path(cli_value: str | None, env: Mapping[str, str]) -> Path:
    """The store the daemon will open, refused at once when it cannot be a database file."""
    try:
        return Path(store_file(cli_value, env))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def environment_settings(env: Mapping[str, str]) -> Settings:
    """Every setting, read here once: the config file's with the environment's over them,
    and the daemon process's own (``daemon_settings``); a mistake in either is a
    ``UsageError`` (the daemon does not start half-configured)."""
    import dataclasses

    from .config_file import load_settings
    from .daemon_settings import read_daemon_settings

    try:
        return dataclasses.replace(load_settings(env), daemon=read_daemon_settings(env))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def config_report(settings: Settings) -> str:
    """``trellisd config``: every setting, its value (keys never shown) and where it came
    from."""
    rows = settings.describe()
    width = max(len(key) for key, _, _ in rows)
    value_width = min(40, max(len(value) for _, value, _ in rows))
    lines = [f"config file  {settings.file or '(none: built-in defaults and environment)'}"]
    lines += [f"{key:<{width}}  {value:<{value_width}}  {source}" for key, value, source in rows]
    return "\n".join(lines)


def configure_logging(level: str) -> None:
    import logging

    class _NotSqliteLog(logging.Filter):
        """SQLite's own log lines (``SQLITE_LOG: ...``) repeat what the store error then says
        in words; they are shown at debug level only."""

        def filter(self, record: logging.LogRecord) -> bool:
            return not hasattr(record, "sqlite_code")

    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="trellisd %(levelname)s %(name)s: %(message)s",
    )
    if level != "debug":
        for handler in logging.getLogger().handlers:
            handler.addFilter(_NotSqliteLog())
        # pygls logs every error answer with its traceback; the answer itself says enough.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)


def run(argv: list[str] | None) -> None:
    args = parser().parse_args(argv)
    try:
        if args.remote is not None and args.command not in ("serve", "acp"):
            raise UsageError(
                f"--remote serves an editor's window (serve, acp); run {args.command} on"
                f" {args.remote} itself: ssh {args.remote} trellisd {args.command}"
            )
        if args.command in ("status", "stop"):
            from . import forward

            if args.command == "status":
                sys.exit(forward.status(os.environ, sys.stdout))
            sys.exit(forward.stop(str(store_path(args.db, os.environ)), os.environ, sys.stdout))
        if args.command in ("serve", "acp") and args.remote is not None:
            # Served on another machine: its --db is that machine's, not checked here.
            sys.exit(remote.run_remote(remote.remote_from_args(args, os.environ)))
        if args.command == "serve" and shared_mode(args.standalone, os.environ):
            path = store_path(args.db, os.environ)
            from .forward import TTY_HINT, attach

            if sys.stdin.isatty():
                print(TTY_HINT.format(version=__version__), end="", file=sys.stderr, flush=True)

            attach(str(path), os.environ, args.log_level)
        if args.command == "acp" and shared_mode(args.standalone, os.environ):
            from .forward import attach

            attach(str(store_path(args.db, os.environ)), os.environ, args.log_level, "acp")
        configure_logging(args.log_level)
        settings = environment_settings(os.environ)
        if args.command == "config":
            print(config_report(settings))
            sys.exit(0)
        if args.command == "doctor":
            from .sandbox.doctor import main as doctor

            sys.exit(doctor())
        if args.command == "demo":
            from .demo import run_demo

            sys.exit(run_demo(str(store_path(args.db, {})) if args.db else None, os.environ))
        path = store_path(args.db, os.environ)
        if args.command in ("export", "import"):
            print(archive_command(args, path, settings))
            sys.exit(0)
        if args.command == "run":
            headless = run_request(args)
        if args.command in ("view", "report"):  # the session in the browser, or as one file
            from .view.command import main as view_main

            sys.exit(view_main(args, path, settings))
        if args.command == "daemon":
            from .rendezvous import Place
            from .shared import hello_seconds, idle_exit_seconds

            idle_exit = idle_exit_seconds(os.environ)
            hello_timeout = hello_seconds(os.environ)
            socket_path = args.socket or Place(str(path), os.environ).socket
    except (UsageError, ValueError) as exc:
        print(f"trellisd: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.command == "acp":
        from .acp import serve_stdio as serve_acp

        serve_acp(str(path), settings)
        return
    if args.command == "run":
        from .headless import run_headless

        sys.exit(run_headless(path, settings, headless, args.json))
    if args.command == "daemon":
        from .shared import serve_shared

        serve_shared(str(path), settings, args.ready_fd, idle_exit, hello_timeout, socket_path)
        return
    if sys.stdin.isatty():
        from .forward import TTY_HINT

        print(TTY_HINT.format(version=__version__), end="", file=sys.stderr, flush=True)
    from .server import serve_stdio

    serve_stdio(str(path), settings)


def run_request(args: argparse.Namespace) -> HeadlessRun:
    """``trellisd run``'s command line as the run it asks for; a ``UsageError`` naming the
    argument that cannot be used."""
    import math
    import shlex

    from .headless import HeadlessRun
    from .wire import MAX_STEPS

    if not args.prompt.strip():
        raise UsageError("run: PROMPT must not be empty")
    root = None
    if args.root is not None:
        root = Path(args.root).expanduser().absolute()
        if not root.is_dir():
            raise UsageError(f"run: --root {args.root} is not an existing folder")
    verify: list[str] = []
    if args.verify is not None:
        try:
            verify = shlex.split(args.verify)
        except ValueError as exc:
            raise UsageError(f"run: --verify cannot be split into words: {exc}") from exc
        if not verify:
            raise UsageError("run: --verify names no command")
    if args.max_steps is not None and not 1 <= args.max_steps <= MAX_STEPS:
        raise UsageError(f"run: --max-steps must be from 1 to {MAX_STEPS}")
    usd = args.budget_usd
    if usd is not None and not (math.isfinite(usd) and usd > 0):
        raise UsageError("run: --budget-usd must be more than 0")
    export = None
    if args.export is not None:
        export = Path(args.export).expanduser().absolute()
        if not export.parent.is_dir():
            raise UsageError(f"run: the folder of --export {args.export} does not exist")
    if args.worktree is not None and args.session is not None:
        raise UsageError("run: --worktree makes a new session; it cannot go with --session")
    return HeadlessRun(
        args.prompt,
        root,
        args.session,
        tuple(verify),
        args.max_steps,
        usd,
        args.approval,
        export,
        args.worktree,
    )


def archive_command(args: argparse.Namespace, db: Path, settings: Settings) -> str:
    """``trellisd export`` or ``import`` on the store at ``db``, opened here: the same
    service as ``session/export`` and ``session/import``. The one-line summary, or a
    ``UsageError`` saying what went wrong."""
    import asyncio

    from .errors import TrellisError
    from .processes import pid_alive
    from .services.archive import ArchiveService
    from .store.facade import AsyncStore

    async def run_it() -> str:
        daemon = settings.daemon
        store = await AsyncStore.open(db, pid_alive, daemon.config_folder, daemon.stale_seconds)
        try:
            archive = ArchiveService(store)
            if args.command == "export":
                done = await archive.export(args.session_id, os.path.abspath(args.file))
                return (
                    f"exported session {args.session_id}: {done.turns} turns,"
                    f" {done.bytes} bytes to {done.path}"
                )
            root = None if args.root is None else os.path.abspath(args.root)
            session = await archive.import_(os.path.abspath(args.file), root, args.as_new)
            origin = session.imported_from
            copied = origin is not None and origin.session_id != session.session_id
            copy = f" as a copy of {origin.session_id}" if origin and copied else ""
            return f"imported session {session.session_id}{copy} over {session.root}"
        finally:
            await store.close()

    try:
        return asyncio.run(run_it())
    except TrellisError as exc:
        raise UsageError(exc.message) from exc
