"""A policy: a stack of named layers of glob rules, an approval mode and the session's grants.

``Policy.check`` judges an ``Action`` in this order:

1. a deny rule of any layer that matches refuses it (a deny beats every allow);
2. with no matching allow rule in a layer that may allow (every layer but a project
   file's), it is refused;
3. if the project file's layers have allow rules of the action's kind, one of them must
   match too, or it is refused: a project file's allows only narrow the others;
4. a command that asks to run outside the walls (``Action.escalate``) always asks, whatever
   the approval and the grants: a way out is a person's decision, each time;
5. a write to a protected path (``PROTECTED_PATHS``: ``.trellisd.toml``, ``.git``, the
   editors' settings, ...) is refused unless a matching allow rule names it explicitly,
   and then always asks, whatever the approval and the grants (``never`` still refuses);
6. approval ``never`` refuses writes and commands (the session is read-only), and so does
   ``plan``, ahead of every other step: its refusal names the mode (``MODE_LAYER``);
7. approval ``auto`` allows what the walls hold (``sandbox``): a command while the walls are
   up, a write while they let the root be written (``workspace-write``); an MCP tool's call,
   and anything when the walls are ``off``, is treated as under ``ask``;
8. approval ``acceptEdits`` allows a write; approval ``ask`` (and ``auto`` and ``acceptEdits``
   for what they do not allow) asks the user before a write or a command, unless the session
   holds a grant for exactly that action or a rule that covers the command; reads never ask;
9. otherwise it is allowed.

A grant is what the user's "allow always" answer leaves behind: the action's kind and its
exact target (the root-relative path of a write, the exact command line of a command), or,
for an ``allowRule`` answer, a rule (``rules``: an argv prefix pattern) that covers a
command's argv. It only turns an "ask" into an "allow": it never lifts a deny, a missing
allow, approval ``plan`` or ``never``, a protected path's ask, or an escalation's.

The wire shape (camelCase), shared by ``session/open``'s ``policy``, ``.trellisd.toml`` and
the ``session/policy`` read-back::

    {"layers": [{"name": "...", "allowRead": [...], "allowWrite": [...], "allowExec": [...],
                 "denyRead": [...], "denyWrite": [...], "denyExec": [...]}],
     "approval": "all" | "auto" | "acceptEdits" | "ask" | "plan" | "never",
     "grants": [{"kind": "write" | "exec" | "rule", "target": "...", "rule"?: [...]}],
     "sandbox": "workspace-write" | "read-only" | "off",
     "network": false | true | ["host:port", ...],
     "task": {"enabled": true | false, "maxConcurrent": 1..16}}

Every key but a layer's ``name`` may be left out. ``PolicySpec`` (``session/open``'s
``policy``, as the store keeps it) and ``ProjectPolicy`` (a project file's keys) are that
shape as typed values, structured by the one converter; ``Policy.of`` makes the policy they
say. See ``globs`` for how patterns match.

``task`` (``TaskPolicy``) says whether the model may start child sessions with the ``task``
tool, and how many of one turn's may run at once. It is off unless the daemon's default or
``session/open``'s policy turns it on; a project file may only turn it off or lower the limit
(``TaskPolicy.narrowed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ..convert import Invalid, camel, nonempty, structure
from ..sandbox.walls import (
    DEFAULT_MODE,
    EDITOR_FILES,
    Network,
    SandboxMode,
    Walls,
    network_of,
    network_problem,
    network_wire,
)
from ..tools.base import Action
from ..tools.linear import LinearPattern
from .globs import GlobError, command_pattern, matches_path, path_pattern
from .rules import Grant, GrantKind, grant_key, grant_of, grant_wire, rule_covers, rule_of

Approval = Literal["all", "auto", "acceptEdits", "ask", "plan", "never"]
Ruling = Literal["allow", "ask", "refuse"]

STRICTNESS: dict[Approval, int] = {
    "all": 0,
    "auto": 1,
    "acceptEdits": 2,
    "ask": 3,
    "plan": 4,
    "never": 5,
}
APPROVAL_LAYER = "approval"
MODE_LAYER = "mode"
"""The ``layer`` of a refusal the approval mode made (``plan``), its ``rule`` the mode."""
GRANT_LAYER = "grant"
GrantScope = Literal["policy", "session", "project"]
GRANT_SCOPES: tuple[GrantScope, ...] = ("policy", "session", "project")
MAX_GLOB_CHARS = 4096
DEFAULT_MAX_CONCURRENT = 2
"""How many child sessions of one turn run at once when the policy names no limit."""
MOST_CONCURRENT = 16
MAX_GLOBS = 1000
"""The most globs one source (a project file, ``session/open``'s policy) may hold: each
action is matched against every one of them."""

PROTECTED_PATHS: tuple[str, ...] = (".trellisd.toml", "**/.git", "**/.envrc", *EDITOR_FILES)
"""Paths whose content makes the daemon, git, an editor or a shell run commands or loosen
the policy (a ``.trellisd.toml`` allowing every command, a ``core.fsmonitor`` in
``.git/config``, a git hook, an editor task, an ``.envrc``). A folder's pattern covers what
it holds."""


@dataclass(frozen=True)
class Verdict:
    """What the policy says of an action. For an allow or an ask, ``layer`` and ``rule`` are
    the allow rule that matched (``grant`` and the target for a granted action); for a
    refusal, the deny rule that refused it, ``approval`` and ``never`` when the session is
    read-only, or both None when no allow rule matched. ``reason`` is a sentence for the
    model and the user."""

    ruling: Ruling
    layer: str | None
    rule: str | None
    reason: str


@dataclass(frozen=True)
class TaskPolicy:
    """Whether the ``task`` tool is offered, and how many of one turn's children run at once
    (the others wait their turn)."""

    enabled: bool = False
    max_concurrent: int = DEFAULT_MAX_CONCURRENT

    def narrowed(self, project: TaskPolicy | None) -> TaskPolicy:
        """This, as a project file may change it: only turned off or its limit lowered."""
        if project is None:
            return self
        return TaskPolicy(
            self.enabled and project.enabled, min(self.max_concurrent, project.max_concurrent)
        )

    def to_wire(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "maxConcurrent": self.max_concurrent}


@dataclass(frozen=True)
class Layer:
    name: str
    allow_read: tuple[str, ...] = ()
    allow_write: tuple[str, ...] = ()
    allow_exec: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    deny_write: tuple[str, ...] = ()
    deny_exec: tuple[str, ...] = ()
    narrows: bool = False
    """A project file's layer: its allow rules can only narrow what the other layers
    allow, never widen it (its deny rules count as any layer's)."""

    def allows(self, action: Action) -> str | None:
        """The first allow rule of this layer that matches, if any."""
        return _first_match(getattr(self, f"allow_{action.kind}"), action)

    def denies(self, action: Action) -> str | None:
        """The first deny rule of this layer that matches, if any."""
        return _first_match(getattr(self, f"deny_{action.kind}"), action)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        for name in RULES:
            wire[camel(name)] = list(getattr(self, name))
        return wire


def _first_match(patterns: tuple[str, ...], action: Action) -> str | None:
    if action.kind == "exec":
        return next((p for p, m in _compiled(patterns, True) if m.fullmatch(action.target)), None)
    return next((p for p, m in _compiled(patterns, False) if m.search(action.target)), None)


@lru_cache(maxsize=512)
def _compiled(patterns: tuple[str, ...], command: bool) -> tuple[tuple[str, LinearPattern], ...]:
    """A rule list's patterns, compiled once for as long as a policy uses them."""
    compile_one = command_pattern if command else path_pattern
    return tuple((p, compile_one(p)) for p in patterns)


@dataclass(frozen=True)
class Policy:
    """Layers from the least specific to the most; ``approval`` None means "not set here"
    (a policy that is only a part of a stack) and behaves as ``ask``."""

    layers: tuple[Layer, ...] = ()
    approval: Approval | None = None
    grants: frozenset[Grant] = field(default_factory=frozenset)
    """Given with the policy itself (``session/open``'s ``policy``): scope ``policy``."""
    session_grants: frozenset[Grant] = field(default_factory=frozenset)
    """``allowAlways`` and ``allowRule`` answers, kept with the session in the store: scope
    ``session``."""
    project_grants: frozenset[Grant] = field(default_factory=frozenset)
    """``allowAlwaysProject`` and ``allowRuleProject`` answers, kept for every session over
    the same root: scope ``project``."""
    sandbox: SandboxMode | None = None
    """The walls' mode (``sandbox``); None: not set here (``workspace-write``)."""
    network: Network | None = None
    """What the walls let reach the network; None: not set here (``False``)."""
    writable: tuple[Path, ...] = ()
    """The caches programs may write besides the root (the config file's ``writable``)."""
    hidden: tuple[Path, ...] = ()
    """What programs may not even read (the secrets, the config file's ``hidden``)."""
    unconfined_servers: tuple[str, ...] = ()
    """The user's own MCP servers that run without walls (the config file's
    ``unconfinedMcp``)."""
    seen: Walls | None = field(default=None, compare=False)
    """The walls as a session at its root has them, shown by the read-back (``walls``)."""
    task: TaskPolicy | None = None
    """The ``task`` tool's switch and limit; None: not set here (off, when nothing sets it)."""

    @property
    def effective_task(self) -> TaskPolicy:
        return self.task or TaskPolicy()

    def granted(self, action: Action) -> bool:
        """Whether a grant allows ``action``: one for exactly it, or a rule that covers an
        exec's argv (``rules.rule_covers``)."""
        kept = (self.grants, self.session_grants, self.project_grants)
        if any(action in grants for grants in kept):
            return True
        argv = action.argv
        if action.kind != "exec" or argv is None:
            return False
        return any(
            rule_covers(grant, argv)
            for grants in kept
            for grant in grants
            if not isinstance(grant, Action)
        )

    @property
    def effective_approval(self) -> Approval:
        return self.approval or "ask"

    @property
    def effective_sandbox(self) -> SandboxMode:
        return self.sandbox or DEFAULT_MODE

    @property
    def effective_network(self) -> Network:
        return False if self.network is None else self.network

    def walls(
        self, root: Path, private: tuple[Path, ...] = (), quarantine: Path | None = None
    ) -> Walls:
        """The walls of the programs a session at ``root`` starts; ``private``: the
        daemon's own folders (its store), hidden too; ``quarantine``: where a protected
        path a program created is moved."""
        return Walls(
            self.effective_sandbox,
            self.effective_network,
            root,
            self.writable,
            self.hidden + private,
            unconfined_servers=frozenset(self.unconfined_servers),
            quarantine=quarantine,
        )

    def check(self, action: Action) -> Verdict:
        what = _describe(action)
        approval = self.effective_approval
        if approval == "plan" and action.kind != "read":
            return Verdict(
                "refuse",
                MODE_LAYER,
                "plan",
                f"{what} is refused: the session is in plan mode, where only reading,"
                " searching and update_plan run. Lay out the work with update_plan; the user"
                " runs the plan when they approve it.",
            )
        for layer in reversed(self.layers):
            rule = layer.denies(action)
            if rule is not None:
                return Verdict(
                    "refuse",
                    layer.name,
                    rule,
                    f"{what} is refused by the rule {rule!r} of the policy layer {layer.name!r}.",
                )
        allowing = [
            (layer.name, rule)
            for layer in reversed(self.layers)
            if not layer.narrows and (rule := layer.allows(action))
        ]
        if not allowing:
            return Verdict(
                "refuse", None, None, f"{what} is refused: no rule of the policy allows it."
            )
        narrowing = [
            layer
            for layer in self.layers
            if layer.narrows and getattr(layer, f"allow_{action.kind}")
        ]
        if narrowing and not any(layer.allows(action) for layer in narrowing):
            names = ", ".join(repr(layer.name) for layer in narrowing)
            return Verdict(
                "refuse",
                narrowing[-1].name,
                None,
                f"{what} is refused: the project's policy layers ({names}) do not allow it.",
            )
        layer_name, rule = allowing[0]
        if action.kind == "read":
            return Verdict("allow", layer_name, rule, f"{what} is allowed.")
        if action.escalate:
            return Verdict(
                "ask",
                layer_name,
                rule,
                f"{what} outside the walls needs a person's approval, every time.",
            )
        protected = _protected(action)
        if protected is not None:
            naming = next(
                (
                    (layer.name, rule)
                    for layer in reversed(self.layers)
                    if not layer.narrows
                    for rule in layer.allow_write
                    if _names(rule, protected) and matches_path(rule, action.target)
                ),
                None,
            )
            if naming is None:
                return Verdict(
                    "refuse",
                    None,
                    None,
                    f"{what} is refused: {action.target} is protected (its content can run"
                    f" commands or change the policy), and no allow rule names {protected}"
                    " explicitly.",
                )
            if approval != "never":
                return Verdict(
                    "ask",
                    *naming,
                    f"{what} needs the user's approval: {action.target} is protected (its"
                    " content can run commands or change the policy).",
                )
        if approval == "never":
            return Verdict(
                "refuse",
                APPROVAL_LAYER,
                "never",
                f"{what} is refused: this session is read-only (approval 'never').",
            )
        if approval == "auto" and self._walled(action):
            return Verdict("allow", layer_name, rule, f"{what} is allowed inside the walls.")
        if approval == "acceptEdits" and action.kind == "write":
            return Verdict("allow", layer_name, rule, f"{what} is allowed: edits are accepted.")
        if approval in ("ask", "auto", "acceptEdits"):
            if self.granted(action):
                return Verdict(
                    "allow", GRANT_LAYER, action.target, f"{what} is allowed for this session."
                )
            return Verdict("ask", layer_name, rule, f"{what} needs the user's approval.")
        return Verdict("allow", layer_name, rule, f"{what} is allowed.")

    def _walled(self, action: Action) -> bool:
        """Whether the walls hold what ``action`` does, so that approval ``auto`` need not
        ask: a command (not an MCP tool's call, whose server may be the user's own,
        unconfined, or remote) while the walls are up; a write while they let the root be
        written."""
        if action.kind == "exec":
            return self.effective_sandbox != "off" and not action.target.startswith("mcp:")
        return self.effective_sandbox == "workspace-write"

    def may_read(self, target: str) -> bool:
        """Whether reading the root-relative path ``target`` is allowed; for
        ``ToolContext.may_read``."""
        return self.check(Action("read", target)).ruling == "allow"

    def with_grant(self, grant: Grant) -> Policy:
        """This policy with ``grant`` allowed for the rest of the session, without asking."""
        return replace(self, session_grants=self.session_grants | {grant})

    def with_kept(self, session: frozenset[Grant], project: frozenset[Grant]) -> Policy:
        """This policy with the grants kept in the store for the session and its root."""
        return replace(self, session_grants=session, project_grants=project)

    def stacked(self, above: Policy) -> Policy:
        """This policy with ``above``'s layers on top; ``above``'s approval if it sets one."""
        return Policy(
            self.layers + above.layers,
            above.approval or self.approval,
            self.grants | above.grants,
            self.session_grants | above.session_grants,
            self.project_grants | above.project_grants,
            above.sandbox or self.sandbox,
            self.network if above.network is None else above.network,
            self.writable + above.writable,
            self.hidden + above.hidden,
            self.unconfined_servers + above.unconfined_servers,
            task=above.task or self.task,
        )

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "layers": [layer.to_wire() for layer in self.layers],
            "approval": self.effective_approval,
            "sandbox": self.effective_sandbox,
            "network": network_wire(self.effective_network),
            **({} if self.seen is None else {"walls": self.seen.to_wire()}),
            "grants": [
                {**grant_wire(g), "scope": scope}
                for g, scope in sorted(
                    [(g, "policy") for g in self.grants]
                    + [(g, "session") for g in self.session_grants]
                    + [(g, "project") for g in self.project_grants],
                    key=lambda gs: (*grant_key(gs[0]), GRANT_SCOPES.index(gs[1])),
                )
            ],
        }
        if self.task is not None:  # left out when no source says a word of it (off)
            wire["task"] = self.task.to_wire()
        return wire

    @classmethod
    def from_wire(cls, obj: Any) -> Policy:
        """A policy from ``session/open``'s ``policy`` param; ``InvalidParams`` names the
        field at fault (``policy.layers[1].denyWrite must be a list of strings``)."""
        return cls.of(structure(obj, PolicySpec, "policy"))

    @classmethod
    def of(cls, spec: PolicySpec | ProjectPolicy, *, narrows: bool = False) -> Policy:
        """The policy a typed policy says; a project file's layers ``narrow``."""
        grants = spec.grants if isinstance(spec, PolicySpec) else ()
        return cls(
            tuple(layer.layer(narrows=narrows) for layer in spec.layers),
            spec.approval,
            frozenset(g.grant() for g in grants),
            sandbox=spec.sandbox,
            network=None if spec.network is None else network_of(spec.network),
            task=None if spec.task is None else spec.task.policy(narrows=narrows),
        )


def _protected(action: Action) -> str | None:
    """The name of the protected entry a write's target is or lies in, if any."""
    return protected_entry(action.target) if action.kind == "write" else None


def protected_entry(target: str) -> str | None:
    """The name of the protected entry (``PROTECTED_PATHS``) the root-relative path
    ``target`` is or lies in, if any: ``.git`` for ``.git/hooks/post-checkout``."""
    for pattern in PROTECTED_PATHS:
        if matches_path(pattern, target):
            return pattern.rsplit("/", 1)[-1]
    return None


def _names(rule: str, name: str) -> bool:
    """Whether the allow rule names a protected entry explicitly: one of its parts is the
    entry's name, written out (``.vscode/settings.json``, ``**/.git/hooks/*``; not ``**``
    nor ``.*``)."""
    return name in rule.removeprefix("./").strip("/").split("/")


def _rules() -> Any:
    return attrs.field(
        default=(), validator=_no_empty_glob, metadata={"must": "be a list of strings"}
    )


def _no_empty_glob(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not all(value):
        raise Invalid.of(attribute, "must be a list of strings")


def _name() -> Any:
    problem = "must be a non-empty string"
    return attrs.field(validator=nonempty(problem), metadata={"must": problem[5:]})


@attrs.frozen
class LayerSpec:
    """A layer as written: a name and globs for each kind of action (see ``globs``)."""

    closed: ClassVar[str] = "layer"

    name: str = _name()
    allow_read: tuple[str, ...] = _rules()
    allow_write: tuple[str, ...] = _rules()
    allow_exec: tuple[str, ...] = _rules()
    deny_read: tuple[str, ...] = _rules()
    deny_write: tuple[str, ...] = _rules()
    deny_exec: tuple[str, ...] = _rules()

    def layer(self, *, narrows: bool) -> Layer:
        rules = {name: getattr(self, name) for name in RULES}
        return Layer(self.name, **rules, narrows=narrows)


RULES = tuple(a.name for a in attrs.fields(LayerSpec) if a.name != "name")


def _grant_target(instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value:
        raise Invalid.of(attribute, "must be a non-empty string")
    if instance.kind == "rule" and rule_of(value) is None:
        raise Invalid.of(attribute, "must be a rule: a JSON array of words, the program first")


@attrs.frozen
class GrantSpec:
    """An "allow always" answer as written: the action's kind and exact target, or kind
    ``rule`` and the rule as a JSON array (``["pytest","**"]``)."""

    kind: GrantKind = attrs.field(metadata={"must": "be one of 'read', 'write', 'exec' or 'rule'"})
    target: str = attrs.field(validator=_grant_target, metadata={"must": "be a non-empty string"})

    def grant(self) -> Grant:
        found = grant_of(self.kind, self.target)
        if found is None:  # the target's validator sees to it that this never happens
            raise ValueError(f"not a rule: {self.target}")
        return found


def _within_limits(_: Any, attribute: attrs.Attribute[Any], layers: tuple[LayerSpec, ...]) -> None:
    """At most ``MAX_GLOBS`` globs in all, each of them valid; counted before compiled."""
    globs = 0
    for index, layer in enumerate(layers):
        for name in RULES:
            value: tuple[str, ...] = getattr(layer, name)
            at = f"[{index}].{camel(name)}"
            globs += len(value)
            if globs > MAX_GLOBS:
                raise Invalid.of(attribute, f"brings the policy past {MAX_GLOBS} globs", at)
            for glob in value:
                problem = _glob_problem(glob, command=name.endswith("exec"))
                if problem is not None:
                    raise Invalid.of(attribute, problem, at)


def _layers() -> Any:
    return attrs.field(
        default=(), validator=_within_limits, metadata={"must": "be a list of layers"}
    )


def _approval() -> Any:
    return attrs.field(
        default=None,
        metadata={"must": "be one of 'all', 'auto', 'acceptEdits', 'ask', 'plan' or 'never'"},
    )


def _sandbox() -> Any:
    return attrs.field(
        default=None, metadata={"must": "be one of 'workspace-write', 'read-only' or 'off'"}
    )


def _valid_network(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    problem = None if value is None else network_problem(value)
    if problem is not None:
        raise Invalid.of(attribute, problem)


def _network() -> Any:
    return attrs.field(default=None, validator=_valid_network)


def _most_concurrent(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and not 1 <= value <= MOST_CONCURRENT:
        raise Invalid.of(attribute, f"must be an integer from 1 to {MOST_CONCURRENT}")


@attrs.frozen
class TaskSpec:
    """The ``task`` key as written: ``{enabled, maxConcurrent?}``."""

    closed: ClassVar[str] = "task"

    enabled: bool | None = attrs.field(default=None, metadata={"must": "be true or false"})
    max_concurrent: int | None = attrs.field(
        default=None,
        validator=_most_concurrent,
        metadata={"must": f"be an integer from 1 to {MOST_CONCURRENT}"},
    )

    def policy(self, *, narrows: bool = False) -> TaskPolicy:
        """What it says; what a project file's (``narrows``) leaves out it leaves be."""
        unnamed = MOST_CONCURRENT if narrows else DEFAULT_MAX_CONCURRENT
        limit = unnamed if self.max_concurrent is None else self.max_concurrent
        enabled = narrows if self.enabled is None else self.enabled
        return TaskPolicy(enabled, limit)


def _task() -> Any:
    return attrs.field(default=None, metadata={"must": "be an object {enabled, maxConcurrent?}"})


@attrs.frozen
class PolicySpec:
    """``session/open``'s ``policy``, as the session store keeps it."""

    closed: ClassVar[str] = "policy"

    layers: tuple[LayerSpec, ...] = _layers()
    approval: Approval | None = _approval()
    grants: tuple[GrantSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of {kind, target} objects"}
    )
    sandbox: SandboxMode | None = _sandbox()
    network: Any = _network()
    task: TaskSpec | None = _task()


@attrs.frozen
class ProjectPolicy:
    """The policy keys of a project's ``.trellisd.toml``; its other keys are left for other
    settings, and it cannot grant."""

    layers: tuple[LayerSpec, ...] = _layers()
    approval: Approval | None = _approval()
    sandbox: SandboxMode | None = _sandbox()
    network: Any = _network()
    task: TaskSpec | None = _task()


def _glob_problem(glob: str, *, command: bool) -> str | None:
    if len(glob) > MAX_GLOB_CHARS:
        return f"has a glob longer than {MAX_GLOB_CHARS} characters"
    try:
        (command_pattern if command else path_pattern)(glob)
    except GlobError as exc:
        return f"has an invalid glob: {exc}"
    return None


def _describe(action: Action) -> str:
    if action.kind == "read":
        return f"Reading {action.target}"
    if action.kind == "write":
        return f"Writing {action.target}"
    return f"Running `{action.target}`"
