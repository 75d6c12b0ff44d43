"""`snakemake --report` as the run's front page (issue 39 item 6), checked without running anything:
every result registered with report() has its caption file and one of the report's categories,
the categories cover the summary pages, tables, figures, training curves and runtimes, and the
runtime table (aoe.publish.runtimes) and the Markdown pages (aoe.publish.pages.markdown_page) render what they read."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from aoe.publish.pages import markdown_html, markdown_page
from aoe.publish.runtimes import COLUMNS, benchmark_rows, read_benchmark, runtime_markdown, runtime_tsv
from tests.workflow_utils import REPO

RULE_FILES = sorted((REPO / "rules").glob("*.smk"))
CATEGORIES = {"1. Summary", "2. Tables", "3. Figures", "4. Training curves", "5. Runtimes"}


def _rules(path: Path) -> dict[str, str]:
    """rule name -> the rule's text, of one .smk file."""
    text = path.read_text()
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^rule (\w+):", text, re.M)]
    return {name: text[a : (starts[i + 1][0] if i + 1 < len(starts) else len(text))] for i, (a, name) in enumerate(starts)}


def _registered() -> list[tuple[str, str, str, str]]:
    """(rule file, rule, caption, category) of every report() in the rules."""
    out = []
    for path in RULE_FILES:
        for rule, body in _rules(path).items():
            for chunk in body.split("report(")[1:]:
                caption = re.search(r'caption="([^"]+)"', chunk)
                category = re.search(r'category="([^"]+)"', chunk)
                assert "labels=" in chunk.split("\n        )")[0], f"{path.name}: rule {rule}: report() without labels"
                out.append((path.name, rule, caption and caption.group(1), category and category.group(1)))
    return out


def test_every_report_output_has_a_caption_file_and_a_known_category():
    registered = _registered()
    assert len(registered) >= 10, registered
    for path, rule, caption, category in registered:
        assert caption, f"{path}: rule {rule} registers a report output without a caption"
        assert (REPO / "rules" / caption).resolve().is_file(), f"{path}: rule {rule}: caption {caption} missing"
        assert category in CATEGORIES, f"{path}: rule {rule}: category {category!r}"


def test_the_categories_cover_summary_tables_figures_curves_and_runtimes():
    by_category: dict[str, set[str]] = {}
    for _, rule, _, category in _registered():
        by_category.setdefault(category, set()).add(rule)
    assert set(by_category) == CATEGORIES
    assert {"report_page"} <= by_category["1. Summary"]  # REPORT.html and RECIPE.html
    assert {"table_html"} <= by_category["2. Tables"]
    assert {"fig3", "fig4", "fig5", "fig10", "fig_gradients", "gis_figures"} <= by_category["3. Figures"]
    assert by_category["4. Training curves"] == {"training_curves"}
    assert by_category["5. Runtimes"] == {"runtimes"}
    report_rules = _rules(REPO / "rules" / "report.smk")
    assert re.search(r'page="REPORT\|RECIPE"', report_rules["report_page"])
    # raw LaTeX and Markdown stay files of the results tree, not report pages; a figure's PDF too (its PNG shows)
    for path in RULE_FILES:
        assert not re.search(r'report\(\s*multiext', path.read_text()), path.name
    assert "report(" not in _rules(REPO / "rules" / "tables.smk")["table"]


def test_rule_all_builds_the_report_pages_and_the_runtimes_and_nothing_needs_the_runtimes():
    snakefile = (REPO / "Snakefile").read_text()
    all_rule = re.search(r"^rule all:\n(.*?)\n\n", snakefile, re.M | re.S).group(1)
    assert "REPORT_PAGES" in all_rule and "RUNTIME_RESULTS" in all_rule
    runtimes = _rules(REPO / "rules" / "report.smk")["runtimes"]
    assert "rules.all.input" in runtimes and "not in RUNTIME_RESULTS" in runtimes
    for path in RULE_FILES:
        for rule, body in _rules(path).items():
            if rule != "runtimes":
                inputs = body.split("output:")[0]
                assert "RUNTIME" not in inputs and "benchmarks" not in inputs, f"{path.name}: rule {rule}"
    # every benchmark lands under results/benchmarks/<rule dir>/, where the runtime table reads them
    benchmarks = [m.group(1) for p in RULE_FILES for m in re.finditer(r'benchmark:\s*\n\s*R\("([^"]+)"\)', p.read_text())]
    assert len(benchmarks) >= 18 and all(b.startswith("results/benchmarks/") and b.endswith(".tsv") for b in benchmarks)


HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(line + "\n" for line in lines))
    return path


def test_read_benchmark_means_repeats_and_keeps_the_peak_rss(tmp_path):
    one = _bench(tmp_path / "a.tsv", "712.34\t0:11:52\t1584.12\t3976.35\t1400.76\t1477.38\t9.89\t518.11\t91.20\t650.15")
    assert read_benchmark(one) == {"seconds": 712.34, "max_rss_mb": 1584.12, "cpu_seconds": 650.15, "repeats": 1}
    two = _bench(
        tmp_path / "b.tsv",
        "10.0\t0:00:10\t100.0\t1\t1\t1\t0\t0\t50\t8.0",
        "20.0\t0:00:20\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA",
    )
    got = read_benchmark(two)
    assert got["seconds"] == 15.0 and got["max_rss_mb"] == 100.0 and got["cpu_seconds"] == 8.0 and got["repeats"] == 2
    nothing = _bench(tmp_path / "c.tsv", "0.5\t0:00:00\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA")
    assert math.isnan(read_benchmark(nothing)["max_rss_mb"])
    (tmp_path / "bad.tsv").write_text("x\ty\n1\t2\n")
    with pytest.raises(ValueError, match="not a Snakemake benchmark"):
        read_benchmark(tmp_path / "bad.tsv")


def test_benchmark_rows_name_the_rule_and_wildcards_and_render(tmp_path):
    root = tmp_path / "benchmarks"
    _bench(root / "train/minilm-l6/aoe/stsb/seed1.tsv", "712.34\t0:11:52\t1584.12\t1\t1\t1\t0\t0\t91\t650.15")
    _bench(root / "evaluate_sts/minilm-l6/aoe/stsb/seed1.tsv", "30.5\t0:00:30\t900.0\t1\t1\t1\t0\t0\t90\t25.0")
    _bench(root / "evaluate_sts/minilm-l6/pretrained/none/seed0.tsv", "20.0\t0:00:20\t800.0\t1\t1\t1\t0\t0\t90\t18.0")
    _bench(root / "gis/stats.tsv", "3.0\t0:00:03\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA")
    rows = benchmark_rows(root)
    assert [(r["rule"], r["wildcards"]) for r in rows] == [
        ("evaluate_sts", "minilm-l6/aoe/stsb/seed1"),
        ("evaluate_sts", "minilm-l6/pretrained/none/seed0"),
        ("gis", "stats"),
        ("train", "minilm-l6/aoe/stsb/seed1"),
    ]
    tsv = runtime_tsv(rows).splitlines()
    assert tsv[0].split("\t") == list(COLUMNS)
    assert tsv[4] == "train\tminilm-l6/aoe/stsb/seed1\t712.34\t1584.12\t650.15\t1"
    assert tsv[3] == "gis\tstats\t3.00\tNA\tNA\t1"
    md = runtime_markdown(rows)
    assert "4 jobs, 0:12:46 h:m:s" in md
    assert "| `evaluate_sts` | 2 | 50.5 | 30.5 | 900 |" in md
    # per job, slowest first
    assert md.index("| `train` | `minilm-l6/aoe/stsb/seed1` | 712.3 | 0:11:52 | 1584 | 650.1 |") < md.index("| `gis` | `stats`")
    assert benchmark_rows(tmp_path / "none") == [] and "No benchmark files" in runtime_markdown([])
    # the page names the tree it read (a preset's, not the paper grid's results/benchmarks)
    assert "Read from `results/cpu-demo/benchmarks/<rule>/<wildcards>.tsv`" in runtime_markdown(rows, root="results/cpu-demo/benchmarks")


