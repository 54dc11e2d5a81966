"""A session's effective policy, stacked from three sources.

1. The daemon's default (``DEFAULT_POLICY``, or the one the daemon was configured with): a
   layer named ``default`` allowing reads of ``**``, writes of ``**`` and commands ``*``,
   with approval ``ask``, so writes and commands wait for the user's answer.
2. The project's ``.trellisd.toml`` at the session root, if there is one (at most
   ``MAX_PROJECT_FILE_BYTES``, tables and arrays nested at most ``MAX_PROJECT_FILE_DEPTH``
   deep): its ``[[layers]]`` (same keys as the wire shape) go on top
   of the default, and its top-level ``approval`` replaces the default's only if it is
   stricter (``all`` < ``ask`` < ``never``). The file comes with the folder, often from
   someone else's repository, so it may add deny rules and tighten approval but never
   loosen anything: its layers ``narrow`` (an action its allow rules of that kind do not
   match is refused, and what they match still needs an allow from another source), and
   a looser approval is ignored, with a warning in the log. The same holds for the walls:
   its ``sandbox`` counts only if stricter (``off`` < ``workspace-write`` < ``read-only``),
   its ``network`` only narrows (``false``, or the part of the allowed list it names).
   Other top-level keys are left for other settings.
3. The ``policy`` given in ``session/open``: the caller's, on top of everything. Its
   approval, if it sets one, is the session's (the user, through the editor, may loosen).

The ``task`` switch is the most specific of the default's and ``session/open``'s that sets
it; the project file's ``task`` may then only turn it off or lower its limit.

Layers stack: every layer of every source counts, and a deny in any of them beats an
allow in any other (see ``layers``). The approval is the most specific source's that sets
one, under the rule of point 2. The read-back (``Policy.to_wire``) shows the layers in this
order, the effective approval and the session's grants.
"""

from __future__ import annotations

import logging
import os
import stat
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..convert import structure
from ..errors import InvalidParams
from ..sandbox.walls import narrower_network, stricter_mode
from .layers import STRICTNESS, Layer, Policy, PolicySpec, ProjectPolicy

log = logging.getLogger(__name__)

PROJECT_FILE = ".trellisd.toml"
MAX_PROJECT_FILE_BYTES = 1024 * 1024
MAX_PROJECT_FILE_DEPTH = 64  # tables and arrays nested deeper are refused

DEFAULT_POLICY = Policy(
    (Layer("default", allow_read=("**",), allow_write=("**",), allow_exec=("*",)),),
    "ask",
)


def load_policy(
    root: Path, requested: PolicySpec | None, *, default: Policy = DEFAULT_POLICY
) -> Policy:
    """The effective policy of a session at ``root``. Raises ``InvalidParams`` naming the
    file and the field at fault in the project file."""
    policy = default
    project = read_project_policy(root)
    if project is not None:
        if (
            project.approval is not None
            and STRICTNESS[project.approval] < STRICTNESS[default.effective_approval]
        ):
            log.warning(
                "%s asks for approval %r, looser than %r; a project file may only tighten it",
                root / PROJECT_FILE,
                project.approval,
                default.effective_approval,
            )
            project = replace(project, approval=None)
        project = _only_stricter(root, project, default)
        policy = policy.stacked(replace(project, task=None))
    if requested is not None:
        policy = policy.stacked(Policy.of(requested))
    if project is not None and project.task is not None:
        policy = replace(policy, task=policy.effective_task.narrowed(project.task))
    return policy


def _only_stricter(root: Path, project: Policy, default: Policy) -> Policy:
    """``project`` with its walls no looser than ``default``'s: a stricter ``sandbox`` and
    a narrower ``network`` are kept, a looser one is ignored with a warning in the log."""
    sandbox = stricter_mode(default.effective_sandbox, project.sandbox)
    network = narrower_network(default.effective_network, project.network)
    for key, asked, base, kept in (
        ("sandbox", project.sandbox, default.effective_sandbox, sandbox),
        ("network", project.network, default.effective_network, network),
    ):
        if asked is not None and kept != asked:
            log.warning(
                "%s asks for %s %r; a project file may only tighten %r, so it is %r",
                root / PROJECT_FILE,
                key,
                asked,
                base,
                kept,
            )
    return replace(
        project,
        sandbox=None if project.sandbox is None else sandbox,
        network=None if project.network is None else network,
    )


def read_project_policy(root: Path) -> Policy | None:
    """The layers and approval of ``root/.trellisd.toml``; None if there is no such file."""
    data = read_project_file(root)
    if data is None:
        return None
    path = root / PROJECT_FILE
    try:
        spec = structure(data, ProjectPolicy, "")
    except InvalidParams as exc:
        named = f"{path}: {exc.data['field']}"
        raise InvalidParams(f"{path}: {exc.message}", field=named) from None
    return Policy.of(spec, narrows=True)


def read_project_file(root: Path) -> dict[str, Any] | None:
    """The TOML of ``root/.trellisd.toml``; None if there is no such file. Raises
    ``InvalidParams`` naming the file when it cannot be read or is not TOML."""
    path = root / PROJECT_FILE
    if not path.is_file():
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InvalidParams(f"{path} is not a regular file", file=str(path))
            raw = f.read(MAX_PROJECT_FILE_BYTES + 1)
        if len(raw) > MAX_PROJECT_FILE_BYTES:
            raise InvalidParams(
                f"{path} is larger than {MAX_PROJECT_FILE_BYTES // 1024} KiB"
                f" ({info.st_size} bytes); a policy file this large is not read",
                file=str(path),
            )
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParams(f"{path} is not valid TOML: {exc}", file=str(path)) from exc
    except RecursionError:
        data = None  # nested past what Python can read: past the limit, too
    except OSError as exc:
        raise InvalidParams(
            f"{path} cannot be read: {exc.strerror or exc}", file=str(path)
        ) from exc
    if data is None or nesting(data) > MAX_PROJECT_FILE_DEPTH:
        raise InvalidParams(
            f"{path} nests tables and arrays more than {MAX_PROJECT_FILE_DEPTH} deep;"
            " a policy file this deep is not read",
            file=str(path),
        )
    return data


def nesting(value: Any) -> int:
    """How deep tables and arrays nest in ``value`` (a scalar is 0), counted without
    recursion, so that no depth can exhaust the stack."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest
