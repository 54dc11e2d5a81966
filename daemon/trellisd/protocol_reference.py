"""The protocol reference, written from ``protocol/schema.json``: every request, the daemon's
request, every notification and shape with its fields, types and meanings, and the error
codes.

``python -m trellisd.protocol_reference`` writes ``protocol/reference.md`` beside the schema;
a test checks that the committed file is what this writes, so the reference never drifts from
the schema it is read from.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .vocabulary import ErrorCode

SECTIONS = (
    ("requests", "Requests", "Client to daemon: the client asks, the daemon answers."),
    (
        "clientRequests",
        "Daemon requests",
        "Daemon to client: the daemon asks, the client answers.",
    ),
    ("notifications", "Notifications", "No answer: daemon to client, except `$/cancelRequest`."),
)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, no punctuation, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[1]


def _link(name: str) -> str:
    return f"[{name}](#{slug(name)})"


def _word(value: Any) -> str:
    return f"`{json.dumps(value) if value is None or isinstance(value, bool) else value}`"


def _bounds(node: dict[str, Any]) -> str:
    parts = []
    if "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if "exclusiveMinimum" in node:
        parts.append(f"> {node['exclusiveMinimum']}")
    if "maximum" in node:
        parts.append(f"≤ {node['maximum']}")
    if node.get("minLength") == 1:
        parts.append("non-empty")
    elif node.get("minLength"):
        parts.append(f"at least {node['minLength']} characters")
    if "maxLength" in node:
        parts.append(f"at most {node['maxLength']} characters")
    if "pattern" in node:
        parts.append(f"matching `{node['pattern']}`")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} items")
    if "maxItems" in node:
        parts.append(f"at most {node['maxItems']} items")
    return f" ({', '.join(parts)})" if parts else ""


def type_of(node: dict[str, Any]) -> str:
    """A field's type in words, shapes linked to their section."""
    if "$ref" in node:
        return _link(_ref_name(node["$ref"]))
    if "const" in node:
        return f"always {_word(node['const'])}"
    if "enum" in node:
        return "one of " + ", ".join(_word(v) for v in node["enum"])
    for key, glue in (("anyOf", " or "), ("oneOf", " or "), ("allOf", " and ")):
        if key in node and not any(k in node for k in ("type", "properties")):
            return glue.join(type_of(part) for part in node[key])
    if "type" not in node and "properties" in node:
        bases = [type_of(part) for part in node.get("allOf", []) if "$ref" in part]
        return " and ".join([*bases, "the fields below"]) if bases else "object"
    kinds = node.get("type", "any")
    names = []
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "array" and "items" in node:
            names.append(f"array of {type_of(node['items'])}")
        elif kind == "object" and isinstance(node.get("additionalProperties"), dict):
            names.append(f"object of {type_of(node['additionalProperties'])}")
        else:
            names.append(kind)
    return " or ".join(names) + _bounds(node)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _inline(node: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The object a field holds inline (itself, its non-null branch or its items), with the
    suffix its fields are named under."""
    if "properties" in node:
        return "", node
    for key in ("anyOf", "oneOf"):
        for part in node.get(key, []):
            if "properties" in part:
                return "", part
    items = node.get("items")
    if isinstance(items, dict) and "properties" in items:
        return "[]", items
    return None


def _rows(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    required = set(node.get("required", []))
    for name, field in node.get("properties", {}).items():
        yield (
            f"`{prefix}{name}`",
            type_of(field),
            "yes" if name in required else "no",
            field.get("description", ""),
        )
        inline = _inline(field)
        if inline is not None:
            suffix, inner = inline
            yield from _rows(inner, f"{prefix}{name}{suffix}.")


def _conditions(node: dict[str, Any]) -> Iterator[str]:
    for part in node.get("allOf", []):
        if "if" not in part:
            continue
        (field, test), *_ = part["if"]["properties"].items()
        present = ", ".join(f"`{n}`" for n in part["then"]["required"])
        line = f"When `{field}` is {_word(test['const'])}: {present} present"
        if "else" in part:
            line += "; otherwise absent"
        yield line + "."


def _object(node: dict[str, Any]) -> list[str]:
    """The lines describing one params, result or shape object."""
    out: list[str] = []
    if node.get("description"):
        out += [node["description"], ""]
    bases = [_link(_ref_name(p["$ref"])) for p in node.get("allOf", []) if "$ref" in p]
    if bases:
        out += [
            f"All the fields of {', '.join(bases)}, and:"
            if "properties" in node
            else f"The fields of {', '.join(bases)}.",
            "",
        ]
    rows = list(_rows(node))
    if rows:
        out += ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
        out += [f"| {' | '.join(_cell(c) for c in row)} |" for row in rows]
        out.append("")
    elif not bases:
        out += [f"Type: {type_of(node)}.", ""]
    alternatives = [p["required"] for p in node.get("oneOf", []) if set(p) == {"required"}]
    if alternatives:
        either = " or ".join(", ".join(f"`{n}`" for n in names) for names in alternatives)
        out += [f"Exactly one of: {either}.", ""]
    for condition in _conditions(node):
        out += [condition, ""]
    if node.get("additionalProperties") is False or node.get("unevaluatedProperties") is False:
        if rows or bases:
            out += ["No other fields.", ""]
    return out


def _part(title: str, node: dict[str, Any] | None) -> list[str]:
    if node is None:
        return []
    if "$ref" in node and len(node) == 1:
        return [f"**{title}**: {type_of(node)}.", ""]
    if "properties" not in node and "allOf" not in node:
        return [f"**{title}**: {type_of(node)}{_describe(node)}.", ""]
    return [f"**{title}**:", "", *_object(node)]


def _describe(node: dict[str, Any]) -> str:
    return f": {node['description']}" if node.get("description") else ""


def _shape(name: str, node: dict[str, Any]) -> list[str]:
    out = [f"### {name}", ""]
    if "enum" in node and "properties" not in node:
        if node.get("description"):
            out += [node["description"], ""]
        out += ["| value |", "| --- |", *(f"| {_word(v)} |" for v in node["enum"]), ""]
        return out
    return out + _object(node)


def render(schema: dict[str, Any]) -> str:
    """The whole reference as Markdown."""
    out = [
        "# Protocol reference",
        "",
        "Written from [`schema.json`](schema.json) by `python -m trellisd.protocol_reference`;",
        "do not edit it by hand. The [protocol](README.md) pages say what each message does.",
        f"Protocol version: **{schema['protocolVersion']}**.",
        "",
        "Contents: "
        + " · ".join(f"[{title.lower()}](#{slug(title)})" for _, title, _ in SECTIONS)
        + " · [shapes](#shapes) · [error codes](#error-codes)",
        "",
    ]
    for key, title, what in SECTIONS:
        methods = schema[key]
        out += [f"## {title}", "", what, ""]
        out += ["| method | params | result |", "| --- | --- | --- |"]
        for method, spec in methods.items():
            result = type_of(spec["result"]) if "result" in spec else "none"
            if "result" in spec and "properties" in spec["result"]:
                result = "object"
            params = spec.get("params", {})
            fields = ", ".join(f"`{n}`" for n in params.get("properties", {}))
            bases = ", ".join(
                _link(_ref_name(p["$ref"]))
                for p in [params, *params.get("allOf", [])]
                if "$ref" in p
            )
            takes = ", ".join(filter(None, [bases, fields])) or "none"
            out.append(f"| [`{method}`](#{slug(method)}) | {_cell(takes)} | {_cell(result)} |")
        out.append("")
        for method, spec in methods.items():
            out += [f"### `{method}`", ""]
            if spec.get("description"):
                out += [spec["description"], ""]
            out += _part("Params", spec.get("params"))
            out += _part("Result", spec.get("result"))
    out += ["## Shapes", "", "The `$defs` of the schema, which the messages above refer to.", ""]
    for name, node in schema["$defs"].items():
        out += _shape(name, node)
    codes = schema["$defs"]["Error"]["properties"]["code"]["enum"]
    out += [
        "## Error codes",
        "",
        "Every code an error answer ([Error](#error)) may carry.",
        "",
        "| code | name |",
        "| --- | --- |",
        *(f"| `{c}` | {ErrorCode(c).name.lower().replace('_', ' ')} |" for c in codes),
        "",
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    """Write the reference of the schema named in ``argv`` (default: protocol/schema.json)
    beside it, as reference.md."""
    schema_path = Path(argv[0] if argv else "protocol/schema.json")
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    (schema_path.parent / "reference.md").write_text(render(schema), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
