"""The ACP v1 JSON schema the TypeScript ACP SDK ships (``.ci/acp-setup.sh`` installs it),
and the check that a message ``trellisd acp`` sent is one of the agent's messages in it.
The schema holds the stable methods and the unstable ones, ``session/fork`` among them."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SDK = Path(__file__).parent / "acp_client" / "node_modules" / "@agentclientprotocol" / "sdk"
SCHEMA = SDK / "schema" / "schema.json"
MISSING = "the TypeScript ACP SDK is not installed: run .ci/acp-setup.sh"


def available() -> bool:
    return SCHEMA.is_file()


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    agent = next(branch for branch in schema["anyOf"] if branch.get("title") == "Agent")
    cls = jsonschema.validators.validator_for(schema)
    return cls({**agent, "$defs": schema["$defs"]})  # type: ignore[no-any-return]


def check(message: dict[str, Any]) -> None:
    """``message`` (a request, answer or notification the agent sent) fits the schema."""
    errors = sorted(_validator().iter_errors(message), key=lambda e: e.path)
    assert not errors, f"{json.dumps(message)[:400]} does not fit the ACP schema: {errors[0]}"
