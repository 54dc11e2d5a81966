"""The approval summary: one line that hides nothing."""

from __future__ import annotations

from trellisd.services.seams import summary_line


def test_line_breaks_and_control_characters_are_written_as_escapes() -> None:
    assert summary_line("rm -rf x\n\r\techo \x1b[2Jok") == "rm -rf x\\n\\r\\techo \\u001b[2Jok"


def test_invisible_format_characters_are_shown() -> None:
    assert summary_line("a\u202eb\u200bc\u2066d\u2028e") == "a\\u202eb\\u200bc\\u2066d\\u2028e"


def test_plain_text_and_other_scripts_are_left_alone() -> None:
    assert summary_line("write_file wants to write src/é/日本.py") == (
        "write_file wants to write src/é/日本.py"
    )


def test_a_long_summary_is_cut_and_says_how_much_is_left() -> None:
    line = summary_line("x" * 510, limit=500)
    assert line == "x" * 500 + "… (10 more characters)"
