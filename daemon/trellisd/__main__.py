"""The ``trellisd`` command: the daemon on stdio (``serve``, the default) or ``demo``."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from . import PROTOCOL_VERSION, __version__
from .config import db_path, provider_from_env

DESCRIPTION = """\
trellisd: a coding-agent daemon that editors start over stdio and talk to in JSON-RPC
(LSP base protocol framing). It keeps durable, branchable conversations in one SQLite file.

commands:
  serve   the daemon on stdin/stdout (the default when no command is given)
  demo    start a daemon subprocess and drive it over the protocol, printing what happens

environment:
  TRELLISD_DB          the store (default $XDG_DATA_HOME/trellisd/trellisd.db)
  TRELLISD_PROVIDER    openai | anthropic | openrouter | scripted
  TRELLISD_BASE_URL    the provider's endpoint (OpenAI style ends in /v1)
  TRELLISD_API_KEY     the provider's key (else OPENAI_API_KEY, ANTHROPIC_API_KEY, ...)
  TRELLISD_MODEL       the model name
  TRELLISD_SCRIPT      JSON-lines replies for the scripted provider
  TRELLISD_LOG         log level on stderr (default warning)
  TRELLISD_HEARTBEAT   seconds between the daemon's heartbeats in the store (default 2)
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trellisd",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "command",
        nargs="?",
        choices=("serve", "demo"),
        default="serve",
        help="what to run (default: serve)",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help="the SQLite store; created on first use with its parent folders"
        " (default: $TRELLISD_DB, else $XDG_DATA_HOME/trellisd/trellisd.db)",
    )
    p.add_argument(
        "--log-level",
        default=os.environ.get("TRELLISD_LOG", "warning"),
        choices=("debug", "info", "warning", "error"),
        help="how much the daemon logs to stderr (never stdout; default warning)",
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"trellisd {__version__} (protocol {PROTOCOL_VERSION})",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="trellisd %(levelname)s %(name)s: %(message)s",
    )
    if args.log_level != "debug":
        # pygls logs every error answer with its traceback; the answer itself says enough.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)
    if args.command == "demo":
        from .demo import run_demo

        sys.exit(run_demo(args.db))
    try:
        settings = provider_from_env(os.environ)
    except ValueError as exc:
        print(f"trellisd: {exc}", file=sys.stderr)
        sys.exit(2)
    from .server import build_server

    server = build_server(str(db_path(args.db, os.environ)), settings)
    server.start_io()


if __name__ == "__main__":
    main()
