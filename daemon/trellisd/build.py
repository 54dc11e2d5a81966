"""Which build of trellisd this is: its version and a digest of its code.

Two builds of one version (``0.1.0`` from two commits) can know different store schemas, and
a daemon started before an upgrade still runs the old code: so a store records the build that
wrote it, a refusal names both builds, and the shared daemon's socket is named after its build
(``rendezvous``), so a window attaches only to a daemon running its own code. A build is
``0.1.0+3f9c2a1b7d04``: the version then the first 12 hex digits of the SHA-256 of the
package's Python files (their paths and bytes, in path order), installed or checked out alike.

Standard library only, and only its lightest modules: the forwarder an editor starts names
the socket with it. Reading every file costs tens of milliseconds, so the digest is kept in
the package's ``__pycache__`` (as Python keeps its bytecode), under a name that is a digest of
the files' paths, sizes, modification times and inodes: a file changed, added or removed
gives another name, and the code is read again. Where the package cannot be written, the code
is read at every start.
"""

from __future__ import annotations

import os

from . import __version__

try:  # the C module itself: hashlib would load OpenSSL at every window's start
    from _sha256 import sha256  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - Python 3.12 renamed it
    from hashlib import sha256

PACKAGE = os.path.dirname(os.path.abspath(__file__))
CACHE_PREFIX = "build-"

_build: str | None = None


def build() -> str:
    """This build's name: ``<version>+<digest of its code>``, found once a process."""
    global _build
    if _build is None:
        _build = package_build(PACKAGE)
    return _build


def package_build(package: str) -> str:
    """The build of the package in the folder ``package``: from its cache when the files'
    stat data are those it was computed from, else from the files (and then cached)."""
    files = python_files(package)
    stamp = sha256(package.encode() + b"\0")
    for relative, info in files:
        stamp.update(
            f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}\0".encode(
                errors="surrogateescape"
            )
        )
    cache = os.path.join(package, "__pycache__", CACHE_PREFIX + stamp.hexdigest()[:32])
    try:
        with open(cache) as file:
            cached = file.read()
        if cached.startswith(f"{__version__}+") and len(cached) == len(__version__) + 13:
            return cached
    except (OSError, UnicodeDecodeError):
        pass
    name = f"{__version__}+{code_digest(package, files)}"
    _keep(cache, name)
    return name


def python_files(package: str) -> list[tuple[str, os.stat_result]]:
    """The package's ``.py`` files, as paths relative to it with ``/``, in path order (part
    by part, as ``pathlib`` orders them), each with its stat data."""
    found: list[tuple[tuple[str, ...], os.stat_result]] = []
    folders: list[tuple[str, ...]] = [()]
    while folders:
        parts = folders.pop()
        with os.scandir(os.path.join(package, *parts)) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((*parts, entry.name))
                elif entry.name.endswith(".py") and entry.is_file():
                    found.append(((*parts, entry.name), entry.stat()))
    found.sort(key=lambda item: item[0])
    return [("/".join(parts), info) for parts, info in found]


def code_digest(package: str, files: list[tuple[str, os.stat_result]]) -> str:
    """The first 12 hex digits of the SHA-256 of the files' paths and bytes."""
    digest = sha256()
    for relative, _ in files:
        with open(os.path.join(package, relative), "rb") as file:
            data = file.read()
        digest.update(relative.encode(errors="surrogateescape") + b"\0")
        digest.update(data)
        digest.update(b"\0")
    return str(digest.hexdigest()[:12])


def _keep(cache: str, name: str) -> None:
    """Write ``name`` to ``cache`` whole (a reader sees the old file or the new), and remove
    the caches of earlier code; nothing when the folder cannot be written."""
    folder = os.path.dirname(cache)
    partial = f"{cache}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(partial, "w") as file:
            file.write(name)
        os.replace(partial, cache)
        for old in os.listdir(folder):
            if old.startswith(CACHE_PREFIX) and os.path.join(folder, old) != cache:
                os.unlink(os.path.join(folder, old))
    except OSError:
        try:
            os.unlink(partial)
        except OSError:
            pass
