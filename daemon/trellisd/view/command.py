"""``trellisd view`` and ``trellisd report``: the store opened here (no daemon needed), the
view served until Ctrl-C, or written as one file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from ..config_file import Settings

VIEW_DESCRIPTION = """\
Serve a read-only page of the store's sessions (or of SESSION) on 127.0.0.1 until Ctrl-C, and
print its URL. The URL carries a one-time token: the browser that opens it first gets a
cookie, and nothing else is let in. A running daemon goes on; the page reads the store.
"""

REPORT_DESCRIPTION = """\
Write SESSION as one self-contained HTML file: every turn, its steps, tool calls, refusals,
steers and diffs, the plan, the spending and the log's verification, with no script, style or
font from anywhere else. The file is written atomically.
"""


def arguments(command: argparse.ArgumentParser, name: str) -> None:
    """``view``'s or ``report``'s own arguments."""
    if name == "view":
        command.add_argument("session_id", metavar="SESSION", nargs="?", help="open its page")
        command.add_argument(
            "--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)"
        )
    else:
        command.add_argument("session_id", metavar="SESSION")
        command.add_argument("-o", "--output", metavar="FILE.html", required=True)


def main(args: argparse.Namespace, db: Path, settings: Settings) -> int:
    """Run ``trellisd view`` or ``report``; the exit status. A mistake is one line on stderr
    and status 1 (2 for a port that cannot be used)."""
    import asyncio

    from ..errors import TrellisError

    try:
        if args.command == "view":
            return asyncio.run(_serve(db, settings, args.session_id, args.port))
        return asyncio.run(_report(db, settings, args.session_id, Path(args.output)))
    except TrellisError as exc:
        print(f"trellisd {args.command}: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"trellisd {args.command}: {exc}", file=sys.stderr)
        return 2 if args.command == "view" else 1


async def _serve(db: Path, settings: Settings, session_id: str | None, port: int) -> int:
    import asyncio
    import signal

    from .reader import opened
    from .server import ViewServer

    async with opened(db, settings) as reader:
        path = "/"
        if session_id is not None:
            path = f"/s/{(await reader.session(session_id)).session_id}"
        server = ViewServer(reader, port)
        await server.start()
        try:
            print(server.url(path), flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
        finally:
            await server.close()
    return 0


async def _report(db: Path, settings: Settings, session_id: str, output: Path) -> int:
    from ..store.archive import atomic_file
    from . import pages
    from .reader import opened

    output = output.expanduser().absolute()
    if not output.parent.is_dir():
        raise OSError(f"the folder of {output} does not exist")
    async with opened(db, settings) as reader:
        session = await reader.session(session_id)
        turns = await reader.turns(session.session_id)
        details = {t.turn_id: await reader.detail_of(t) for t in turns}
        verdict = await reader.verify(session.session_id)
    html = pages.session_page(session, turns, details, verdict)
    with atomic_file(output) as out:  # the whole report or the file as it was
        out.write(html.encode("utf-8"))
    print(
        f"wrote session {session.session_id}: {len(turns)} turns, {len(html):,} characters"
        f" to {output}"
    )
    return 0
