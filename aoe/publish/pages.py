"""Markdown pages as HTML, for Snakemake's report (``snakemake --report``).

The report shows a Markdown file as plain text with its whitespace collapsed (pipe tables become unreadable) and a
LaTeX table as its source; an HTML file it shows rendered. Python-Markdown renders what this package writes
(REPORT.md, RECIPE.md, the tables' .md twins, RUNTIMES): pipe tables, fenced code, raw HTML anchors (RECIPE.md's
cells, which REPORT.md links to; headings get no id of their own, as a cell's heading slug would repeat its anchor).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["embedded_pages", "markdown_html", "markdown_page", "summary_with_recipe"]

_PAGE_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px; line-height: 1.45;
       margin: 1.2em 2em; color: #1f2328; max-width: 1400px; }
h1 { font-size: 1.6em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 1.6em; border-bottom: 1px solid #eaeef2; padding-bottom: .15em; }
h3 { font-size: 1.1em; margin-top: 1.3em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; overflow-wrap: break-word; }
.wide { overflow-x: auto; max-width: 100%; }
th { background: #f6f8fa; text-align: left; }
tr:nth-child(even) td { background: #fafbfc; }
td em { color: #57606a; }
code { background: #f3f4f6; padding: 0 .25em; border-radius: 3px; font-size: 90%; }
pre { background: #f6f8fa; padding: .6em; overflow: auto; }
.source { color: #57606a; font-size: 12px; margin-top: 2em; }
"""


def markdown_html(text: str) -> str:
    """The body HTML of a Markdown text; a link to a .md file of the results tree points at its .html
    page (the report holds the pages, not the Markdown)."""
    import re

    import markdown

    body = markdown.markdown(text, extensions=["tables", "fenced_code"], output_format="html")
    body = re.sub(r'href="([^"#:]+)\.md(#[^"]*)?"', r'href="\1.html\2"', body)
    # a table wider than the window scrolls sideways in its own box: nothing is cut at the right
    body = body.replace("<table>", '<div class="wide"><table>').replace("</table>", "</table></div>")
    return re.sub(r"(<t[dh](?:\s[^>]*)?>)(.*?)(</t[dh]>)", lambda m: m.group(1) + _break_points(m.group(2)) + m.group(3), body, flags=re.S)


def _break_points(cell: str) -> str:
    """A table cell's HTML with a line break allowed after each ``_ / . :`` before a letter in its text (not in its
    tags): a config key, file or code name (gradient_accumulation_steps, presets/cpu-demo.yaml) then wraps where it
    reads, and RECIPE's tables fit a 1,400 px window without cutting a word anywhere (issue 62)."""
    import re

    return "".join(part if part.startswith("<") else re.sub(r"([_/.:])(?=[A-Za-z])", r"\1<wbr>", part)
                   for part in re.split(r"(<[^>]+>)", cell))


def embedded_pages(report: str | Path) -> dict[str, str]:
    """The HTML pages a Snakemake report (``snakemake --report``) embeds as base64 ``data:`` URLs, keyed by the
    file each names at its foot (:func:`markdown_page`'s "Rendered from"), else ``page<i>``."""
    import base64
    import re

    pages = {}
    for blob in re.findall(r"data:text/html;(?:[\w-]+=[^;,\"]*;)*base64,([A-Za-z0-9+/=]+)", Path(report).read_text(errors="replace")):
        page = base64.b64decode(blob).decode(errors="replace")
        source = re.search(r"Rendered from <code>([^<]+)</code>", page)
        pages[source.group(1) if source else f"page{len(pages)}"] = page
    return pages


def summary_with_recipe(report: str, recipe: str) -> str:
    """REPORT.md with RECIPE.md after it, its links to RECIPE.md's anchors made links within the page.

    The Snakemake report holds each page as a ``data:`` URL, where a link to another page (RECIPE.html#...)
    leads nowhere; in one page every "recipe" link of the report's rows resolves (issue 54)."""
    import re

    linked = re.sub(r"\]\(RECIPE\.md#", "](#", report)
    return f"{linked.rstrip()}\n\n---\n\n{recipe.strip()}\n"


def markdown_page(text: str, title: str, source: str | None = None) -> str:
    """A standalone HTML page (inline style, no external files) rendering ``text``; ``source``: the file
    it was rendered from, named at the bottom."""
    import html

    foot = f'<p class="source">Rendered from <code>{html.escape(source)}</code>.</p>' if source else ""
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_PAGE_STYLE}</style></head>\n<body>\n{markdown_html(text)}\n{foot}\n</body></html>\n"
    )
