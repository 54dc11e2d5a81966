"""Which build of trellisd this is: its version and a digest of its code.

Two builds of one version (``0.1.0`` from two commits) can know different store schemas, so a
store records the build that wrote it, and a refusal names both builds:
``0.1.0+3f9c2a1b7d04``, the version then the first 12 hex digits of the SHA-256 of the
package's Python files (their paths and bytes, in path order), installed or checked out alike.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from . import __version__


@functools.cache
def build() -> str:
    """This build's name: ``<version>+<digest of its code>``."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return f"{__version__}+{digest.hexdigest()[:12]}"
