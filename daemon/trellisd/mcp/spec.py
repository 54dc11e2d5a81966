"""An MCP server as written: ``{name, command, args?, env?, cwd?}`` (stdio) or ``{name, url,
headers?}`` (streamable HTTP), the shape of ``session/open``'s ``mcpServers``, of a ``[[mcp]]``
table of a project's ``.trellisd.toml`` and of the config file's entries; an ACP client's
servers (``acp.wire``) become the same ``McpServerSpec``. ``env`` and ``headers`` are a table
of names to strings, or ACP's list of ``{name, value}``. ``timeout`` (seconds) bounds each
call to the server's tools.

A name is 1 to 32 letters, digits, ``-`` and ``_`` without ``__``, since the model sees the
server's tools as ``mcp__<server>__<tool>``.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, Literal

import attrs

from ..convert import Invalid, converter
from ..tools.environment import secret_name

Source = Literal["session", "project", "config"]
NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
MAX_ARGS = 256
MAX_VALUE_CHARS = 8192
MAX_ENTRIES = 64
MAX_TIMEOUT_SECONDS = 3600.0

Pairs = Annotated[dict[str, str], "pairs"]
"""Environment variables or HTTP headers: ``{NAME = "value"}``, or ACP's ``[{name, value}]``."""


def pairs(value: Any, _: Any = None) -> dict[str, str]:
    """``value`` as a table of names to strings (``Invalid`` when it is neither form)."""
    items: list[tuple[Any, Any]]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list) and all(
        isinstance(v, dict) and {"name", "value"} <= set(v) for v in value
    ):
        items = [(v["name"], v["value"]) for v in value]
    else:
        raise Invalid("must be a table of names to strings (or a list of {name, value})")
    if not all(isinstance(n, str) and n and isinstance(t, str) for n, t in items):
        raise Invalid("must map non-empty names to strings")
    return dict(items)


converter.register_structure_hook_func(lambda t: t == Pairs, pairs)


def _name(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not NAME.fullmatch(value) or "__" in value:
        raise Invalid.of(attribute, "must be 1 to 32 letters, digits, '-' or '_', without '__'")


def _strings(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if len(value) > MAX_ARGS:
        raise Invalid.of(attribute, f"must have at most {MAX_ARGS} items")
    for index, item in enumerate(value):
        if len(item) > MAX_VALUE_CHARS or "\x00" in item:
            raise Invalid.of(
                attribute,
                f"must be shorter than {MAX_VALUE_CHARS} characters, without NUL",
                f"[{index}]",
            )


def _table(_: Any, attribute: attrs.Attribute[Any], value: Pairs | None) -> None:
    if value is None:
        return
    if len(value) > MAX_ENTRIES:
        raise Invalid.of(attribute, f"must have at most {MAX_ENTRIES} entries")
    for key, item in value.items():
        if not key or "=" in key or "\x00" in key or "\x00" in item or len(item) > MAX_VALUE_CHARS:
            raise Invalid.of(attribute, "must map names to strings (no '=' or NUL)", f".{key}")


def _optional_text(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not value or len(value) > MAX_VALUE_CHARS or "\x00" in value):
        raise Invalid.of(attribute, "must be a non-empty string")


def _timeout(_: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise Invalid.of(
            attribute, f"must be a number of seconds from 0 to {MAX_TIMEOUT_SECONDS:g}"
        )


@attrs.frozen
class McpServerSpec:
    """One MCP server: ``command`` (with ``args``, ``env``, ``cwd``) or ``url`` (with
    ``headers``), never both."""

    name: str = attrs.field(validator=_name)
    command: str | None = attrs.field(default=None, validator=_optional_text)
    args: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    env: Pairs | None = attrs.field(default=None, validator=_table)
    cwd: str | None = attrs.field(default=None, validator=_optional_text)
    url: str | None = attrs.field(default=None, validator=_optional_text)
    headers: Pairs | None = attrs.field(default=None, validator=_table)
    timeout: float | None = attrs.field(default=None, validator=_timeout)

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise Invalid("needs either command (stdio) or url (streamable HTTP), not both", "")
        if self.url is not None:
            if not re.match(r"https?://", self.url):
                raise Invalid("must be an http:// or https:// URL", "url")
            if self.args or self.env or self.cwd is not None:
                raise Invalid("args, env and cwd are for a command, not a url", "")
        elif self.headers:
            raise Invalid("are for a url, not a command", "headers")

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def command_line(self) -> str:
        """What the user approves of a project's server: its exact command line, with the
        variables its entry sets before it and its folder after it, or its URL."""
        return self._line(redact=False)

    @property
    def shown_line(self) -> str:
        """``command_line`` with the values of variables named like secrets (``*TOKEN*``,
        ``*KEY*``...) left out: what events and ``session/tools`` show."""
        return self._line(redact=True)

    def _line(self, *, redact: bool) -> str:
        if self.command is None:
            return self.url or ""
        assigned = [
            f"{shlex.quote(name)}=…"
            if redact and secret_name(name)
            else shlex.quote(f"{name}={value}")
            for name, value in sorted((self.env or {}).items())
        ]
        line = " ".join([*assigned, shlex.join([self.command, *self.args])])
        return line if self.cwd is None else f"{line} (in {shlex.quote(self.cwd)})"


@attrs.frozen
class ProjectServers:
    """The ``[[mcp]]`` tables of a project's ``.trellisd.toml``; its other keys are other
    settings'."""

    mcp: tuple[McpServerSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of [[mcp]] tables"}
    )


@attrs.frozen
class Configured:
    """An MCP server with where it came from."""

    spec: McpServerSpec
    source: Source
