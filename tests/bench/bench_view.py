"""The browser view of a long session: a ``--turns``-turn session (a branch, tool calls, a
change set, a plan) written into a store, ``trellisd view`` serving it, and headless Chromium
(/usr/bin/chromium through playwright) loading its page; then ``trellisd report`` of it,
loaded from file://.

    python tests/bench/bench_view.py [--turns 2000] [--rounds 5]

Prints, for the served page (with its cookie, after the one-time token's redirect) and for
the report: the median and best first-contentful-paint and load (the browser's own
navigation timing), the page's size, and how long the server took to answer the page and
``report`` to write the file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "daemon")]

from tests.fixtures.chromium import ARGS, CHROMIUM  # noqa: E402
from tests.fixtures.view_sessions import fill_view_session  # noqa: E402

VIEWPORT = {"width": 1280, "height": 900}
TIMING = """async () => {
  const paint = await new Promise((done) => {
    new PerformanceObserver((list) => {
      const found = list.getEntriesByName("first-contentful-paint");
      if (found.length) done(found[0].startTime);
    }).observe({ type: "paint", buffered: true });
    setTimeout(() => done(null), 10000);  // no paint reported: say so rather than wait
  });
  const nav = performance.getEntriesByType("navigation")[0];
  return { fcp: paint, load: nav.loadEventEnd, response: nav.responseEnd - nav.requestStart,
           bytes: nav.decodedBodySize };
}"""


def measure(browser: Any, url: str, rounds: int) -> list[dict[str, float]]:
    figures = []
    for _ in range(rounds):
        page = browser.new_page()
        page.bring_to_front()
        page.goto(url, wait_until="load")
        figures.append(page.evaluate(TIMING))
        page.close()
    return figures


def report(name: str, figures: list[dict[str, float]]) -> None:
    for key in ("fcp", "load", "response"):
        values = [f[key] for f in figures if f[key] is not None]
        if not values:
            print(f"{name:<8} {key:<9} not reported")
            continue
        print(
            f"{name:<8} {key:<9} median {statistics.median(values):7.0f} ms"
            f"  best {min(values):7.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "root").mkdir()
        db = tmp / "s.db"
        session_id = fill_view_session(db, tmp / "root", args.turns, title="bench")
        env = {**os.environ, "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "config")}
        print(f"a session of {args.turns} turns")
        command = [sys.executable, "-m", "trellisd"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            with subprocess.Popen(
                [*command, "view", session_id, "--db", str(db)],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            ) as view:
                assert view.stdout is not None
                url = view.stdout.readline().strip()
                try:
                    context = browser.new_context(viewport=VIEWPORT)
                    first = context.new_page()
                    first.goto(url)  # trades the token for the cookie
                    plain = first.url
                    first.close()
                    figures = measure(context, plain, args.rounds)
                finally:
                    view.terminate()
                report("page", figures)
                print(f"page     size      {figures[0]['bytes'] / 1024:7.0f} KiB")
            out = tmp / "report.html"
            began = time.perf_counter()
            subprocess.run(
                [*command, "report", session_id, "-o", str(out), "--db", str(db)],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
            )
            written = time.perf_counter() - began
            print(
                f"report   written   {written * 1000:7.0f} ms  {out.stat().st_size / 1024:.0f} KiB"
            )
            report(
                "report", measure(browser.new_context(viewport=VIEWPORT), out.as_uri(), args.rounds)
            )
            browser.close()


if __name__ == "__main__":
    main()
