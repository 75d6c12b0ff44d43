"""A Snakemake report opened in headless Chromium at 1,400 px: it opens on the summary page (REPORT with the recipe
after it), its front page's "Start here" link shows that page in one click, every link of the page is followed to
its target, no table of the summary or the recipe page runs past the right edge, and the rule graph draws each rule
once. Screenshots of each view go to --shots, for a person to look at.

    .venv/bin/python bench/studies/report_links.py results/cpu-demo/report.html [--chromium /usr/bin/chromium] [--out PATH] [--shots DIR]

Needs Debian's Chromium (``apt-get install chromium``: /usr/bin/chromium) and Playwright's Python driver
(``pip install playwright``, which drives that browser; it downloads no browser of its own here). The report
holds each page as a ``data:`` URL, where a link to another page (the old ``RECIPE.html#...``) leads nowhere:
tests/test_pipeline_e2e.py checks statically that every link of the summary page is an anchor of that page;
this script follows each in the browser as a reader would: the report is opened (the summary page must show in the
report's iframe without a click: report/workflow.rst), "Workflow" in the menu shows the front page, its "Start here"
link is clicked once (the summary page must show again), then every link of that page is clicked: the page must
scroll so that the link's target is at the top (or the page is at its end) and the URL's fragment be the link's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

from aoe.publish.pages import embedded_pages  # noqa: E402

# the flags this machine's Chromium needs headless (no network, no sandbox as root)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WIDTH, HEIGHT = 1400, 900

# the tables of a page: those whose right edge passes the page's visible width (cut: out of sight), and those in a box
# of their own that scrolls sideways (px hidden until scrolled)
_OVERFLOW = """() => {
    const width = document.documentElement.clientWidth;
    const tables = [...document.querySelectorAll('table')];
    const cut = tables.map((t, i) => ({table: i, box: t.closest('.wide') || t, header: (t.querySelector('tr') || {innerText: ''}).innerText.slice(0, 80)}))
        .filter(t => t.box.getBoundingClientRect().right > width + 1)
        .map(t => ({table: t.table, right: Math.round(t.box.getBoundingClientRect().right), header: t.header}));
    const scroll = tables.map((t, i) => ({table: i, box: t.closest('.wide')}))
        .filter(t => t.box && t.box.scrollWidth > t.box.clientWidth + 1)
        .map(t => ({table: t.table, hidden: t.box.scrollWidth - t.box.clientWidth}));
    return {width: width, tables: tables.length, cut: cut, scroll: scroll,
            page_scroll_x: document.documentElement.scrollWidth - width};
}"""


def _page_frame(page, name: str):
    """The report's iframe showing the page rendered from ``name`` (its data: URL names it at its foot)."""
    for frame in page.frames:
        if frame.url.startswith("data:text/html"):
            try:
                foot = frame.inner_text(".source", timeout=1000)
            except Exception:  # noqa: BLE001 - a frame without the foot is another page
                continue
            if name in foot:
                return frame
    return None


# the page of that file name in the report's iframe, beside the menu (as report/workflow.rst's aoeShow opens it) or
# beside the result's details, which take half the window (as the result's eye button shows it: the narrowest view)
_SHOW = """([name, mode]) => { const p = Object.keys(results).find(k => k.split('/').pop() === name);
    app.setView({content: 'html', contentPath: results[p].data_uri, resultPath: p, navbarMode: mode}); }"""