def test_markdown_page_renders_tables_lists_links_and_escapes():
    text = (
        "# Title\n\nSome *italic* and **bold** with `a|b <c>` code, a_name_with_underscores.\n\n"
        "| Model | STS-B | Δ |\n|---|---|---|\n| minilm **ours** (n=1) | 80.1 ± 0.2 | +1.2 |\n| *paper row* | 79 \\| x | – |\n\n"
        "- one [cell](RECIPE.md#recipe-minilm) line\n- two < three, [a table](tables/t1.md), [a site](https://x.org/a.md)\n\n"
        '<a id="recipe-minilm"></a>\n## Section\n'
    )
    body = re.sub(r"\n", "", markdown_html(text))
    assert "<h1>Title</h1>" in body and "<h2>Section</h2>" in body
    assert "<em>italic</em>" in body and "<strong>bold</strong>" in body and "<code>a|b &lt;c&gt;</code>" in body
    assert "a_name_with_underscores" in body
    assert "<th>Model</th><th>STS-B</th><th>Δ</th>" in body
    assert "<td>minilm <strong>ours</strong> (n=1)</td><td>80.1 ± 0.2</td><td>+1.2</td>" in body
    assert "<td><em>paper row</em></td><td>79 | x</td><td>–</td>" in body
    # a link into the results tree's Markdown leads to its page in the report; other sites stay as written
    assert '<a href="RECIPE.html#recipe-minilm">cell</a>' in body and "two &lt; three" in body
    assert '<a href="tables/t1.html">' in body and '<a href="https://x.org/a.md">' in body
    assert body.count('id="recipe-minilm"') == 1
    page = markdown_page(text, title="T", source="tables/t.md")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page and "Rendered from <code>tables/t.md</code>" in page


def test_the_summary_page_holds_the_recipe_its_links_lead_to():
    from aoe.publish.pages import markdown_page, summary_with_recipe

    report = "# Report\n\n| row | recipe |\n|---|---|\n| AoE | [minilm-l6/aoe/stsb](RECIPE.md#recipe-minilm-l6-aoe-stsb) |\n"
    recipe = '# Recipe\n\n<a id="recipe-minilm-l6-aoe-stsb"></a>\n\n## minilm-l6 / aoe / stsb\n'
    page = markdown_page(summary_with_recipe(report, recipe), title="REPORT")
    assert 'href="#recipe-minilm-l6-aoe-stsb"' in page and 'id="recipe-minilm-l6-aoe-stsb"' in page
    assert "RECIPE.html" not in page and "RECIPE.md" not in page


def test_embedded_pages_reads_the_pages_a_report_holds(tmp_path):
    import base64

    from aoe.publish.pages import embedded_pages, markdown_page

    pages = [markdown_page("# A", title="A", source="REPORT.md and RECIPE.md"), "<html><body>no foot</body></html>"]
    blobs = "".join(f'<a href="data:text/html;charset=utf8;base64,{base64.b64encode(p.encode()).decode()}">x</a>' for p in pages)
    (tmp_path / "report.html").write_text(f"<html>{blobs}</html>")
    found = embedded_pages(tmp_path / "report.html")
    assert list(found) == ["REPORT.md and RECIPE.md", "page1"] and found["page1"] == pages[1]


class _Rule:
    def __init__(self, name: str):
        self.name = name


class _Job:
    def __init__(self, rule: str, key: str):
        self.rule, self.key = _Rule(rule), key

    def __repr__(self) -> str:
        return self.key


class _Dag:
    """What rule_graph_spec reads of Snakemake's DAG: the levels of jobs and each job's dependencies."""

    def __init__(self, levels: list[list[_Job]], dependencies: dict[_Job, set[_Job]]):
        self.levels, self.dependencies = levels, dependencies

    def toposorted(self):
        return iter(self.levels)


