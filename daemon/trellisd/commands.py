"""Custom commands: a markdown prompt file ``<name>.md`` read into a ``CustomCommand``.

The file is a prompt with front matter between two ``---`` lines, one ``key: value`` a line
(the value JSON, or plain text when it is not JSON)::

    ---
    description: Make the tests pass
    argument-hint: [test path]
    verify: pytest -q $ARGUMENTS
    maxSteps: 30
    budget: 0.5
    ---
    Make `pytest $ARGUMENTS` pass. Change the code, not the tests.

``$ARGUMENTS`` in the body stands for what follows the command's name, ``$1``..``$9`` for its
words (shell-quoted words, as a shell would split them). A body that names neither is given
the arguments after a blank line. ``verify`` is an argv list, or one command line split as a
shell would, without a shell; the same placeholders stand in its words, and a word that is
``$ARGUMENTS`` alone stands for all the arguments' words.

What a file may not hold makes it a ``CommandError`` (its reader skips it and says why in
the log): a name outside ``NAME``, more than ``MAX_FILE_BYTES``, front matter that does not
end, a setting of the wrong type. A key this reader does not know is ignored, and said so.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, get_args

from .policy.layers import Approval
from .records import Effort

NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
MAX_NAME_CHARS = 64
MAX_FILE_BYTES = 256 * 1024
MAX_COMMANDS = 200
"""How many commands one folder gives at most (the first, by name); the rest are skipped."""
MAX_STEPS = 10_000  # as session/turn's maxSteps
SUFFIX = ".md"
FENCE = "---"
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")

Source = Literal["user", "project"]
APPROVALS: tuple[Approval, ...] = get_args(Approval)
EFFORTS: tuple[Effort, ...] = get_args(Effort)


class CommandError(ValueError):
    """A command file this reader cannot use, and the one-line reason."""


@dataclass(frozen=True)
class CommandSettings:
    """The bounded-turn settings a command carries; None: the session's (or the turn's)."""

    verify: tuple[str, ...] | None = None
    max_steps: int | None = None
    budget: float | None = None  # USD
    model: str | None = None
    approval: Approval | None = None
    effort: Effort | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verify": None if self.verify is None else list(self.verify),
            "maxSteps": self.max_steps,
            "budget": self.budget,
            "model": self.model,
            "approval": self.approval,
            "effort": self.effort,
        }
        return {key: value for key, value in out.items() if value is not None}


@dataclass(frozen=True)
class Narrowed:
    """A setting of a project's command that the user's settings did not let through as it
    was: what the file asked, what applies (None: the session's own), and why."""

    setting: str
    asked: Any
    applied: Any
    reason: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "asked": self.asked,
            "applied": self.applied,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CustomCommand:
    """One command: its name (what follows ``/``), its source, the prompt it expands to and
    the settings its turn runs with (a project's, once narrowed: ``narrowed`` says how)."""

    name: str
    source: Source
    body: str
    description: str | None = None
    argument_hint: str | None = None
    settings: CommandSettings = CommandSettings()
    narrowed: tuple[Narrowed, ...] = ()
    shadows: bool = False  # a user's command that a project's of the same name gives way to
    path: str = ""

    def expand(self, arguments: str) -> str:
        """The prompt this command stands for, given what followed its name."""
        return expand(self.body, arguments)

    def verify(self, arguments: str) -> list[str] | None:
        """The check's argv with the arguments put in: a word that is ``$ARGUMENTS`` alone
        becomes the arguments' words, another keeps to one word with them put in."""
        if self.settings.verify is None:
            return None
        argv: list[str] = []
        for word in self.settings.verify:
            if word == "$ARGUMENTS":
                argv += words(arguments)
            else:
                argv.append(expand(word, arguments, append=False))
        return argv

    def with_settings(
        self, settings: CommandSettings, narrowed: tuple[Narrowed, ...]
    ) -> CustomCommand:
        return replace(self, settings=settings, narrowed=narrowed)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "source": self.source}
        if self.description is not None:
            out["description"] = self.description
        if self.argument_hint is not None:
            out["argumentHint"] = self.argument_hint
        out["settings"] = self.settings.to_wire()
        if self.narrowed:
            out["narrowed"] = [n.to_wire() for n in self.narrowed]
        if self.shadows:
            out["shadowsProject"] = True
        return out


