"""The protocol schema (protocol/schema.json) as a checker for what the daemon sends."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "protocol" / "schema.json"


@cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def _validator(section: str, method: str, part: str) -> jsonschema.Draft202012Validator:
    root = schema()
    if method not in root[section]:
        raise AssertionError(f"{method} is not in protocol/schema.json {section}")
    sub = {"$defs": root["$defs"], **root[section][method][part]}
    return jsonschema.Draft202012Validator(sub)


def check(section: str, method: str, part: str, value: Any) -> None:
    """Raise if ``value`` is not what the schema says ``method``'s ``part`` is."""
    errors = sorted(_validator(section, method, part).iter_errors(value), key=str)
    if errors:
        raise AssertionError(
            f"{section} {method} {part} does not match protocol/schema.json: "
            + "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
            + f"\n{json.dumps(value)[:2000]}"
        )


def check_error(error: dict[str, Any]) -> None:
    errors = list(
        jsonschema.Draft202012Validator(
            {"$defs": schema()["$defs"], "$ref": "#/$defs/Error"}
        ).iter_errors(error)
    )
    if errors:
        raise AssertionError(f"error {error} does not match the schema: {errors[0].message}")