def follow(report: Path, chromium: str, shots: Path) -> dict:
    """Open the report (the summary must show), go to the front page by the menu, click its "Start here" link once
    (the summary must show), click every link of that page inside the iframe, then measure the pages' tables."""
    from playwright.sync_api import sync_playwright

    shots.mkdir(parents=True, exist_ok=True)
    pages = embedded_pages(report)
    out: dict = {"report": str(report), "viewport": [WIDTH, HEIGHT], "pages": sorted(pages), "screenshots": []}
    results = []

    def shot(page, name: str) -> None:
        path = shots / f"{name}.png"
        page.screenshot(path=str(path))
        out["screenshots"].append(path.name)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(report.resolve().as_uri())
        page.wait_for_timeout(2500)  # the report's app renders after load
        summary = "REPORT.md and RECIPE.md"
        out["opens_on_the_summary"] = _page_frame(page, summary) is not None
        shot(page, "1-opened")
        # the front page: the menu's "Workflow", its description beside the rule graph
        page.get_by_text("Workflow", exact=True).first.click(timeout=5000)
        page.wait_for_timeout(1500)
        front = page.inner_text("body")
        out["front_page_line"] = next((line for line in front.splitlines() if "Start here" in line), None)
        out["front_page_starts_with_summary"] = out["front_page_line"] is not None
        nodes = page.evaluate("() => rulegraph_spec.data[0].values.map(n => n.rule)")
        out["rule_graph_nodes"] = len(nodes)
        out["rule_graph_rules_drawn_twice"] = sorted({n for n in nodes if nodes.count(n) > 1})
        shot(page, "2-front-page")
        frame = None
        try:
            page.get_by_role("link", name="REPORT.html").first.click(timeout=5000)  # one click, no eye button
            page.wait_for_timeout(1500)
            frame = _page_frame(page, summary)
            out["start_here_opens_the_summary_in_one_click"] = frame is not None
            if frame is None:  # the link showed the result's details: its eye button is the second click
                shot(page, "3-start-here-first-click")
                page.locator("a[iconname=eye]").first.click(timeout=5000)
                page.wait_for_timeout(1500)
                frame = _page_frame(page, summary)
        except Exception as e:  # noqa: BLE001 - recorded: the JSON says what failed
            out["front_page_click_error"] = str(e)[:300]
        out.setdefault("start_here_opens_the_summary_in_one_click", False)
        if frame is not None:
            shot(page, "3-start-here")
            out["summary_tables"] = frame.evaluate(_OVERFLOW)
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
                results.append({"href": href, "text": frame.locator("a[href]").nth(i).inner_text(), "ok": bool(ok), **state,
                                "seconds": round(time.perf_counter() - start, 3)})
            frame.evaluate("window.scrollTo(0, 0)")
        # the recipe page on its own beside the menu, then as its eye button in "1. Summary" shows it: its tables
        for mode, key in (("menu", "recipe_tables"), ("resultinfo", "recipe_tables_beside_details")):
            page.evaluate(_SHOW, ["RECIPE.html", mode])
            page.wait_for_timeout(1500)
            recipe = _page_frame(page, "RECIPE.md")
            out[key] = recipe.evaluate(_OVERFLOW) if recipe is not None else None
            if recipe is not None:
                recipe.evaluate("() => { const h = document.querySelector('h2'); if (h) h.scrollIntoView(); }")
                page.wait_for_timeout(300)
                shot(page, f"4-recipe-{mode}")
        browser.close()
    out["links"] = len(results)
    out["links_followed_ok"] = sum(r["ok"] for r in results)
    out["link_texts"] = sorted({r["text"] for r in results})
    out["failed"] = [r for r in results if not r["ok"]]
    out["results"] = results
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", default=None, help="JSON path (default bench/out/report_links.json)")
    ap.add_argument("--shots", type=Path, default=C.OUT_DIR / "report_links", help="folder of the screenshots")
    args = ap.parse_args()
    record = {"command": "python bench/studies/report_links.py " + " ".join(sys.argv[1:]), **follow(args.report, args.chromium, args.shots)}
    path = C.write_json("report_links", record, args.out)
    cut = lambda key: ("–" if not record.get(key) else f"{len(record[key]['cut'])} of {record[key]['tables']} cut, "
                       f"{len(record[key]['scroll'])} scroll (page {record[key]['width']} px)")
    C.print_table(f"{args.report} in headless Chromium at {WIDTH} px",
                  ["check", "result"],
                  [["opens on the summary page", record["opens_on_the_summary"]],
                   ["front page says where to start", record["front_page_starts_with_summary"]],
                   ["'Start here' opens the summary in one click", record["start_here_opens_the_summary_in_one_click"]],
                   ["links of the summary page", record["links"]],
                   ["followed to their target", record["links_followed_ok"]],
                   ["summary tables past the right edge", cut("summary_tables")],
                   ["recipe tables past the right edge", cut("recipe_tables")],
                   ["the same beside the result's details", cut("recipe_tables_beside_details")],
                   ["rule graph: nodes / rules drawn twice", f"{record['rule_graph_nodes']} / {len(record['rule_graph_rules_drawn_twice'])}"]])
    for r in record["failed"]:
        print(f"  failed: {r['href']} -> {json.dumps(r)}")
    print(f"wrote {path}; screenshots in {args.shots}")
    bad = (record["failed"] or not record["links"] or not record["opens_on_the_summary"] or not record["front_page_starts_with_summary"]
           or not record["start_here_opens_the_summary_in_one_click"] or record["rule_graph_rules_drawn_twice"]
           or any(record.get(k) and record[k]["cut"] for k in ("summary_tables", "recipe_tables", "recipe_tables_beside_details")))
    if bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
