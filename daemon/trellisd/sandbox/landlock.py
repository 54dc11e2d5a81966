"""Landlock: the walls where user namespaces are off and bubblewrap cannot build its own.

    python -m trellisd.sandbox.landlock --write DIR... --hide PATH... [--no-network] -- argv...

restricts itself with the kernel's Landlock, gives up every capability (root's too) and
then becomes ``argv`` (``execvp``); the program and everything it starts keep the
restriction and get no capability back. Inside:

- everything is readable and executable, except the hidden paths and all below them;
- only the ``--write`` folders (and the terminal and ``/dev/null``-like devices) are
  writable; missing ones are passed over;
- with ``--no-network`` (Landlock ABI 4 or later) TCP bind and connect are denied;
- with ABI 6 or later, signals and abstract unix sockets do not reach outside the walls.

Landlock grants, it cannot deny: a rule on a folder covers all below it. So a path is hidden
by granting each of its siblings, and the siblings of each folder on the way to it, and never
a folder that holds it. Links are resolved first (the target is hidden); what else leads to
the same files (a hard link, another mount of a folder on the way) is readable where it is.

Exit status, with a line on stderr, when the program does not start: 2 for bad arguments,
126 when the walls cannot be built (no Landlock, or too old for what is asked), 127 when the
program is not found. The program is never started without its walls.

What Landlock cannot do that bubblewrap does:

- No pid namespace: the program sees the user's other processes (``ps``, their command
  lines). It cannot ptrace them or open their ``/proc/<pid>/mem`` or ``environ``
  (Landlock's ptrace scoping, which ``CAP_SYS_PTRACE`` would get past: hence no
  capability), nor signal them (ABI 6). A process with secrets in its environment makes
  itself non-dumpable too (``keep_environment_private``), as the daemon does.
- No network namespace: ``--no-network`` denies every TCP bind and connect, the loopback's
  too (a test suite's local server cannot listen), and leaves UDP (DNS among it) and
  pathname unix sockets open. An allowed list of hosts cannot be built (Landlock's network
  rules name ports, not hosts), so the network gate does not apply.
- No mount namespace: no private ``/tmp`` or ``/dev`` (the launcher passes a temporary
  folder of its own as writable and points ``TMPDIR`` there; ``/dev/shm`` is not writable,
  so POSIX semaphores, e.g. ``multiprocessing``'s locks, fail); a hidden path is there but
  unreadable, not empty, and the folders on the way to it cannot be listed (``ls ~``).
- No read-only path inside a writable folder (``.git/hooks`` in the root): a folder's rule
  covers all below it. A hidden path inside a writable folder makes the folders on the way to
  it read-only for new entries, their existing entries other than it staying writable.
- Device ioctls are not restricted, and there is no seccomp filter.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys

# What runs before every walled program imports little: typing, pathlib and collections.abc
# (enum, re, urllib...) only for the type checker, ``_signal`` rather than ``signal``.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal  # the C module has no stubs of its own; ``signal`` re-exports it
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    StrPath = str | os.PathLike[str]
else:
    import _signal

USAGE = (
    "usage: python -m trellisd.sandbox.landlock --write DIR... --hide PATH... [--no-network]"
    " -- argv..."
)

# The system calls: the same numbers on x86_64 and aarch64 (the generic table).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_MACHINES = ("x86_64", "aarch64")
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAP_LAST_CAP = "/proc/sys/kernel/cap_last_cap"
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

# Filesystem rights (include/uapi/linux/landlock.h), in its order from bit 0. REFER (ABI 2)
# is moving and linking across folders, denied unless handled and granted; TRUNCATE came
# with ABI 3. _FS_BY_ABI: what each ABI handles.
(
    EXECUTE,
    WRITE_FILE,
    READ_FILE,
    READ_DIR,
    REMOVE_DIR,
    REMOVE_FILE,
    MAKE_CHAR,
    MAKE_DIR,
    MAKE_REG,
    MAKE_SOCK,
    MAKE_FIFO,
    MAKE_BLOCK,
    MAKE_SYM,
    REFER,
    TRUNCATE,
) = (1 << bit for bit in range(15))
_FS_BY_ABI = ((1, REFER - 1), (2, TRUNCATE - 1), (3, (TRUNCATE << 1) - 1))
# Network rights (ABI 4) and scopes (ABI 6).
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (TRUNCATE << 1) - 1
# The rights a rule on something other than a folder may carry.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
# Written by programs that write nothing else: the terminal, the bit buckets.
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)


class LandlockError(Exception):
    """The walls cannot be built here; the message says why, in one line."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        _LIBC.append(libc)
    return _LIBC[0]


