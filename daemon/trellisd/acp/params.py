"""The params of ACP's requests, read from the plain JSON the client sent: a missing field or
one of the wrong type is the client's mistake, a -32602 naming the field (``data.errors``,
each with its ``loc``, ``msg`` and ``type``). Unknown fields, ``_meta`` among them, are
ignored."""

from __future__ import annotations

from typing import Any

from .rpc import RpcError

Params = dict[str, Any]
BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
    "resource": (),
}
"""The prompt's content blocks: each type and the string fields it needs."""


def invalid(loc: list[str | int], msg: str, kind: str) -> RpcError:
    return RpcError.invalid_params({"errors": [{"loc": loc, "msg": msg, "type": kind}]})


def of(raw: Any) -> Params:
    """The params object itself."""
    if not isinstance(raw, dict):
        raise invalid([], "Input should be a valid dictionary", "model_type")
    return raw


def text(params: Params, name: str, where: list[str | int] | None = None) -> str:
    """A string field the request needs."""
    loc = [*(where or []), name]
    if name not in params:
        raise invalid(loc, "Field required", "missing")
    value = params[name]
    if not isinstance(value, str):
        raise invalid(loc, "Input should be a valid string", "string_type")
    return value


def maybe_text(params: Params, name: str) -> str | None:
    """A string field the request may leave out (or send as null)."""
    return None if params.get(name) is None else text(params, name)


def mcp_servers(params: Params, required: bool) -> list[Params] | None:
    """``mcpServers``: entries that are not an MCP server of a kind ACP names are left out, as
    ACP's reference SDK leaves them out."""
    if params.get("mcpServers") is None:
        if required:
            raise invalid(["mcpServers"], "Field required", "missing")
        return None
    servers = params["mcpServers"]
    if not isinstance(servers, list):
        raise invalid(["mcpServers"], "Input should be a valid list", "list_type")
    return [s for s in servers if mcp_kind(s) is not None]


def mcp_kind(server: Any) -> str | None:
    """``http``, ``sse``, ``acp`` or ``stdio`` when ``server`` has that kind's fields."""
    if not isinstance(server, dict) or not isinstance(server.get("name"), str):
        return None
    kind = server.get("type")
    if kind in ("http", "sse") and isinstance(server.get("url"), str):
        if _pairs(server.get("headers")):
            return str(kind)
    if kind == "acp" and isinstance(server.get("serverId"), str):
        return "acp"
    args = server.get("args")
    if isinstance(server.get("command"), str) and isinstance(args, list):
        if all(isinstance(a, str) for a in args) and _pairs(server.get("env")):
            return "stdio"
    return None


def _pairs(value: Any) -> bool:
    """A list of ``{name, value}`` (environment variables, HTTP headers)."""
    return isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("value"), str)
        for p in value
    )


def prompt(params: Params) -> list[Params]:
    """``prompt``: content blocks of ACP's five types."""
    if "prompt" not in params:
        raise invalid(["prompt"], "Field required", "missing")
    blocks = params["prompt"]
    if not isinstance(blocks, list):
        raise invalid(["prompt"], "Input should be a valid list", "list_type")
    for index, block in enumerate(blocks):
        where: list[str | int] = ["prompt", index]
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in BLOCK_FIELDS:
            raise invalid(where, f"Input tag {kind!r} does not match a content block", "union_tag")
        for name in BLOCK_FIELDS[kind]:
            text(block, name, where)
        if kind == "resource":
            resource = block.get("resource")
            if not isinstance(resource, dict):
                raise invalid([*where, "resource"], "Field required", "missing")
            text(resource, "uri", [*where, "resource"])
            if not isinstance(resource.get("blob"), str):
                text(resource, "text", [*where, "resource"])
    return blocks
