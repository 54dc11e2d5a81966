"""ACP's messages as frozen attrs types, structured from the client's JSON by the one converter
(``convert``), as the native protocol's requests are (``trellisd.wire``): camelCase on the wire,
snake_case here, a -32602 naming the field for a missing field or one of the wrong type. Keys a
type does not have (``_meta`` among them) are ignored, as ACP requires; the ACP v1 JSON schema
is the reference (``tests/golden/acp/`` holds one message of each kind, checked against it).

    requests       what the client asks: ``Initialize`` ... ``Prompt``, and ``Cancel``
    ContentBlock   a prompt's blocks, tagged by ``type``: text, image, audio, resource_link,
                   resource
    AcpMcpServer   an MCP server as ACP gives it, stdio (untagged), http, sse or acp; each
                   becomes trellisd's ``McpServerSpec`` (``spec``), or is refused
    results        what the agent answers: ``InitializeResult`` ... ``PromptResult``
    to the client  ``SessionNotification`` (``session/update``: a ``SessionUpdate`` of the
                   kinds trellisd sends, tagged by ``sessionUpdate``), ``RequestPermission``,
                   ``ReadTextFile``, ``WriteTextFile``, the ``terminal/*`` requests
                   (``CreateTerminal``, ``TerminalRef``) and their answers
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from ..convert import Invalid, camel, converter, json_type
from ..mcp.spec import McpServerSpec
from ..services.images import ImageInput

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


# -- tagged unions ---------------------------------------------------------------------------


def tagged(
    union: Any, kinds: dict[str, type], untagged: type | None = None, tag: str = "type"
) -> None:
    """Structure ``union`` by its ``tag`` key and write each member with its tag, through the
    one converter. An unknown or missing tag is the ``untagged`` member when there is one (as
    ACP's stdio MCP server), else a -32602 naming the tag's field and the tags there are."""
    names = ", ".join(repr(k) for k in kinds)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise Invalid(f"must be an object, not {json_type(value)}")
        kind = value.get(tag)
        cls = kinds.get(kind) if isinstance(kind, str) else None
        if cls is None and untagged is None:
            raise Invalid(f"must be one of {names}", tag)
        chosen: Any = cls or untagged
        return converter.structure(value, chosen)

    converter.register_structure_hook_func(lambda t: t == union, structure)
    for kind, cls in kinds.items():
        _with_tag(cls, tag, kind)


def _with_tag(cls: type, tag: str, kind: str) -> None:
    """Write ``cls`` with its tag first (over one a base class of it wrote)."""
    plain: Callable[[Any], dict[str, Any]] = converter.get_unstructure_hook(cls)

    def unstructure(value: Any) -> dict[str, Any]:
        fields = plain(value)
        fields.pop(tag, None)
        return {tag: kind, **fields}

    converter.register_unstructure_hook(cls, unstructure)


def lenient(cls: type) -> None:
    """Structure ``cls`` field by field, a field of the wrong type taking its default, as ACP's
    schema has it for capabilities (``x-deserialize-default-on-error``)."""
    fields = attrs.fields(attrs.resolve_types(cls))

    def structure(value: Any, _: Any) -> Any:
        given = value if isinstance(value, dict) else {}
        kept: dict[str, Any] = {}
        for field in fields:
            raw = given.get(camel(field.name))
            if raw is None:
                continue
            try:
                kept[field.name] = converter.structure(raw, field.type)
            except Exception:  # the default instead, as ACP says
                continue
        return cls(**kept)

    converter.register_structure_hook(cls, structure)


# -- content blocks -----------------------------------------------------------------------------


@attrs.frozen
class TextContent:
    text: str


@attrs.frozen
class ImageContent:
    data: str
    mime_type: str
    uri: str | None = None


@attrs.frozen
class AudioContent:
    data: str
    mime_type: str


@attrs.frozen
class ResourceLink:
    uri: str
    name: str


@attrs.frozen
class TextResource:
    uri: str
    text: str
    mime_type: str | None = None


@attrs.frozen
class BlobResource:
    uri: str
    blob: str
    mime_type: str | None = None


Resource = TextResource | BlobResource


def _resource(value: Any, _: Any) -> Resource:
    """An embedded resource: its ``blob`` when it has one, else its ``text``."""
    if isinstance(value, dict) and isinstance(value.get("blob"), str):
        return converter.structure(value, BlobResource)
    return converter.structure(value, TextResource)


converter.register_structure_hook_func(lambda t: t == Resource, _resource)


@attrs.frozen
class EmbeddedResource:
    resource: Resource


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
tagged(
    ContentBlock,
    {
        "text": TextContent,
        "image": ImageContent,
        "audio": AudioContent,
        "resource_link": ResourceLink,
        "resource": EmbeddedResource,
    },
)


def prompt_images(blocks: Sequence[ContentBlock]) -> tuple[ImageInput, ...]:
    """The prompt's image blocks as the turn's images, in order (their ``uri`` aside)."""
    return tuple(
        ImageInput(data=b.data, mime_type=b.mime_type)
        for b in blocks
        if isinstance(b, ImageContent)
    )


def prompt_text(blocks: Sequence[ContentBlock]) -> str:
    """The prompt's text: text blocks as they are, embedded resources as the file's text under
    its URI, resource links as the URI they name; images (``prompt_images``) and audio are
    not read here."""
    parts = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResource):
            resource = block.resource
            parts.append(f"<context uri={resource.uri!r}>\n{resource.text}\n</context>")
        elif isinstance(block, ResourceLink):
            parts.append(f"(see {block.uri})")
    return "\n\n".join(parts)


# -- MCP servers ----------------------------------------------------------------------------------


@attrs.frozen
class NameValue:
    """An environment variable (``EnvVariable``) or an HTTP header (``HttpHeader``)."""

    name: str
    value: str


def _table(entries: tuple[NameValue, ...]) -> dict[str, str] | None:
    return {e.name: e.value for e in entries} or None


@attrs.frozen
class StdioServer:
    """ACP's ``McpServerStdio``: the one kind without a ``type``."""

    name: str
    command: str
    args: tuple[str, ...]
    env: tuple[NameValue, ...]

    def spec(self) -> McpServerSpec:
        return McpServerSpec(self.name, command=self.command, args=self.args, env=_table(self.env))


@attrs.frozen
class UrlServer:
    """A server at ``url``, sent ``headers``: ACP's ``McpServerSse``, which trellisd does not
    offer (``mcpCapabilities.sse``), and the base of ``HttpServer``."""

    name: str
    url: str
    headers: tuple[NameValue, ...]

    def spec(self) -> McpServerSpec:
        raise Invalid("only stdio and streamable HTTP servers are served")


SseServer = UrlServer


@attrs.frozen
class HttpServer(UrlServer):
    """ACP's ``McpServerHttp``: streamable HTTP."""

    def spec(self) -> McpServerSpec:
        return McpServerSpec(self.name, url=self.url, headers=_table(self.headers))


@attrs.frozen
class AcpServer:
    """ACP's ``McpServerAcp``, which trellisd does not offer (``mcpCapabilities.acp``)."""

    name: str
    server_id: str

    def spec(self) -> McpServerSpec:
        raise Invalid("only stdio and streamable HTTP servers are served")


AcpMcpServer = StdioServer | HttpServer | UrlServer | AcpServer
tagged(AcpMcpServer, {"http": HttpServer, "sse": SseServer, "acp": AcpServer}, StdioServer)
McpServers = tuple[AcpMcpServer, ...]


def _servers(value: Any, _: Any) -> McpServers:
    """``mcpServers``: an entry that is not an MCP server of a kind ACP names is left out, as
    ACP's reference SDK leaves it out."""
    if not isinstance(value, list):
        raise Invalid(f"must be an array, not {json_type(value)}")
    kept: list[AcpMcpServer] = []
    server: Any = AcpMcpServer
    for entry in value:
        try:
            kept.append(converter.structure(entry, server))
        except Exception:
            continue
    return tuple(kept)


converter.register_structure_hook_func(lambda t: t == McpServers, _servers)


def specs(servers: McpServers | None) -> list[McpServerSpec]:
    """The servers as trellisd's; one it does not serve, or whose fields trellisd refuses (a
    name with ``__``, a URL that is not HTTP), is the client's mistake, named by its place."""
    out = []
    for index, server in enumerate(servers or ()):
        try:
            out.append(server.spec())
        except Invalid as exc:
            where = f"mcpServers[{index}]" + (f".{exc.field}" if exc.field else "")
            raise Invalid(exc.problem, where) from None
    return out


# -- the client's requests ------------------------------------------------------------------------


@attrs.frozen
class FileSystemCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False


@attrs.frozen
class ClientCapabilities:
    fs: FileSystemCapabilities = FileSystemCapabilities()
    terminal: bool = False


lenient(FileSystemCapabilities)
lenient(ClientCapabilities)


@attrs.frozen
class Implementation:
    name: str
    version: str
    title: str | None = None


@attrs.frozen
class Initialize:
    protocol_version: int
    client_capabilities: ClientCapabilities = ClientCapabilities()

    @property
    def files(self) -> tuple[bool, bool]:
        """Whether the client reads and writes text files for the agent."""
        fs = self.client_capabilities.fs
        return fs.read_text_file, fs.write_text_file


@attrs.frozen
class Authenticate:
    method_id: str


@attrs.frozen
class NewSession:
    cwd: str
    mcp_servers: McpServers

    def __attrs_post_init__(self) -> None:
        specs(self.mcp_servers)


@attrs.frozen
class LoadSession:
    session_id: str
    cwd: str
    mcp_servers: McpServers

    def __attrs_post_init__(self) -> None:
        specs(self.mcp_servers)


@attrs.frozen
class ResumeSession:
    """``session/resume``, and ``session/fork`` (a fork of the session's head)."""

    session_id: str
    cwd: str
    mcp_servers: McpServers | None = None

    def __attrs_post_init__(self) -> None:
        specs(self.mcp_servers)


ForkSession = ResumeSession


@attrs.frozen
class ListSessions:
    cwd: str | None = None
    cursor: str | None = None


@attrs.frozen
class CloseSession:
    session_id: str


@attrs.frozen
class Cancel:
    """``session/cancel``, a notification: stop the session's running turn."""

    session_id: str


@attrs.frozen
class SetSessionMode:
    session_id: str
    mode_id: str


@attrs.frozen
class SetConfigOption:
    """A select option's ``value`` is a value id; a ``type: "boolean"`` option's, a boolean."""

    session_id: str
    config_id: str
    value: str | bool = attrs.field()
    type_: str | None = None  # "boolean", or left out (any other is a value id's too)

    @value.validator
    def _typed(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if self.type_ == "boolean" and not isinstance(value, bool):
            raise Invalid.of(attribute, f"must be true or false, not {json_type(value)}")
        if self.type_ != "boolean" and not isinstance(value, str):
            raise Invalid.of(attribute, f"must be a string, not {json_type(value)}")


converter.register_structure_hook_func(lambda t: t == str | bool, lambda value, _: value)


@attrs.frozen
class Prompt:
    session_id: str
    prompt: tuple[ContentBlock, ...]


# -- the agent's results --------------------------------------------------------------------------


@attrs.frozen
class PromptCapabilities:
    image: bool
    audio: bool
    embedded_context: bool


@attrs.frozen
class McpCapabilities:
    http: bool
    sse: bool
    acp: bool


@attrs.frozen
class Capability:
    """An empty object: the capability is there (``sessionCapabilities.list``, ``auth``)."""


@attrs.frozen
class SessionCapabilities:
    list: Capability | None = None
    fork: Capability | None = None
    resume: Capability | None = None


@attrs.frozen
class AgentCapabilities:
    load_session: bool
    prompt_capabilities: PromptCapabilities
    mcp_capabilities: McpCapabilities
    session_capabilities: SessionCapabilities
    auth: Capability


@attrs.frozen
class InitializeResult:
    protocol_version: int
    agent_capabilities: AgentCapabilities
    auth_methods: tuple[dict[str, Any], ...]
    agent_info: Implementation


@attrs.frozen
class SessionMode:
    id: str
    name: str
    description: str


@attrs.frozen
class SessionModeState:
    current_mode_id: str
    available_modes: tuple[SessionMode, ...]


@attrs.frozen
class SelectValue:
    value: str
    name: str


@attrs.frozen
class SelectOption:
    """A config option of ``type: "select"`` (the model)."""

    id: str
    name: str
    current_value: str
    options: tuple[SelectValue, ...]
    category: str | None = None


_with_tag(SelectOption, "type", "select")


@attrs.frozen
class SessionState:
    """``session/load``'s and ``session/resume``'s result: the session's modes and options."""

    modes: SessionModeState
    config_options: tuple[SelectOption, ...]


@attrs.frozen
class NewSessionResult:
    """``session/new``'s and ``session/fork``'s result."""

    session_id: str
    modes: SessionModeState
    config_options: tuple[SelectOption, ...]


@attrs.frozen
class SessionInfo:
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None


@attrs.frozen
class ListSessionsResult:
    sessions: tuple[SessionInfo, ...]
    next_cursor: str | None = None


@attrs.frozen
class ConfigOptions:
    """``session/set_config_option``'s result."""

    config_options: tuple[SelectOption, ...]


@attrs.frozen
class Empty:
    """The result of ``session/set_mode`` and ``session/close``."""


@attrs.frozen
class PromptResult:
    stop_reason: StopReason


# -- to the client -------------------------------------------------------------------------------


@attrs.frozen
class ToolCallBlock:
    """A tool call's content: a content block (its output, its result)."""

    content: ContentBlock


@attrs.frozen
class ToolCallDiff:
    """A tool call's content: the change it makes, or made, to the file at ``path``."""

    path: str
    new_text: str
    old_text: str | None = None


@attrs.frozen
class ToolCallTerminal:
    """A tool call's content: a terminal of the client's (``terminal/create``), shown live."""

    terminal_id: str


ToolCallContent = ToolCallBlock | ToolCallDiff | ToolCallTerminal
tagged(
    ToolCallContent,
    {"content": ToolCallBlock, "diff": ToolCallDiff, "terminal": ToolCallTerminal},
)

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]


@attrs.frozen
class UserMessageChunk:
    content: ContentBlock


@attrs.frozen
class AgentMessageChunk:
    content: ContentBlock


@attrs.frozen
class AgentThoughtChunk:
    """``agent_thought_chunk``: a piece of what the model reasons, as it streams."""

    content: ContentBlock


@attrs.frozen
class ToolCallStart:
    """``tool_call``: a tool call the client has not seen yet."""

    tool_call_id: str
    title: str
    kind: ToolKind | None = None
    status: ToolStatus | None = None
    content: tuple[ToolCallContent, ...] | None = None
    raw_input: dict[str, Any] | None = None
    raw_output: str | None = None


@attrs.frozen
class ToolCallProgress:
    """``tool_call_update``: the fields of a tool call that changed."""

    tool_call_id: str
    status: ToolStatus | None = None
    content: tuple[ToolCallContent, ...] | None = None
    raw_output: str | None = None


@attrs.frozen
class CurrentModeUpdate:
    current_mode_id: str


@attrs.frozen
class AcpPlanEntry:
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


@attrs.frozen
class AgentPlanUpdate:
    """``plan``: the turn's whole plan, each update replacing the one before."""

    entries: tuple[AcpPlanEntry, ...]


@attrs.frozen
class Cost:
    amount: float
    currency: str


@attrs.frozen
class UsageUpdate:
    """The context ``used`` of ``size`` tokens, and what the session cost so far."""

    used: int
    size: int
    cost: Cost | None = None


@attrs.frozen
class SessionInfoUpdate:
    title: str | None = None
    updated_at: str | None = None


@attrs.frozen
class CommandInput:
    """An ``AvailableCommand``'s ``input``: whatever is typed after its name, with a hint."""

    hint: str


@attrs.frozen
class AvailableCommand:
    name: str
    description: str
    input: CommandInput | None = None


@attrs.frozen
class AvailableCommandsUpdate:
    """``available_commands_update``: the session's custom commands, ``/name`` in a prompt."""

    available_commands: tuple[AvailableCommand, ...]


SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | CurrentModeUpdate
    | AgentPlanUpdate
    | UsageUpdate
    | SessionInfoUpdate
    | AvailableCommandsUpdate
)
tagged(
    SessionUpdate,
    {
        "user_message_chunk": UserMessageChunk,
        "agent_message_chunk": AgentMessageChunk,
        "agent_thought_chunk": AgentThoughtChunk,
        "tool_call": ToolCallStart,
        "tool_call_update": ToolCallProgress,
        "current_mode_update": CurrentModeUpdate,
        "plan": AgentPlanUpdate,
        "usage_update": UsageUpdate,
        "session_info_update": SessionInfoUpdate,
        "available_commands_update": AvailableCommandsUpdate,
    },
    tag="sessionUpdate",
)


