"""Custom commands: the prompt files of the user's ``commands/`` folder (beside the config
file) and of the project's ``.trellisd/commands/``, listed for a session (``session/commands``)
and run as a turn (``session/turn``'s ``command``).

A command's file is read each time it is listed or run, so an edit counts at once. The user's
command wins over a project's of the same name. A project's command may only narrow what the
user's settings allow: its ``approval`` counts only when stricter than the session's, its
``maxSteps`` only below the daemon's bound, its ``budget`` only below the session's, its
``model`` only among the models the user's settings name, and its ``verify`` only when the
session's policy allows that command line without asking. What was dropped or lowered is said
(``CustomCommand.narrowed``). A project's files are read as the tools read them: a symlink that
leads out of the root is skipped, and none is followed on the way.

The settings apply to that turn alone. Its approval mode is set as the session's for the turn
and the mode it had is set back when the turn ends (the policy service keeps one mode a
session). The run records which command it ran (a ``command`` event).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import functools
import logging
import os
import shlex
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ..commands import (
    MAX_COMMANDS,
    MAX_FILE_BYTES,
    CommandError,
    CustomCommand,
    Narrowed,
    Source,
    name_of,
    parse,
    unknown_keys,
)
from ..errors import InvalidParams
from ..policy.layers import STRICTNESS, Approval
from ..records import Budget, ProviderChoice, Session, TurnResult
from ..store.facade import AsyncStore
from ..tools.base import Action, ToolContext, ToolFailure
from .budgets import BudgetService
from .policies import Policies
from .queue import PromptQueues
from .settings import Defaults
from .turns import TurnRequest, TurnService

log = logging.getLogger(__name__)
T = TypeVar("T")

PROJECT_FOLDER = ".trellisd/commands"
NO_CHOICE = ProviderChoice()


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What the user's settings allow a project's command: the session's approval mode, the
    daemon's step bound, the session's budget in USD (None: none), the models named."""

    approval: Approval
    max_steps: int
    budget: float | None
    models: frozenset[str]
    may_run: Callable[[tuple[str, ...]], bool]


def narrow(command: CustomCommand, bounds: Bounds) -> CustomCommand:
    """A project's ``command`` with what it asks beyond ``bounds`` dropped or lowered."""
    asked, notes = command.settings, []
    settings = asked
    if asked.approval is not None and STRICTNESS[asked.approval] <= STRICTNESS[bounds.approval]:
        settings = dataclasses.replace(settings, approval=None)
        if asked.approval != bounds.approval:
            notes.append(
                Narrowed(
                    "approval",
                    asked.approval,
                    None,
                    f"looser than the session's '{bounds.approval}': a project's command"
                    " may only make it stricter",
                )
            )
    if asked.max_steps is not None and asked.max_steps > bounds.max_steps:
        settings = dataclasses.replace(settings, max_steps=bounds.max_steps)
        notes.append(
            Narrowed(
                "maxSteps",
                asked.max_steps,
                bounds.max_steps,
                f"more than the {bounds.max_steps} steps a turn may take",
            )
        )
    if asked.budget is not None and bounds.budget is not None and asked.budget > bounds.budget:
        settings = dataclasses.replace(settings, budget=bounds.budget)
        notes.append(
            Narrowed(
                "budget",
                asked.budget,
                bounds.budget,
                f"more than the session's budget of ${bounds.budget:g}",
            )
        )
    if asked.model is not None and asked.model not in bounds.models:
        settings = dataclasses.replace(settings, model=None)
        notes.append(
            Narrowed(
                "model",
                asked.model,
                None,
                "not a model your settings name: " + ", ".join(sorted(bounds.models)),
            )
        )
    if asked.verify is not None and not bounds.may_run(asked.verify):
        settings = dataclasses.replace(settings, verify=None)
        notes.append(
            Narrowed(
                "verify",
                list(asked.verify),
                None,
                "the session's policy does not let this command line run without asking",
            )
        )
    return command.with_settings(settings, tuple(notes))


def read_user(folder: Path | None) -> list[CustomCommand]:
    """The user's commands, by name; a file that holds none is skipped and said so."""
    if folder is None:
        return []
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("cannot list the commands in %s: %s", folder, exc)
        return []
    return _gather(
        folder, names, "user", lambda filename: functools.partial(_read_file, folder / filename)
    )


