"""Requests are structured once, at the wire, into typed values; a bad one is a -32602 that
names the field."""

from __future__ import annotations

from typing import Any

import pytest

from trellisd import wire
from trellisd.config import InitializationOptions
from trellisd.convert import structure
from trellisd.errors import InvalidParams
from trellisd.policy import GrantSpec, LayerSpec, PolicySpec
from trellisd.records import ProviderChoice


def test_camel_case_fields_become_typed_values() -> None:
    turn = wire.parse(
        wire.SessionTurn,
        {
            "sessionId": "s-1",
            "prompt": "fix it",
            "maxSteps": 5,
            "temperature": 1,
            "verify": {"argv": ["pytest", "-q"], "expectExit": 1},
            "unknownKey": "ignored",
        },
    )
    assert turn == wire.SessionTurn("s-1", "fix it", None, 1.0, 5, wire.Verify(["pytest", "-q"], 1))
    assert turn.choice == ProviderChoice(temperature=1.0)


@pytest.mark.parametrize("raw", [None, [], {}, {"root": None, "limit": None, "cursor": None}])
def test_params_left_out_null_or_empty_are_no_params(raw: Any) -> None:
    assert wire.parse(wire.SessionList, raw) == wire.SessionList()


def test_a_session_s_provider_choice_is_typed_and_extra_keys_are_dropped() -> None:
    opened = wire.parse(
        wire.SessionOpen,
        {"root": "/r", "provider": {"baseUrl": "http://x", "maxRetries": 2, "apiKey": "k"}},
    )
    assert opened.provider == ProviderChoice(base_url="http://x", max_retries=2)


def test_a_session_s_policy_is_typed() -> None:
    opened = wire.parse(
        wire.SessionOpen,
        {
            "root": "/r",
            "policy": {
                "layers": [{"name": "editor", "allowWrite": ["src/**"], "denyExec": ["git*"]}],
                "approval": "never",
                "grants": [{"kind": "exec", "target": "make"}],
            },
        },
    )
    assert opened.policy == PolicySpec(
        (LayerSpec("editor", allow_write=("src/**",), deny_exec=("git*",)),),
        "never",
        (GrantSpec("exec", "make"),),
    )


@pytest.mark.parametrize(
    ("cls", "raw", "field", "words"),
    [
        (wire.SessionOpen, {}, "root", "root is required"),
        (wire.SessionOpen, {"root": 42}, "root", "root must be a string, not a number"),
        (wire.SessionOpen, ["x"], "params", "params must be an object"),
        (wire.SessionOpen, {"root": "/", "provider": 3}, "provider", "must be an object"),
        (
            wire.SessionOpen,
            {"root": "/", "provider": {"temperature": "hot"}},
            "provider.temperature",
            "provider.temperature must be a number, not a string",
        ),
        (wire.SessionRef, {"sessionId": None}, "sessionId", "sessionId is required"),
        (wire.SessionList, {"limit": True}, "limit", "limit must be a whole number, not a boolean"),
        (wire.SessionList, {"limit": 0}, "limit", "limit must be from 1 to 1000"),
        (wire.SessionTurn, {"sessionId": "s", "prompt": " "}, "prompt", "must not be empty"),
        (wire.SessionTurn, {"sessionId": "s"}, "prompt", "give a prompt, or a command"),
        (
            wire.SessionTurn,
            {"sessionId": "s", "prompt": "p", "command": "fix"},
            "prompt",
            "a prompt or a command, not both",
        ),
        (wire.SessionTurn, {"sessionId": "s", "prompt": "p", "arguments": "x"}, "arguments", "go"),
        (wire.SessionTurn, {"sessionId": "s", "command": " "}, "command", "must not be empty"),
        (
            wire.SessionTurn,
            {"sessionId": "s", "prompt": "p", "verify": {"argv": "pytest"}},
            "verify.argv",
            "verify.argv must be an array, not a string",
        ),
        (
            wire.SessionTurn,
            {"sessionId": "s", "prompt": "p", "verify": {"argv": ["a", 1]}},
            "verify.argv[1]",
            "verify.argv[1] must be a string, not a number",
        ),
        (
            wire.SessionOpen,
            {"root": "/", "policy": {"layers": [{"name": "a", "denyWrite": ["a", 2]}]}},
            "policy.layers[0].denyWrite",
            "policy.layers[0].denyWrite must be a list of strings",
        ),
        (
            wire.SessionOpen,
            {"root": "/", "policy": {"layers": [{"name": "a", "deny": []}]}},
            "policy.layers[0].deny",
            "is not a layer field (expected allowExec, allowRead,",
        ),
        (wire.SessionBranch, {"sessionId": "s"}, "turnId", "turnId is required"),
        (wire.RunRef, {"runId": True}, "runId", "runId must be a string, not a boolean"),
    ],
)
def test_a_bad_request_names_its_field(cls: type, raw: Any, field: str, words: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        wire.parse(cls, raw)
    assert caught.value.data["field"] == field
    assert words in caught.value.message


def test_a_branch_to_before_the_first_turn_is_an_explicit_null() -> None:
    assert wire.parse(wire.SessionBranch, {"sessionId": "s", "turnId": None}).turn_id is None


def test_initialization_options_name_their_option() -> None:
    options = structure(
        {"provider": "openai", "apiKey": "k", "readTimeout": 5}, InitializationOptions, "x"
    )
    assert (options.provider, options.api_key, options.read_timeout) == ("openai", "k", 5.0)
    with pytest.raises(InvalidParams) as caught:
        structure({"maxTokens": "many"}, InitializationOptions, "initializationOptions")
    assert caught.value.data["field"] == "initializationOptions.maxTokens"
