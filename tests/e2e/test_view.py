"""``trellisd view`` and ``trellisd report`` in a real headless Chromium: the page draws with
no console error, the tree opens a turn and its diff, the chart is there, a hostile prompt
and link show as text and run nothing, strangers and other Hosts are refused, and the report
loads from file:// with no request leaving it. Screenshots go to ``.ci/artifacts/view/``."""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.chromium import ARGS, CHROMIUM
from tests.fixtures.environment import hermetic_env
from tests.fixtures.view_sessions import HOSTILE_PROMPT, fill_view_session

SHOTS = Path(__file__).resolve().parents[2] / ".ci" / "artifacts" / "view"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium here")


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    root = tmp_path / "root"
    root.mkdir()
    db = tmp_path / "s.db"
    return db, fill_view_session(db, root, 12, title="lazy parser"), hermetic_env(tmp_path / "h")


@pytest.fixture
def view(store: tuple[Path, str, dict[str, str]]) -> Iterator[str]:
    """A ``trellisd view SESSION`` process; the URL it printed."""
    db, session_id, env = store
    with subprocess.Popen(
        [sys.executable, "-m", "trellisd", "view", session_id, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), process.stderr.read()
            yield url
        finally:
            process.terminate()
        assert process.wait(timeout=60) == 0
        assert process.stderr.read() == ""


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


def _page(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    loud = ("error", "warning")
    page.on("console", lambda m: problems.append(m.text) if m.type in loud else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    return page, problems


def test_the_page_draws_the_tree_a_diff_and_the_chart_and_runs_nothing_it_shows(
    view: str, browser: Any
) -> None:
    page, problems = _page(browser)
    page.goto(view)
    assert "token=" not in page.url  # traded for the cookie
    page.wait_for_selector(".verify .ok")  # the log's verdict, fetched
    assert page.locator("nav.tree .rows li").count() == 12
    assert page.locator("nav.tree .rows li.d1").count() == 1  # the branch
    assert page.locator("svg.chart path.bars").count() == 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "session.png"))

    page.locator("nav.tree .rows a", has_text="make the parser lazy").click()
    page.wait_for_selector("details[open] table.diff")
    assert page.locator("details[open] .event.refusal").count() == 1
    page.locator("details[open] table.diff").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "diff.png"))

    page.locator("nav.tree .rows a").first.click()
    first = page.locator("details[open]").first
    first.locator(".step").first.wait_for()
    assert first.locator("pre.text").first.inner_text() == HOSTILE_PROMPT
    link = first.get_by_text("the docs")
    assert link.get_attribute("href") == "https://example.com/"
    assert first.locator("a[href^='javascript']").count() == 0
    assert "[a link](javascript:" in first.inner_text()
    page.screenshot(path=str(SHOTS / "hostile.png"))
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0

    page.locator("nav.tree a", has_text="all sessions").click()
    page.get_by_label("search sessions").fill("streaming")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/?q=streaming")
    assert page.locator(".session-list li").count() == 1
    assert "lazy parser" in page.locator(".session-list").inner_text()
    page.screenshot(path=str(SHOTS / "sessions.png"))
    assert problems == []


def test_an_unknown_session_is_said_in_one_line(store: tuple[Path, str, dict[str, str]]) -> None:
    db, _, env = store
    for command in (["view", "s-nope"], ["report", "s-nope", "-o", str(db.parent / "r.html")]):
        done = subprocess.run(
            [sys.executable, "-m", "trellisd", *command, "--db", str(db)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "s-nope" in done.stderr, done.stderr


def test_a_stranger_and_another_host_are_refused(view: str) -> None:
    host, port = view.split("/")[2].split(":")
    for headers, path in (
        ({}, "/"),  # no token, no cookie
        ({}, "/" + view.split("/", 3)[3].replace("token=", "token=x")),  # a made-up token
        ({"Host": f"rebound.example:{port}"}, "/" + view.split("/", 3)[3]),  # DNS rebinding
    ):
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            connection.request("GET", path, headers=headers)
            answer = connection.getresponse()
            assert answer.status == 403, (headers, path)
            assert answer.getheader("Set-Cookie") is None
        finally:
            connection.close()


def test_the_report_loads_from_a_file_with_no_request_leaving_it(
    store: tuple[Path, str, dict[str, str]], browser: Any, tmp_path: Path
) -> None:
    db, session_id, env = store
    out = tmp_path / "session.html"
    done = subprocess.run(
        [sys.executable, "-m", "trellisd", "report", session_id, "-o", str(out), "--db", str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    page, problems = _page(browser)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    page.locator("nav.tree .rows a", has_text="make the parser lazy").click()
    page.wait_for_selector("details[open] table.diff")
    assert page.locator("details.turn").count() == 12
    assert page.locator("details.turn .step").count() >= 12  # every turn is in the file
    assert page.locator(".verify .ok").count() == 1
    page.screenshot(path=str(SHOTS / "report.png"))
    page.locator("nav.tree .rows a").first.click()
    assert page.evaluate("window.__pwned") is None
    assert requests == [out.as_uri()]
    assert problems == []
