"""The view's untrusted text: Markdown, diffs and the chart show it, never run it."""

from __future__ import annotations

import re

from trellisd.records import Tokens, Turn
from trellisd.view.markup import markdown, side_by_side, spending_chart, split_diff


def test_a_javascript_link_stays_text_and_a_web_link_is_a_link() -> None:
    html = markdown("[a](javascript:alert(1)) [b](https://example.com/x) [c](mailto:a@b.c)")
    assert 'href="javascript' not in html and "[a](javascript:alert(1))" in html
    assert '<a href="https://example.com/x">b</a>' in html
    assert '<a href="mailto:a@b.c">c</a>' in html


def test_other_schemes_and_tricks_stay_text() -> None:
    for url in ("JaVaScRiPt:alert(1)", " javascript:alert(1)", "data:text/html,x", "vbscript:x"):
        assert "href" not in markdown(f"[x]({url})"), url
    assert "href" not in markdown("<javascript:alert(1)>")


def test_raw_html_and_images_show_as_text() -> None:
    html = markdown('<script>alert(1)</script>\n\n<b onmouseover="x()">b</b> ![i](https://e/x.png)')
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b " not in html and "<img" not in html


def test_markdown_is_rendered() -> None:
    assert "<strong>lazy</strong>" in markdown("**lazy**")
    assert "<code>x &lt; 1</code>" in markdown("`x < 1`")


DIFF = """--- a/app.py
+++ b/app.py
@@ -1,3 +1,3 @@
 def parse(text):
-    return eager(text)
+    return lazy(text)  # <script>alert(1)</script>
 print('ready')
\\ No newline at end of file
"""


def test_a_unified_diff_splits_into_its_hunks_before_and_after() -> None:
    [hunk] = split_diff(DIFF)
    assert hunk.header == "@@ -1,3 +1,3 @@" and (hunk.before_start, hunk.after_start) == (1, 1)
    assert hunk.before == ["def parse(text):", "    return eager(text)", "print('ready')"]
    assert hunk.after[1] == "    return lazy(text)  # <script>alert(1)</script>"


def test_each_hunk_is_numbered_as_the_files_lines() -> None:
    later = "@@ -40,2 +41,2 @@\n keep\n-old\n+new\n"
    table = side_by_side("x", DIFF + later)
    assert table.count("<table") == 2 and "@@ -40,2 +41,2 @@" in table
    numbers = re.findall(r'<td class="diff_header"[^>]*>(\d+)</td>', table)
    assert numbers[:6] == ["1", "1", "2", "2", "3", "3"]
    assert numbers[6:] == ["40", "41", "41", "42"]


def test_the_side_by_side_table_escapes_the_lines() -> None:
    table = side_by_side("app.py", DIFF)
    assert "<script>" not in table and "&lt;script&gt;" in table
    assert "eager" in table and "lazy" in table and "app.py before" in table


def _turn(n: int, tokens: int, cost: float | None) -> Turn:
    return Turn(
        f"t-{n}", "s-1", None, f"r-{n}", "p", "", "finished", None, Tokens(tokens, 0), "", cost=cost
    )


def test_the_chart_draws_a_bar_a_turn_and_the_money_so_far() -> None:
    chart = spending_chart([_turn(1, 100, 0.5), _turn(2, 300, 1.5), _turn(3, 200, None)])
    assert chart.tokens == 600 and chart.usd == 2.0 and not chart.priced
    assert chart.svg.count("M") == 3  # one bar a turn, in one path
    points = chart.svg.split('points="')[1].split('"')[0].split()
    assert len(points) == 3  # the money so far after each turn, rising
    heights = [float(p.split(",")[1]) for p in points]
    assert heights[0] > heights[1] == heights[2]
    assert "$2.0000" in chart.svg and "300 tokens" in chart.svg


def test_the_chart_of_a_session_with_no_turns_is_empty() -> None:
    chart = spending_chart([])
    assert chart.tokens == 0 and chart.usd == 0.0 and "<svg" in chart.svg