@attrs.frozen
class SessionNotification:
    """``session/update``: one update of a session the client follows."""

    session_id: str
    update: SessionUpdate


@attrs.frozen
class PermissionOption:
    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


@attrs.frozen
class PermissionToolCall:
    tool_call_id: str
    title: str
    kind: str


@attrs.frozen
class RequestPermission:
    """``session/request_permission``: the user picks one of ``options`` for a tool call."""

    session_id: str
    tool_call: PermissionToolCall
    options: tuple[PermissionOption, ...]


@attrs.frozen
class PermissionOutcome:
    """``selected`` (with ``optionId``) or ``cancelled``."""

    outcome: str
    option_id: str | None = None


@attrs.frozen
class PermissionAnswer:
    outcome: PermissionOutcome

    @property
    def chosen(self) -> str | None:
        """The option the user picked; None when the request was cancelled."""
        return self.outcome.option_id if self.outcome.outcome == "selected" else None


@attrs.frozen
class ReadTextFile:
    session_id: str
    path: str


@attrs.frozen
class FileText:
    """``fs/read_text_file``'s answer."""

    content: str


@attrs.frozen
class WriteTextFile:
    session_id: str
    path: str
    content: str


@attrs.frozen
class EnvVariable:
    name: str
    value: str


@attrs.frozen
class CreateTerminal:
    """``terminal/create``: a command run in one of the client's terminals."""

    session_id: str
    command: str
    args: list[str]
    env: list[EnvVariable]
    cwd: str
    output_byte_limit: int


@attrs.frozen
class TerminalCreated:
    """``terminal/create``'s answer."""

    terminal_id: str


@attrs.frozen
class TerminalRef:
    """``terminal/output``, ``terminal/wait_for_exit``, ``terminal/kill`` and
    ``terminal/release``."""

    session_id: str
    terminal_id: str


@attrs.frozen
class TerminalExitStatus:
    """How a terminal's command ended (``terminal/wait_for_exit``'s answer too)."""

    exit_code: int | None = None
    signal: str | None = None


@attrs.frozen
class TerminalOutput:
    """``terminal/output``'s answer."""

    output: str
    truncated: bool = False
    exit_status: TerminalExitStatus | None = None