def _syscall(number: int, *args: object) -> int:
    result = int(_libc().syscall(ctypes.c_long(number), *args))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when it offers none (off at boot, too old, not
    Linux, or a machine whose system call numbers this module does not know)."""
    if sys.platform != "linux" or os.uname().machine not in _MACHINES:
        return 0
    try:
        return _syscall(
            _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except OSError:
        return 0


def _handled_fs(abi: int) -> int:
    handled = 0
    for since, rights in _FS_BY_ABI:
        if abi >= since:
            handled = rights
    return handled


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _grants(root: str, access: int, hidden: Sequence[str]) -> Iterator[tuple[str, int]]:
    """``access`` on ``root`` and all below it, less the ``hidden`` paths: a rule for
    ``root``, or, when something below it is hidden, rules for its entries in turn."""
    if any(_within(root, path) for path in hidden):
        return
    inside = [path for path in hidden if _within(path, root)]
    if not inside:
        yield root, access
        return
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError as error:
        raise LandlockError(
            f"cannot list {root} to hide {inside[0]} in it: {error.strerror}"
        ) from None
    for entry in entries:
        # A link's target has rules of its own, where it is; a rule on the link would be one
        # on the target, wherever that is (even a hidden path).
        if not entry.is_symlink():
            yield from _grants(entry.path, access, inside)


def grants(hidden: Sequence[StrPath], writable: Sequence[StrPath]) -> list[tuple[str, int]]:
    """The path rules the walls are made of: read everywhere and write in ``writable``
    (and the devices), neither under ``hidden``. Paths are taken as their real paths."""
    hide = [os.path.realpath(path) for path in hidden]
    rules = list(_grants("/", READ, hide))
    for folder in [os.path.realpath(path) for path in writable]:
        if os.path.exists(folder):
            rules.extend(_grants(folder, READ | WRITE, hide))
    for device in DEVICES:
        if os.path.exists(device):
            rules.extend(_grants(device, READ | WRITE_FILE | TRUNCATE, hide))
    return rules


def restrict(hidden: Sequence[StrPath], writable: Sequence[StrPath], network: bool) -> None:
    """Restrict this process (and all it starts from now on) as the module docstring says;
    :class:`LandlockError` when that cannot be done, with nothing restricted."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError("this kernel offers no Landlock (off, too old, or not Linux)")
    if not network and abi < 4:
        raise LandlockError(
            f"this kernel's Landlock (ABI {abi}) cannot deny the network; ABI 4 is needed"
        )
    fs = _handled_fs(abi)
    attr = _RulesetAttr(
        handled_access_fs=fs,
        handled_access_net=0 if network else NET_BIND_TCP | NET_CONNECT_TCP,
        scoped=SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    rules = grants(hidden, writable)
    try:
        ruleset = _syscall(
            _CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0
        )
    except OSError as error:
        raise LandlockError(f"cannot create a Landlock ruleset: {error.strerror}") from None
    try:
        for path, access in rules:
            _add_rule(ruleset, path, access & fs)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(f"cannot set no_new_privs: {os.strerror(ctypes.get_errno())}")
        try:
            _syscall(_RESTRICT_SELF, ruleset, 0)
        except OSError as error:
            raise LandlockError(f"cannot restrict itself: {error.strerror}") from None
    finally:
        os.close(ruleset)


def drop_capabilities() -> None:
    """Give up every capability, for good: the ambient ones, the bounding set (where this
    process may: root's), then the effective, permitted and inheritable ones. With
    ``no_new_privs`` set, a program started after this gets none back, root's neither: a
    root inside Landlock's walls must not load a kernel module, open a raw socket or read
    another process's memory. :class:`LandlockError` when they cannot be given up."""
    libc = _libc()
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # none before Linux 4.3
    try:
        with open(_CAP_LAST_CAP) as said:
            last = int(said.read())
    except (OSError, ValueError):
        last = 63
    for capability in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)  # refused without CAP_SETPCAP
    header = _CapHeader(version=_CAPABILITY_VERSION_3, pid=0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        errno = ctypes.get_errno()
        raise LandlockError(f"cannot give up its capabilities: {os.strerror(errno)}")


def keep_environment_private() -> None:
    """Make this process non-dumpable: a program in Landlock's walls, which sees this
    process (there is no pid namespace), cannot read its ``/proc/<pid>/environ`` or memory
    (that needs ``CAP_SYS_PTRACE``, which the program does not have). Also means no core
    dump of this process, and a debugger must be root to attach."""
    _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since it was listed: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        try:
            _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        except OSError as error:
            raise LandlockError(f"cannot add a rule for {path}: {error.strerror}") from None
    finally:
        os.close(fd)


def landlock_prefix(hidden: Sequence[Path], writable: Sequence[Path], network: bool) -> list[str]:
    """The argv prefix that starts a program inside Landlock walls.

    ``-P``: the program's folder (the repository) is not searched for ``trellisd``; the code
    that builds the walls runs before them."""
    for path in (*hidden, *writable):
        if not os.path.isabs(path):
            raise ValueError(f"{path} is not an absolute path")
    prefix = [sys.executable, "-P", "-m", "trellisd.sandbox.landlock"]
    if writable:
        prefix += ["--write", *map(str, writable)]
    if hidden:
        prefix += ["--hide", *map(str, hidden)]
    if not network:
        prefix.append("--no-network")
    return [*prefix, "--"]


def _arguments(argv: list[str]) -> tuple[list[str], list[str], bool, list[str]]:
    if "--" not in argv:
        raise ValueError("no -- before the program")
    split = argv.index("--")
    lists: dict[str, list[str]] = {"--write": [], "--hide": []}
    network = True
    current: list[str] | None = None
    for word in argv[:split]:
        if word in lists:
            current = lists[word]
        elif word == "--no-network":
            network, current = False, None
        elif word.startswith("-") or current is None:
            raise ValueError(f"unknown option {word}")
        else:
            current.append(word)
    if not argv[split + 1 :]:
        raise ValueError("no program after --")
    return lists["--hide"], lists["--write"], network, argv[split + 1 :]


def main(argv: list[str]) -> int:
    try:
        hidden, writable, network, command = _arguments(argv)
    except ValueError as error:
        print(f"trellisd landlock: {error}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        restrict(hidden, writable, network)
        drop_capabilities()
    except LandlockError as error:
        print(f"trellisd landlock: {error}", file=sys.stderr)
        return 126
    # The program gets the dispositions a shell would give it, not Python's SIGPIPE ignore.
    for signum in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(signum, _signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"trellisd landlock: cannot start {command[0]}: {error.strerror}", file=sys.stderr)
        return 127 if isinstance(error, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
