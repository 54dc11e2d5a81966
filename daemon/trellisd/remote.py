"""``trellisd --remote HOST`` (and ``trellisd acp --remote HOST``): the editor's window served by
trellisd on another machine, over SSH. The ``ssh`` client runs ``trellisd`` there and carries
the editor's stdin and stdout to it untouched: the session's root, its tools, the store and
the shared daemon are all the remote machine's.

    options     the command line's ``--remote``, ``--remote-trellisd`` and ``--ssh-option``
    Remote      what to run where, read once from the command line and the environment
    ssh_argv    the ssh command line: no tty, no escape character, never a prompt on the
                editor's pipes, a dead link noticed, the remote command shell-quoted
    run_remote  ssh started on this process's stdin and stdout; its exit status, with one
                line on stderr when ssh could not be found or could not connect

ssh's own messages go to a file of their own (``-E``), not to stderr, so that a failure is
said in one line of trellisd's, and what the remote ``trellisd`` writes on stderr (its log)
reaches the editor's as it is.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rest is imported by run_remote: the command line's parser needs none
    import subprocess

# Never a prompt on the editor's pipes (a password, a host key to accept), no tty, no
# escape character (``~.`` in the stream must not end it), and a dead link noticed within
# 45 seconds rather than at the next TCP timeout. The user's options come before these on
# the command line, and ssh takes the first value it is given: theirs win.
SSH_OPTIONS = (
    "-T",
    "-e",
    "none",
    "-o",
    "BatchMode=yes",
    "-o",
    "ServerAliveInterval=15",
    "-o",
    "ServerAliveCountMax=3",
)

# The window's model settings, taken to the remote trellisd on its command line (``env``)
# so that an editor's ``env`` for trellisd means the same there. Never the keys: a command
# line is visible to every user of the remote machine. The key comes from the remote
# machine's own settings or the editor's ``initializationOptions``.
FORWARDED = (
    "TRELLISD_PROVIDER",
    "TRELLISD_MODEL",
    "TRELLISD_BASE_URL",
    "TRELLISD_TEMPERATURE",
    "TRELLISD_MAX_TOKENS",
    "TRELLISD_MAX_RETRIES",
    "TRELLISD_RETRY_BUDGET",
    "TRELLISD_READ_TIMEOUT",
    "TRELLISD_MODELS",
    "TRELLISD_CONTEXT_WINDOW",
    "OPENROUTER_MODEL",
)

# ssh says why it failed in its last lines; the rest is not kept.
KEPT_LINES = 20

CONNECTION_FAILED = 255  # ssh's own exit status when it could not connect or lost the link


def add_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """``--remote``, ``--remote-trellisd`` and ``--ssh-option``, on the top-level parser
    (``defaults``) and on ``serve`` and ``acp`` (whose copies do not override a value given
    before the command)."""

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--remote",
        metavar="HOST",
        default=default(None),
        help="serve this window from trellisd on HOST over ssh: the root, tools and store are"
        " HOST's (TRELLISD_SSH: the ssh command and its options)",
    )
    parser.add_argument(
        "--remote-trellisd",
        metavar="COMMAND",
        default=default("trellisd"),
        help="the command that runs trellisd on HOST, split into words as a shell would"
        " (default: trellisd, found on HOST's PATH)",
    )
    parser.add_argument(
        "--ssh-option",
        metavar="OPTION",
        action="append",
        default=default([]),
        help="an ssh -o option for the connection to HOST, e.g. Port=2222 (repeatable)",
    )


@dataclass(frozen=True)
class Remote:
    """A window served on ``host``: ``command`` is ``serve`` or ``acp``; ``ssh`` the local
    ssh command and its options; ``trellisd`` the words that run trellisd on the host;
    ``arguments`` what that trellisd is given; ``forwarded`` the model settings it is
    started with."""

    host: str
    command: str
    ssh: tuple[str, ...]
    trellisd: tuple[str, ...]
    arguments: tuple[str, ...]
    forwarded: tuple[tuple[str, str], ...]


def remote_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> Remote:
    """The window ``args`` asks for, or ``ValueError`` naming what cannot be used. ``--db``
    is the host's path, passed on as written (``~`` is the host's home)."""
    host = args.remote.strip()
    if not host or host.startswith("-"):
        raise ValueError(f"--remote needs a host name, not {args.remote!r}")
    try:
        trellisd = tuple(shlex.split(args.remote_trellisd))
    except ValueError as exc:
        raise ValueError(f"--remote-trellisd cannot be split into words: {exc}") from None
    if not trellisd:
        raise ValueError("--remote-trellisd names no command")
    raw_ssh = env.get("TRELLISD_SSH", "").strip() or "ssh"
    try:
        ssh = tuple(shlex.split(raw_ssh))
    except ValueError as exc:
        raise ValueError(f"TRELLISD_SSH cannot be split into words: {exc}") from None
    for option in args.ssh_option:
        ssh += ("-o", option)
    arguments: list[str] = [args.command]
    if args.db:
        arguments += ["--db", args.db]
    arguments += ["--log-level", args.log_level]
    if args.standalone:
        arguments.append("--standalone")
    forwarded = tuple((name, env[name]) for name in FORWARDED if env.get(name))
    return Remote(host, args.command, ssh, trellisd, tuple(arguments), forwarded)


def remote_command(remote: Remote) -> str:
    """The command the host's shell runs, each word quoted for it."""
    words = list(remote.trellisd) + list(remote.arguments)
    if remote.forwarded:
        words = ["env", *(f"{name}={value}" for name, value in remote.forwarded), *words]
    return shlex.join(words)


