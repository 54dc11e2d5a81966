"""Custom command files: front matter, ``$ARGUMENTS`` and ``$1``.., bounds, bad files."""

from __future__ import annotations

import pytest

from trellisd.commands import (
    MAX_FILE_BYTES,
    CommandError,
    CommandSettings,
    expand,
    name_of,
    parse,
    unknown_keys,
)

FIX_TESTS = b"""---
description: Make the tests pass
argument-hint: [test path]
verify: pytest -q "$1"
maxSteps: 30
budget: 0.5
model: small-model
approval: acceptEdits
effort: high
---
Make `pytest $ARGUMENTS` pass. Change the code, not the tests.
"""


def test_front_matter_gives_the_description_the_hint_and_the_turns_settings() -> None:
    command = parse("fix-tests", "user", FIX_TESTS)
    assert command.description == "Make the tests pass"
    assert command.argument_hint == "[test path]"
    assert command.settings == CommandSettings(
        verify=("pytest", "-q", "$1"),
        max_steps=30,
        budget=0.5,
        model="small-model",
        approval="acceptEdits",
        effort="high",
    )
    assert command.expand("tests/unit") == (
        "Make `pytest tests/unit` pass. Change the code, not the tests."
    )
    assert command.verify("'tests/a b.py' -x") == ["pytest", "-q", "tests/a b.py"]


def test_arguments_alone_in_a_check_word_are_its_words() -> None:
    command = parse("t", "user", b"---\nverify: pytest -q $ARGUMENTS\n---\nGo.")
    assert command.verify("tests/unit -x") == ["pytest", "-q", "tests/unit", "-x"]
    assert command.verify("") == ["pytest", "-q"]


def test_verify_as_a_json_array_keeps_each_word_whole() -> None:
    command = parse("t", "user", b'---\nverify: ["make", "check all"]\n---\nGo.')
    assert command.settings.verify == ("make", "check all")


def test_numbered_placeholders_take_the_words_and_a_missing_word_is_empty() -> None:
    assert expand("from $1 to $2, then $3.", "a 'b c'") == "from a to b c, then ."


def test_arguments_no_placeholder_takes_are_added_after_the_prompt() -> None:
    assert expand("Review the diff.\n", "focus on errors") == "Review the diff.\n\nfocus on errors"
    assert expand("Review the diff.", "") == "Review the diff."


def test_a_file_without_front_matter_is_all_prompt() -> None:
    command = parse("hello", "project", b"Say hello to $ARGUMENTS.")
    assert command.description is None and command.settings == CommandSettings()
    assert command.expand("the team") == "Say hello to the team."


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"---\ndescription: x\nNo end.", "no closing"),
        (b"---\nmaxSteps: 0\n---\nGo.", "maxSteps"),
        (b"---\nmaxSteps: many\n---\nGo.", "maxSteps"),
        (b"---\nbudget: -1\n---\nGo.", "budget"),
        (b"---\napproval: whatever\n---\nGo.", "approval"),
        (b"---\neffort: max\n---\nGo.", "effort"),
        (b"---\nverify: []\n---\nGo.", "verify"),
        (b"---\nverify: [1, 2]\n---\nGo.", "verify"),
        (b"---\njust words\n---\nGo.", "key: value"),
        (b"---\nmodel: a\nmodel: b\n---\nGo.", "twice"),
        (b"---\ndescription: x\n---\n  \n", "empty"),
        (b"\xff\xfe", "UTF-8"),
        (b"x" * (MAX_FILE_BYTES + 1), "bytes"),
    ],
)
def test_a_bad_file_is_refused_with_its_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(CommandError, match=reason):
        parse("bad", "user", raw)


def test_keys_it_does_not_know_are_ignored_and_named() -> None:
    raw = b"---\nallowed-tools: Bash\ndescription: d\n---\nGo."
    assert parse("x", "user", raw).description == "d"
    assert unknown_keys(raw) == ["allowed-tools"]


@pytest.mark.parametrize(
    ("filename", "name"),
    [
        ("fix-tests.md", "fix-tests"),
        ("a_1.md", "a_1"),
        ("Fix.md", None),
        ("-x.md", None),
        ("a b.md", None),
        ("notes.txt", None),
        (".md", None),
        ("x" * 65 + ".md", None),
    ],
)
def test_only_lowercase_names_are_commands(filename: str, name: str | None) -> None:
    assert name_of(filename) == name


def test_the_wire_form_names_the_source_and_only_the_settings_given() -> None:
    command = parse("fix-tests", "project", b"---\nmaxSteps: 3\n---\nGo.")
    assert command.to_wire() == {
        "name": "fix-tests",
        "source": "project",
        "settings": {"maxSteps": 3},
    }
