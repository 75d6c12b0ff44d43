"""A Snakemake report opened in headless Chromium: its front page names where to start, and every link of the
summary page (REPORT with the recipe after it) is followed to its target.

    .venv/bin/python bench/report_links.py results/cpu-demo/report.html [--chromium /usr/bin/chromium] [--out PATH]

Needs Debian's Chromium (``apt-get install chromium``: /usr/bin/chromium) and Playwright's Python driver
(``pip install playwright``, which drives that browser; it downloads no browser of its own here). The report
holds each page as a ``data:`` URL, where a link to another page (the old ``RECIPE.html#...``) leads nowhere:
tests/test_pipeline_e2e.py checks statically that every link of the summary page is an anchor of that page;
this script follows each in the browser as a reader would: the front page is opened, its "Start here" link and
the result's view button clicked (the summary page must open, in the report's iframe), then every link of that
page clicked: the page must scroll so that the link's target is at the top (or the page is at its end) and the
URL's fragment be the link's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

from aoe.publish.report import embedded_pages  # noqa: E402

# the flags this machine's Chromium needs headless (no network, no sandbox as root)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def follow(report: Path, chromium: str) -> dict:
    """Open the report, click its front page's "Start here" link and the result's view button (the report shows
    a page in an iframe of its data: URL), then click every link of that page inside the iframe."""
    from playwright.sync_api import sync_playwright

    pages = embedded_pages(report)
    out: dict = {"report": str(report), "pages": sorted(pages)}
    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(report.resolve().as_uri())
        page.wait_for_timeout(1500)  # the report's app renders after load
        front = page.inner_text("body")
        out["front_page_starts_with_summary"] = "Start here" in front
        out["front_page_line"] = next((line for line in front.splitlines() if "Start here" in line), None)
        frame = None
        try:
            page.get_by_role("link", name="REPORT.html").first.click(timeout=5000)
            page.wait_for_timeout(800)
            page.locator("a[iconname=eye]").first.click(timeout=5000)  # the result's "view" button
            page.wait_for_timeout(1500)
            frame = next((f for f in page.frames if f.url.startswith("data:text/html") and "REPORT.html" in f.url), None)
        except Exception as e:  # noqa: BLE001 - recorded: the JSON says what failed
            out["front_page_click_error"] = str(e)[:300]
        out["start_here_opens_the_summary"] = frame is not None
        if frame is not None:
            hrefs = frame.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
            for i, href in enumerate(hrefs):
                frame.evaluate("window.scrollTo(0, 0); history.replaceState(null, '', '#')")
                start = time.perf_counter()
                frame.locator("a[href]").nth(i).click()
                page.wait_for_timeout(100)
                state = frame.evaluate(
                    """(href) => {
                        const id = href.startsWith('#') ? decodeURIComponent(href.slice(1)) : null;
                        const el = id ? document.getElementById(id) : null;
                        const atEnd = Math.ceil(window.scrollY + window.innerHeight) >= document.documentElement.scrollHeight - 2;
                        return {hash: location.hash, target_exists: !!el, scrolled_to: Math.round(window.scrollY),
                                target_top: el ? Math.round(el.getBoundingClientRect().top) : null, at_end: atEnd};
                    }""",
                    href,
                )
                ok = href.startswith("#") and state["target_exists"] and state["hash"] == href and (
                    abs(state["target_top"]) <= 2 or state["at_end"])
                results.append({"href": href, "ok": bool(ok), **state, "seconds": round(time.perf_counter() - start, 3)})
        browser.close()
    out["links"] = len(results)
    out["links_followed_ok"] = sum(r["ok"] for r in results)
    out["failed"] = [r for r in results if not r["ok"]]
    out["results"] = results
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", default=None, help="JSON path (default bench/out/report_links.json)")
    args = ap.parse_args()
    record = {"command": "python bench/report_links.py " + " ".join(sys.argv[1:]), **follow(args.report, args.chromium)}
    path = C.write_json("report_links", record, args.out)
    C.print_table(f"Links of {args.report} followed in headless Chromium",
                  ["check", "result"],
                  [["front page says where to start", record["front_page_starts_with_summary"]],
                   ["'Start here' opens the summary page", record["start_here_opens_the_summary"]],
                   ["links of the summary page", record["links"]],
                   ["followed to their target", record["links_followed_ok"]]])
    for r in record["failed"]:
        print(f"  failed: {r['href']} -> {r}")
    print(f"wrote {path}")
    if record["failed"] or not record["front_page_starts_with_summary"] or not record["links"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
