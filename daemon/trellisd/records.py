"""The domain records: what a session, a turn, a run and its steps are, in every layer.

The store reads and writes them, the agent loop and the providers produce them, the wire
writes them out. They import nothing of the daemon but its vocabulary (a session's policy
is named for the type checker only).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .plans import Plan
from .vocabulary import EventKind, FeedKind, Outcome, StepKind

if TYPE_CHECKING:
    from .policy.layers import PolicySpec


@dataclass(frozen=True)
class Tokens:
    """Token counts; ``None`` where the provider did not report a figure. ``reasoning``: of
    ``output``, the tokens the model spent reasoning, when the provider said."""

    input: int | None = 0
    output: int | None = 0
    cached: int | None = 0
    reasoning: int | None = None

    @property
    def total(self) -> int | None:
        if self.input is None or self.output is None:
            return None
        return self.input + self.output

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            _add(self.input, other.input),
            _add(self.output, other.output),
            _add(self.cached, other.cached),
            _add_known(self.reasoning, other.reasoning),
        )


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _add_known(a: int | None, b: int | None) -> int | None:
    """The sum of the figures reported; None when neither was (a step that did not reason
    reports none, and does not make the turn's reasoning unknown)."""
    return b if a is None else a if b is None else a + b


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


Effort = Literal["low", "medium", "high"]
"""How hard a reasoning model thinks (the provider seam's ``Effort``)."""


def effort_field() -> Any:
    """An optional ``Effort`` of a request, whose wrong value is refused saying what it may be."""
    return attrs.field(default=None, metadata={"must": "be low, medium or high"})


@attrs.frozen
class ProviderChoice:
    """A client's choice of model, laid over the daemon's settings: a session's ``provider``
    (kept with the session) or a turn's ``model``, ``temperature`` and ``effort``. None: not
    chosen."""

    name: str | None = None
    model: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_retries: int | None = None
    retry_budget: float | None = None
    read_timeout: float | None = None
    context_window: int | None = None  # the model's context window, in tokens
    compact_at: float | None = None  # the share of the window a request may fill
    effort: Effort | None = effort_field()  # how hard a reasoning model thinks


@attrs.frozen
class Budget:
    """What a turn, or a whole session, may spend: total tokens (input and output) and USD.
    None: not capped."""

    tokens: int | None = None
    usd: float | None = None


@dataclass(frozen=True)
class Spend:
    """What a session has spent: its turns' tokens (input and output) and their cost in USD
    (the turns whose price is unknown count no USD). ``priced``: False when no turn that
    spent tokens has a known price, so that the USD figure is unknown, not 0."""

    tokens: int = 0
    usd: float = 0.0
    priced: bool = True


class AnyHead(enum.Enum):
    """No expectation about a session's head: a write that names no ``expectHead``."""

    ANY_HEAD = "any"


ANY_HEAD = AnyHead.ANY_HEAD
ExpectHead = str | None | AnyHead
"""The head a write expects the session to have (a turn, or None before the first), or
``ANY_HEAD``."""


@dataclass(frozen=True)
class ForkedFrom:
    """Where a fork started: the session it was forked from and the turn its history ends
    at (None: it was forked empty)."""

    session_id: str
    turn_id: str | None


@dataclass(frozen=True)
class ImportedFrom:
    """Where an imported session came from: its id in the file, the hash of its log's head
    and the time when it was exported (None for a session imported before they were kept, or
    from a file that does not say them), and when it was imported."""

    session_id: str
    head_hash: str | None
    exported_at: str | None
    imported_at: str


@dataclass(frozen=True)
class Recovery:
    """A turn whose cancel had to kill a running program mid-run (``tool``'s ``argv``): what
    the program left in the workspace waits for a person to keep it or revert the turn."""

    turn_id: str
    run_id: str
    tool: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Worktree:
    """A session's own git worktree (``session/open`` with ``worktree``): the folder the
    daemon made (the session's root is in it), its branch ``trellisd/<name>``, and the branch
    of the user's checkout it started from (``base``, at ``base_commit``), which
    ``session/worktree/merge`` merges it into."""

    path: str
    branch: str
    base: str
    base_commit: str
    checkout: str  # the top folder of the user's checkout


@dataclass(frozen=True)
class Session:
    session_id: str
    root: str
    title: str
    head: str | None
    created_at: str
    updated_at: str
    provider: ProviderChoice = field(default_factory=ProviderChoice)
    policy: PolicySpec | None = None
    forked_from: ForkedFrom | None = None
    instructions: str | None = None  # the session's standing instructions to the model
    recovery: Recovery | None = None  # a killed command waiting for a decision
    head_hash: str | None = None  # the hash of the last entry of the session's log
    imported_from: ImportedFrom | None = None
    pinned: tuple[str, ...] = ()  # the turns sent verbatim whatever is compacted
    worktree: Worktree | None = None  # the session's own git worktree, when it has one
    parent_session_id: str | None = None  # the session whose ``task`` call started this one


@dataclass(frozen=True)
class SearchMatch:
    """Why a session is a hit of a search: the turn that matched (None: its title) and a
    snippet of the matching text."""

    turn_id: str | None
    snippet: str


@dataclass(frozen=True)
class SessionSummary:
    session: Session
    turns: int
    match: SearchMatch | None = None


@dataclass(frozen=True)
class Exported:
    """A session written to a file: where, how large, how many turns."""

    path: str
    bytes: int
    turns: int


@dataclass(frozen=True)
class ImageRef:
    """An image a turn's prompt carried, as the store keeps it: its bytes are the blob
    named ``sha256`` (``session/image`` gives them)."""

    sha256: str
    mime_type: str
    bytes: int


@dataclass(frozen=True)
class TurnCommand:
    """The custom command a turn ran, as its ``command`` event recorded it: an editor names
    the turn ``/name arguments``, its prompt being the command's expansion."""

    name: str
    arguments: str
    source: str  # "user" or "project"

    @staticmethod
    def of(detail: dict[str, Any]) -> TurnCommand:
        """The command a ``command`` event's detail records."""
        return TurnCommand(
            str(detail["name"]), str(detail.get("arguments", "")), str(detail["source"])
        )


@dataclass(frozen=True)
class Turn:
    turn_id: str
    session_id: str
    parent_turn_id: str | None
    run_id: str
    prompt: str
    reply: str
    outcome: Outcome
    error: str | None
    tokens: Tokens
    created_at: str
    model: str | None = None
    recovery: Recovery | None = None  # its cancel had to kill a running command
    cost: float | None = None  # USD, the sum of its steps' as the store priced them
    plan: Plan | None = None  # its last ``update_plan`` call's plan
    follows_plan: str | None = None  # the turn whose plan it carries out (plan/approve)
    images: tuple[ImageRef, ...] = ()  # the images its prompt carried
    command: TurnCommand | None = None  # the custom command it ran (``session/turn``)


@dataclass(frozen=True)
class Step:
    step: int
    decision: StepKind
    prompt: str | None
    text: str
    tool_call: ToolCall | None
    result: str | None
    tokens: Tokens
    thought: Thought | None = None  # what the model reasoned in the step's call, if it did


@dataclass(frozen=True)
class Thought:
    """What the model reasoned in one call: ``text`` as a person is shown it, and
    ``provider`` and ``items`` to send it back with the assistant's message (the provider's
    own records of it, sent only to the wire named ``provider``)."""

    text: str
    provider: str = ""
    items: tuple[dict[str, Any], ...] = ()

    def detail(self, reasoning_tokens: int | None) -> dict[str, Any]:
        """The ``thought`` event's detail."""
        return {
            "text": self.text,
            "provider": self.provider,
            "items": list(self.items),
            "tokens": reasoning_tokens,
        }

    @staticmethod
    def of(detail: dict[str, Any]) -> Thought:
        """The thought a ``thought`` event's detail records."""
        items = detail.get("items")
        return Thought(
            str(detail.get("text") or ""),
            str(detail.get("provider") or ""),
            tuple(i for i in items if isinstance(i, dict)) if isinstance(items, list) else (),
        )


@dataclass(frozen=True)
class Event:
    seq: int
    kind: EventKind
    step: int | None
    detail: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class FeedEntry:
    """One commit in a session's feed, by its sequence number: a turn started (``prompt``,
    ``parent_turn_id``), a step (``step``), an event (``event``) or a turn ended
    (``outcome``, ``error``)."""

    seq: int
    kind: FeedKind
    turn_id: str
    run_id: str
    created_at: str
    prompt: str | None = None
    parent_turn_id: str | None = None
    step: Step | None = None
    event: Event | None = None
    outcome: Outcome | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    turn_id: str
    session_id: str
    outcome: Outcome
    error: str | None
    tokens: Tokens
    steps: int


@dataclass(frozen=True)
class TurnRef:
    """Which turn of which session, under which run: every turn notification carries it."""

    session_id: str
    turn_id: str
    run_id: str


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended, as ``session/turn`` and ``session/resume`` answer."""

    turn_id: str
    run_id: str
    outcome: Outcome
    reply: str
    tokens: Tokens
    steps: int
    error: str | None
    model: str | None = None
    head_hash: str | None = None  # the session's log after the turn
    session_id: str | None = None  # set when the turn ran in a fork (onConflict)
    forked_from: ForkedFrom | None = None
    recovery: Recovery | None = None  # its cancel had to kill a running command
    cost: float | None = None  # USD, as the store priced its steps


@dataclass(frozen=True)
class Compacted:
    """What ``session/compact`` did: the step of the head turn that holds the summary (None:
    every turn but the newest was compacted already) and how many turns it stands for."""

    session_id: str
    turn_id: str
    step: int | None
    turns: int
    summary: str | None
    tokens: Tokens
    cost: float | None


@dataclass(frozen=True, order=True)
class Sharer:
    """Another session's turn that may have made a change too: its command ran at the same
    time in the same work tree and changed the same path, or its file tool wrote it then."""

    session_id: str
    turn_id: str


@dataclass(frozen=True)
class FileChange:
    """How one file differs between two moments: ``status`` ``added``, ``modified`` or
    ``deleted``, with a unified diff (empty for a binary or too large file). ``shared_with``:
    the other sessions' turns that may have made this change too (empty: it is this
    session's alone)."""

    path: str
    status: str
    diff: str
    binary: bool = False
    too_large: bool = False
    shared_with: tuple[Sharer, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A file a restore left as it was, and why (``binary``, ``tooLarge``: its content was
    not kept; ``policy``: the session's policy refuses writing it)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Restored:
    """What a restore (``session/branch`` with ``restoreFiles``, ``turn/revert``) did."""

    restored: list[str]
    skipped: list[Skipped]