def test_the_report_rule_graph_draws_each_rule_once():
    """Issue 62: Snakemake's report drew evaluate_sts (and evaluate_indomain, figure_pairs) twice, once per depth its
    jobs run at: the backbone as downloaded is scored before any training, the trained models after."""
    from aoe.publish.rulegraph import rule_graph_spec

    fetch, sts0 = _Job("fetch_backbone", "f"), _Job("evaluate_sts", "e0")
    train, sts1, table, run_all = _Job("train_model", "t"), _Job("evaluate_sts", "e1"), _Job("table", "tb"), _Job("all", "a")
    dag = _Dag([[fetch], [sts0, train], [sts1], [table], [run_all]],
               {fetch: set(), sts0: {fetch}, train: {fetch}, sts1: {train}, table: {sts0, sts1}, run_all: {table}})
    spec, xmax, ymax = rule_graph_spec(dag)
    rules = [n["rule"] for n in spec["nodes"]]
    assert rules == ["fetch_backbone", "train_model", "evaluate_sts", "table", "all"]  # once each, in dependency order
    links = {(x["sourcerule"], x["targetrule"]) for x in spec["links"] + spec["links_direct"]}
    assert links == {("fetch_backbone", "train_model"), ("fetch_backbone", "evaluate_sts"), ("train_model", "evaluate_sts"),
                     ("evaluate_sts", "table"), ("table", "all")}
    assert all(x["target"] > x["source"] for x in spec["links"] + spec["links_direct"])  # every link points down
    assert all(x["target"] - x["source"] == 1 for x in spec["links_direct"]) and (xmax, ymax) == (100, 200)
    # a cycle between rules has no order: None, and the report keeps Snakemake's own graph (rules/report.smk)
    a, b, c = _Job("x", "a"), _Job("y", "b"), _Job("x", "c")
    assert rule_graph_spec(_Dag([[a], [b], [c]], {a: set(), b: {a}, c: {b}})) is None


def test_the_report_opens_on_the_summary_and_its_link_shows_it_in_one_click():
    """Issue 62: the front page's "Start here: REPORT.html" opened the result's details, and a second click on its eye
    button showed the summary. The description (report/workflow.rst) opens the report on REPORT.html's page and
    links to it by the reporter's own view (app.setView, as the eye button); bench/studies/report_links.py clicks it in Chromium."""
    from docutils.core import publish_parts

    text = (REPO / "report" / "workflow.rst").read_text()
    body = text.split('{% if "REPORT.html" in names %}')[1].split("{% endif %}")[0]
    html = publish_parts(body, writer_name="html")["html_body"]
    assert '<a class="reference external" href="javascript:aoeShow(\'REPORT.html\')">REPORT.html</a>' in html
    hook = re.search(r'<img [^>]*onerror="([^"]+)"', html).group(1)
    assert "window.aoeShow=function(n)" in hook and "app.setView({content:'html',contentPath:results[p].data_uri" in hook
    assert "if(!window.aoeOpened){window.aoeOpened=true;aoeShow('REPORT.html')}" in hook  # once: "Workflow" comes back
    assert '"recipe" link' not in text and "each row's name links to its cell's recipe" in text


def test_a_pages_tables_wrap_names_where_they_read_and_scroll_rather_than_cut():
    """Issue 62: at 1,400 px RECIPE's tables ran past the report's right edge (config keys, file names and code
    paths with no space to wrap at). A cell's text may break after _ / . : before a letter (never inside a tag or a
    number), and a table wider than its page scrolls in a box of its own."""
    html = markdown_html("| key | set by | file | value |\n|---|---|---|---|\n"
                         "| gradient_accumulation_steps | `code:aoe.config.hparams.TrainSettings.x` | [presets/cpu-demo.yaml](RECIPE.md#a_b) | 0.1 |")
    assert '<div class="wide"><table>' in html and "</table></div>" in html
    assert "<td>gradient_<wbr>accumulation_<wbr>steps</td>" in html
    assert "<code>code:<wbr>aoe.<wbr>config.<wbr>hparams.<wbr>TrainSettings.<wbr>x</code>" in html
    assert '<a href="RECIPE.html#a_b">presets/<wbr>cpu-demo.<wbr>yaml</a>' in html and "<td>0.1</td>" in html
    assert ".wide { overflow-x: auto;" in markdown_page("x", "t")
