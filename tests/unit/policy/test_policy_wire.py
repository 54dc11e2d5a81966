"""Policy.from_wire and to_wire: the shape session/open sends and session/policy reads back."""

from __future__ import annotations

from typing import Any

import pytest

from trellisd.errors import InvalidParams
from trellisd.policy import DEFAULT_POLICY, Action, Layer, Policy

WIRE: dict[str, Any] = {
    "layers": [
        {
            "name": "editor",
            "allowRead": ["**"],
            "allowWrite": ["src/**"],
            "allowExec": ["pytest*"],
            "denyRead": [".env"],
            "denyWrite": ["src/generated/**"],
            "denyExec": ["git push*"],
        }
    ],
    "approval": "all",
    "grants": [{"kind": "exec", "target": "make test", "scope": "policy"}],
    "sandbox": "read-only",
    "network": ["pypi.org:443"],
}


def test_from_wire_reads_every_field() -> None:
    assert Policy.from_wire(WIRE) == Policy(
        (
            Layer(
                "editor",
                allow_read=("**",),
                allow_write=("src/**",),
                allow_exec=("pytest*",),
                deny_read=(".env",),
                deny_write=("src/generated/**",),
                deny_exec=("git push*",),
            ),
        ),
        "all",
        frozenset({Action("exec", "make test")}),
        sandbox="read-only",
        network=("pypi.org:443",),
    )


def test_to_wire_round_trips() -> None:
    assert Policy.from_wire(WIRE).to_wire() == WIRE
    effective = DEFAULT_POLICY.stacked(Policy.from_wire(WIRE))
    assert Policy.from_wire(effective.to_wire()) == effective


def test_grants_say_where_they_are_kept() -> None:
    kept = DEFAULT_POLICY.stacked(Policy.from_wire({"grants": WIRE["grants"]})).with_kept(
        frozenset({Action("write", "b")}), frozenset({Action("exec", "make test")})
    )
    assert kept.to_wire()["grants"] == [
        {"kind": "exec", "target": "make test", "scope": "policy"},
        {"kind": "exec", "target": "make test", "scope": "project"},
        {"kind": "write", "target": "b", "scope": "session"},
    ]
    assert kept.check(Action("write", "b")).ruling == "allow"


def test_everything_but_a_layer_name_may_be_left_out() -> None:
    assert Policy.from_wire({}) == Policy()
    assert Policy.from_wire({"layers": [{"name": "x"}]}) == Policy((Layer("x"),))
    assert Policy.from_wire({"approval": "never"}).to_wire() == {
        "layers": [],
        "approval": "never",
        "grants": [],
        "sandbox": "workspace-write",
        "network": False,
    }


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ([], "policy must be an object"),
        ({"layers": {}}, "policy.layers must be a list of layers"),
        ({"layers": ["x"]}, "policy.layers[0] must be an object"),
        ({"layers": [{}]}, "policy.layers[0].name must be a non-empty string"),
        ({"layers": [{"name": ""}]}, "policy.layers[0].name must be a non-empty string"),
        (
            {"layers": [{"name": "a"}, {"name": "b", "denyWrite": "src/**"}]},
            "policy.layers[1].denyWrite must be a list of strings",
        ),
        (
            {"layers": [{"name": "a", "allowExec": ["ok", 3]}]},
            "policy.layers[0].allowExec must be a list of strings",
        ),
        (
            {"layers": [{"name": "a", "allowRead": [""]}]},
            "policy.layers[0].allowRead must be a list of strings",
        ),
        ({"layers": [{"name": "a", "allowExecute": []}]}, "policy.layers[0].allowExecute is not"),
        (
            {"approval": "sometimes"},
            "policy.approval must be one of 'all', 'auto', 'acceptEdits', 'ask', 'plan' or 'never'",
        ),
        ({"aproval": "all"}, "policy.aproval is not a policy field"),
        ({"grants": [{"kind": "delete", "target": "x"}]}, "policy.grants[0].kind must be one of"),
        ({"grants": [{"kind": "exec"}]}, "policy.grants[0].target must be a non-empty string"),
    ],
)
def test_from_wire_errors_name_the_field(wire: Any, message: str) -> None:
    with pytest.raises(InvalidParams) as raised:
        Policy.from_wire(wire)
    assert raised.value.message.startswith(message)
    assert raised.value.CODE == -32602
    assert raised.value.data["field"] == message.split(" ")[0]