def read_project(root: Path) -> list[CustomCommand]:
    """The project's commands, by name, read as the tools read files: a symlink that leads out
    of the root is skipped, and none is followed on the way."""
    context = ToolContext(root)
    try:
        real = context.resolve(PROJECT_FOLDER)
        folder = context.folder(real)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except (ToolFailure, OSError) as exc:
        log.warning("the project's commands in %s are skipped: %s", root / PROJECT_FOLDER, exc)
        return []
    try:
        names = sorted(os.listdir(folder))
    finally:
        os.close(folder)
    return _gather(
        root / PROJECT_FOLDER,
        names,
        "project",
        lambda filename: functools.partial(_read_in, context, f"{PROJECT_FOLDER}/{filename}"),
    )


def _gather(
    folder: Path,
    names: list[str],
    source: Source,
    reader: Callable[[str], Callable[[], bytes | None]],
) -> list[CustomCommand]:
    """The commands of ``folder``'s files ``names``, ``MAX_COMMANDS`` at most."""
    found: list[CustomCommand] = []
    for filename in names:
        command = _checked(filename, source, str(folder / filename), reader(filename))
        if command is None:
            continue
        if len(found) == MAX_COMMANDS:
            log.warning("%s holds over %d commands: the rest are skipped", folder, MAX_COMMANDS)
            break
        found.append(command)
    return found


def _checked(
    filename: str, source: Source, path: str, read: Callable[[], bytes | None]
) -> CustomCommand | None:
    if filename.startswith(".") or not filename.endswith(".md"):
        return None
    name = name_of(filename)
    if name is None:
        log.warning("command file %s skipped: its name is not [a-z0-9][a-z0-9_-]*.md", path)
        return None
    try:
        raw = read()
        if raw is None:
            return None
        command = parse(name, source, raw, path)
    except (CommandError, ToolFailure, OSError) as exc:
        log.warning("command file %s skipped: %s", path, exc)
        return None
    ignored = unknown_keys(raw)
    if ignored:
        log.info("command file %s: ignored %s", path, ", ".join(ignored))
    return command