def words(arguments: str) -> list[str]:
    """The arguments' words as a shell would split them; on unbalanced quotes, at spaces."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def expand(text: str, arguments: str, *, append: bool = True) -> str:
    """``text`` with ``$ARGUMENTS`` and ``$1``..``$9`` put in (a missing word: empty). With
    ``append``, arguments that no placeholder took are added after a blank line."""
    arguments = arguments.strip()
    split = words(arguments)

    def put(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return arguments
        index = int(key) - 1
        return split[index] if index < len(split) else ""

    expanded = _PLACEHOLDER.sub(put, text)
    if append and arguments and not _PLACEHOLDER.search(text):
        expanded = f"{expanded.rstrip()}\n\n{arguments}"
    return expanded


def name_of(filename: str) -> str | None:
    """The command a file named ``filename`` holds, or None if it holds none."""
    if not filename.endswith(SUFFIX):
        return None
    name = filename[: -len(SUFFIX)]
    if len(name) > MAX_NAME_CHARS or not NAME.fullmatch(name):
        return None
    return name


def parse(name: str, source: Source, raw: bytes, path: str = "") -> CustomCommand:
    """The command a file's bytes hold; ``CommandError`` when they hold none."""
    if len(raw) > MAX_FILE_BYTES:
        raise CommandError(f"more than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise CommandError("not UTF-8") from exc
    front, body = _split(text)
    values = _front_matter(front)
    if not body.strip():
        raise CommandError("the prompt is empty")
    return CustomCommand(
        name,
        source,
        body.strip("\n"),
        description=_text(values, "description"),
        argument_hint=_text(values, "argument-hint"),
        settings=_settings(values),
        path=path,
    )


def _split(text: str) -> tuple[list[str], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != FENCE:
        return [], text
    for index, line in enumerate(lines[1:], 1):
        if line.rstrip("\r\n").rstrip() == FENCE:
            return [line.rstrip("\r\n") for line in lines[1:index]], "".join(lines[index + 1 :])
    raise CommandError("the front matter has no closing '---' line")


KNOWN = frozenset(
    ("description", "argument-hint", "verify", "maxSteps", "budget", "model", "approval", "effort")
)
T = TypeVar("T")


@dataclass
class _Values:
    values: dict[str, Any] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)


def _front_matter(lines: list[str]) -> _Values:
    out = _Values()
    for number, line in enumerate(lines, 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, raw = line.partition(":")
        key, raw = key.strip(), raw.strip()
        if not colon or not key:
            raise CommandError(f"line {number} of the front matter is not 'key: value'")
        if key in out.values:
            raise CommandError(f"{key} is given twice")
        if key not in KNOWN:
            out.unknown.append(key)
            continue
        try:
            out.values[key] = json.loads(raw)
        except ValueError:
            out.values[key] = raw
    return out


def _text(front: _Values, key: str) -> str | None:
    value = front.values.get(key)
    if value is None:
        return None
    if isinstance(value, (list, dict)):
        raise CommandError(f"{key} must be text")
    return str(value)


def _settings(front: _Values) -> CommandSettings:
    values = front.values
    return CommandSettings(
        verify=_verify(values.get("verify")),
        max_steps=_max_steps(values.get("maxSteps")),
        budget=_budget(values.get("budget")),
        model=_text(front, "model"),
        approval=_one_of("approval", values.get("approval"), APPROVALS),
        effort=_one_of("effort", values.get("effort"), EFFORTS),
    )


def unknown_keys(raw: bytes) -> list[str]:
    """The front matter's keys this reader ignores (for the log); none for a bad file."""
    try:
        front, _ = _split(raw.decode("utf-8").removeprefix("\ufeff"))
        return _front_matter(front).unknown
    except (CommandError, UnicodeDecodeError):
        return []


def _verify(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise CommandError(f"verify cannot be split into words: {exc}") from exc
    elif isinstance(value, list) and all(isinstance(word, str) for word in value):
        argv = list(value)
    else:
        raise CommandError("verify must be a command line or an array of strings")
    if not argv:
        raise CommandError("verify is empty")
    return tuple(argv)


def _max_steps(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise CommandError(f"maxSteps must be a whole number from 1 to {MAX_STEPS}")
    return value


def _budget(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
        raise CommandError("budget must be a number of US dollars more than 0")
    return float(value)


def _one_of(key: str, value: Any, allowed: tuple[T, ...]) -> T | None:
    if value is None:
        return None
    for choice in allowed:
        if value == choice:
            return choice
    raise CommandError(f"{key} must be one of {', '.join(map(repr, allowed))}")
