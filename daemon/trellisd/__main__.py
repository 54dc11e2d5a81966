"""The ``trellisd`` command. What an editor starts (``trellisd``, ``trellisd serve``, with
``--db`` and ``--log-level``) attaches the window to the store's shared daemon and imports the
standard library's lightest modules only; any other command line is the full one of ``cli``."""

from __future__ import annotations

import os
import sys

from .edge import end_process


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        from .forward import attach_command, serve_arguments

        plain = serve_arguments(args, os.environ)
        if plain is not None:
            attach_command(*plain)
        from .cli import run

        run(args)
    except KeyboardInterrupt:
        # Ctrl-C in a terminal before the daemon serves (once it does, it ends as on
        # ``exit``): no traceback, and the process ends at once; a store it had begun to
        # open is left as after a crash, which the next daemon handles.
        sys.stderr.flush()
        end_process(130)


if __name__ == "__main__":
    main()