def _read_file(path: Path) -> bytes | None:
    with path.open("rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        return _bounded(file.read(MAX_FILE_BYTES + 1))


def _read_in(context: ToolContext, relative: str) -> bytes | None:
    real = context.resolve(relative)
    try:
        fd = context.open(real, os.O_RDONLY)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return None
        raise
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        return _bounded(file.read(MAX_FILE_BYTES + 1))


def _bounded(raw: bytes) -> bytes:
    if len(raw) > MAX_FILE_BYTES:
        raise CommandError(f"more than {MAX_FILE_BYTES} bytes")
    return raw


def merged(user: list[CustomCommand], project: list[CustomCommand]) -> list[CustomCommand]:
    """Both lists in one, by name; the user's command wins over a project's of its name."""
    ours = {c.name for c in user}
    shadowed = {c.name for c in project if c.name in ours}
    for name in sorted(shadowed):
        log.info("the user's command /%s is used over the project's of the same name", name)
    kept = [dataclasses.replace(c, shadows=c.name in shadowed) for c in user]
    kept += [c for c in project if c.name not in ours]
    return sorted(kept, key=lambda c: c.name)


class CommandService:
    def __init__(
        self,
        store: AsyncStore,
        defaults: Defaults,
        policies: Policies,
        turns: TurnService,
        queues: PromptQueues,
        folder: Path | None,
    ) -> None:
        self.store, self.defaults, self.policies = store, defaults, policies
        self.turns, self.queues = turns, queues
        self.folder = folder  # the user's commands (``DaemonSettings.commands_folder``)
        self.budgets = BudgetService(store)

    async def of(self, session_id: str) -> list[CustomCommand]:
        """The commands of the session: the user's and its project's, the project's narrowed."""
        session = await self.store.sessions.get(session_id)
        user, project = await asyncio.to_thread(self._read, Path(session.root))
        if project:
            bounds = await self._bounds(session)
            project = [narrow(c, bounds) for c in project]
        return merged(user, project)

    def _read(self, root: Path) -> tuple[list[CustomCommand], list[CustomCommand]]:
        return read_user(self.folder), read_project(root)

    async def find(self, session_id: str, name: str) -> CustomCommand:
        """The command ``name`` of the session; ``InvalidParams`` naming it when none."""
        for command in await self.of(session_id):
            if command.name == name:
                return command
        raise InvalidParams(
            f"unknown command /{name}: no {name}.md in your commands folder or the project's"
            f" {PROJECT_FOLDER}",
            field="command",
            command=name,
        )

    async def _bounds(self, session: Session) -> Bounds:
        policy = await self.policies.of(session)
        budget, _ = await self.budgets.status(session.session_id)
        settings = self.defaults.settings
        models = {
            self.defaults.provider.effective_model,
            self.defaults.for_session(session.provider).effective_model,
            *settings.daemon.acp_models,
        }

        def may_run(argv: tuple[str, ...]) -> bool:
            action = Action("exec", shlex.join(argv), argv=argv)
            return policy.check(action).ruling == "allow"

        return Bounds(
            policy.effective_approval,
            self.turns.max_steps,
            None if budget is None else budget.usd,
            frozenset(m for m in models if m),
            may_run,
        )

    async def _may_check(self, session_id: str, command: CustomCommand, argv: list[str]) -> None:
        """A project's check, its arguments put in, is judged again as the policy would judge
        ``run_command``: one it does not allow without asking is refused, and nothing runs."""
        session = await self.store.sessions.get(session_id)
        if not (await self._bounds(session)).may_run(tuple(argv)):
            raise InvalidParams(
                f"the project's command /{command.name} checks with `{shlex.join(argv)}`,"
                " which the session's policy does not let run without asking",
                field="arguments",
                command=command.name,
            )

    async def turn(
        self,
        base: TurnRequest,
        name: str,
        arguments: str,
        queue: bool = False,
        chosen: ProviderChoice = NO_CHOICE,
    ) -> TurnResult:
        """Run command ``name`` with ``arguments`` as a turn of ``base``'s session: its
        expansion is the prompt, and its settings fill in what ``base`` does not set (over
        ``chosen``: see ``with_command``)."""
        command = await self.find(base.session_id, name)
        request = with_command(base, command, arguments, chosen)
        if command.source == "project" and request.verify is not None and base.verify is None:
            await self._may_check(base.session_id, command, request.verify[0])
        approval = command.settings.approval

        async def run() -> TurnResult:
            if approval is None:
                return await self.turns.turn(request)
            session = await self.store.sessions.get(base.session_id)
            before = (await self.policies.of(session)).effective_approval
            if before == approval:
                return await self.turns.turn(request)
            await self.policies.set_mode(session, approval)
            try:
                return await self.turns.turn(request)
            finally:
                await self.policies.set_mode(session, before)

        return await self.queues.turn(base.session_id, request.prompt, run, queue)


def with_command(
    base: TurnRequest,
    command: CustomCommand,
    arguments: str,
    chosen: ProviderChoice = NO_CHOICE,
) -> TurnRequest:
    """``base`` with ``command``'s expansion as its prompt; what ``base`` sets wins over the
    command's settings, and they over ``chosen`` (the model and effort a client chose for the
    session's turns, which ``base`` leaves out)."""
    given = command.settings
    choice = attrs.evolve(
        base.choice,
        model=_first(base.choice.model, given.model, chosen.model),
        effort=_first(base.choice.effort, given.effort, chosen.effort),
    )
    argv = command.verify(arguments)
    verify = base.verify if base.verify is not None or argv is None else (argv, 0)
    budget = base.budget
    if budget is None and given.budget is not None:
        budget = Budget(usd=given.budget)
    record: dict[str, Any] = {
        "name": command.name,
        "source": command.source,
        "arguments": arguments,
        "settings": command.settings.to_wire(),
    }
    if command.narrowed:
        record["narrowed"] = [n.to_wire() for n in command.narrowed]
    return dataclasses.replace(
        base,
        prompt=command.expand(arguments),
        choice=choice,
        max_steps=base.max_steps if base.max_steps is not None else given.max_steps,
        verify=verify,
        budget=budget,
        command=record,
    )


def _first(*values: T | None) -> T | None:
    return next((v for v in values if v is not None), None)


__all__ = ["CommandService", "narrow", "read_project", "read_user", "with_command"]