def ssh_argv(remote: Remote, log: str | None = None) -> list[str]:
    """ssh's command line; ``log``: where ssh writes its own messages (``-E``)."""
    own_log = ["-E", log] if log is not None else []
    return [*remote.ssh, *SSH_OPTIONS, *own_log, "--", remote.host, remote_command(remote)]


def run_remote(remote: Remote) -> int:
    """Serve the window over ssh: ssh gets this process's stdin and stdout as they are, and
    its exit status is returned (the remote trellisd's). ssh missing is said in one line
    (2); ssh that could not connect or lost the link (255), in one line with ssh's reason
    (1). SIGTERM, SIGINT and SIGHUP sent here go to ssh."""
    import contextlib
    import shutil
    import signal
    import subprocess
    import tempfile

    program = remote.ssh[0]
    if shutil.which(program) is None:
        print(
            f"trellisd: --remote needs the ssh client, and {program!r} is not found"
            " (install OpenSSH's client, or name it in TRELLISD_SSH)",
            file=sys.stderr,
            flush=True,
        )
        return 2
    # ssh closes every descriptor past stderr as it starts: its messages go to a file.
    log_fd, log = tempfile.mkstemp(prefix="trellisd-ssh-", suffix=".log")
    os.close(log_fd)
    try:
        try:
            ssh = subprocess.Popen(ssh_argv(remote, log))
        except OSError as exc:
            print(f"trellisd: cannot start {program}: {exc.strerror}", file=sys.stderr, flush=True)
            return 2
        _let_go_of_stdio()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda number, _frame: _send(ssh, number))
        code = ssh.wait()
        said = _ssh_lines(log)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(log)
    if code == CONNECTION_FAILED:
        reason = said[-1] if said else "ssh said nothing more"
        print(
            f"trellisd: the ssh connection to {remote.host} failed: {reason}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    if code < 0:
        name = signal.Signals(-code).name
        print(f"trellisd: ssh to {remote.host} ended by {name}", file=sys.stderr, flush=True)
        return 1
    return code  # what else ssh said of a connection that worked is of no use now


def _let_go_of_stdio() -> None:
    """ssh holds the editor's pipes now: this process's copies point elsewhere, so the
    editor sees the end of stdout when ssh ends, whatever becomes of this process."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def _send(ssh: subprocess.Popen[bytes], signum: int) -> None:
    if ssh.returncode is None:
        try:
            ssh.send_signal(signum)
        except ProcessLookupError:
            pass  # it has just ended: its status is read next


def _ssh_lines(log: str) -> list[str]:
    """ssh's own messages: the last ``KEPT_LINES`` non-empty lines of its log."""
    try:
        with open(log, "rb") as file:
            lines = file.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if line.strip()][-KEPT_LINES:]


def _text(line: bytes) -> str:
    return line.decode("utf-8", "replace").strip()
