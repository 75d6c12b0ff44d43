# Snakemake's report draws a rule once per depth of the job graph it runs at (evaluate_sts before and after
# training): aoe.publish.rulegraph draws each rule once, as --rulegraph does (only under --report)
from aoe.plan.targets import requested_report

if requested_report(sys.argv):
    from aoe.publish.rulegraph import draw_each_rule_once

    draw_each_rule_once()


# results/REPORT.md: every reproduced number next to the paper's (aoe.publish.report). Reads the tables'
# JSON twins and the figures' numbers.
rule report_md:
    input:
        tables=expand(R("results/tables/{table}.json"), table=built_tables(config)),
        # the numbers behind the figures (Fig. 3/4/10, gradients), so the summary waits for them
        figures=[f for f in FIGURE_RESULTS if f.endswith(".json")],
        # the analyses behind numbers the paper quotes in its prose (aoe.publish.quoted.QUOTED)
        analysis=SATURATION_RESULTS + [f for f in GIS_RESULTS if f.endswith(".json")],
        code=library_code(
            "publish/report.py",
            "publish/cells.py",
            "publish/gains.py",
            "publish/claims.py",
            "publish/quoted.py",
            "results/likeness.py",
            "results/load.py",
            "results/table_model.py",
            "results/paper_numbers.py",
            "results/render.py",
            "results/stats.py",
            "results/studies.py",
            "config/table_kinds.py",
            "resources/paper_numbers.yaml",
        ),
    output:
        R("results/REPORT.md"),
    log:
        R("results/logs/report_md.log"),
    conda:
        "../envs/report.yaml"
    params:
        configfiles=RUN_CONFIGFILES,
    script:
        "../workflow_scripts/make_report.py"


# `snakemake recipe`: every value each trained cell of the active config trains with, the key and
# file that set it, its source, and the official code's value (aoe.plan.ledger). Reads the config only.
rule recipe:
    input:
        configfiles=RUN_CONFIGFILES,
        official="aoe/resources/official_recipes.yaml",
        code=library_code("config/hparams.py", "plan/ledger.py", "config/recipes.py"),
        readings=RECIPE_READINGS,
    output:
        md=R("results/RECIPE.md"),
        json=R("results/recipe.json"),
    log:
        R("results/logs/recipe.log"),
    conda:
        "../envs/report.yaml"
    params:
        configfiles=RUN_CONFIGFILES,
        readings=RECIPE_READINGS,
    script:
        "../workflow_scripts/make_recipe.py"


# The Snakemake report (`snakemake --report report.html`) shows a Markdown file as plain text with
# its whitespace collapsed: REPORT.md and RECIPE.md go into it as HTML pages (aoe.publish.pages.markdown_page),
# under "1. Summary"; the tables' pages are rule table_html (rules/tables.smk). Rule all builds them all.
SUMMARY_PAGES = {
    "REPORT": "REPORT: every number beside the paper's (and the recipe)",
    "RECIPE": "RECIPE: every trained cell's settings",
}
REPORT_PAGES = [R("results/REPORT.html"), R("results/RECIPE.html")] + expand(
    R("results/tables/{table}.html"), table=built_tables(config)
)


# each takes a second or two and reads files the run already has: no SLURM job (and queue wait) for them
localrules:
    report_md,
    recipe,
    report_page,
    table_html,
    runtimes,


rule report_page:
    input:
        md=R("results/{page}.md"),
        # REPORT's page holds the recipe too: its links to it resolve inside the Snakemake report
        recipe=R("results/RECIPE.md"),
        code=library_code("publish/pages.py"),
    output:
        html=report(
            R("results/{page}.html"),
            caption="../report/summary_page.rst",
            category="1. Summary",
            labels=lambda wildcards: {"page": SUMMARY_PAGES[wildcards.page]},
        ),
    log:
        R("results/logs/report_page/{page}.log"),
    wildcard_constraints:
        page="REPORT|RECIPE",
    conda:
        "../envs/report.yaml"
    params:
        source=lambda wildcards: f"{wildcards.page}.md" + (" and RECIPE.md" if wildcards.page == "REPORT" else ""),
        with_recipe=lambda wildcards: wildcards.page == "REPORT",
        # the caption's rule for Δ and its bound: the one sentence REPORT.md prints (aoe.results.stats)
        flag_rule=FLAG_RULE,
    script:
        "../workflow_scripts/make_report_page.py"


# Every job's runtime: the benchmark file of each benchmarked job of the run (results/benchmarks/**.tsv)
# -> RUNTIMES.tsv (rule, wildcards, seconds, max RSS) and its HTML page in the report (aoe.publish.runtimes).
# Its input is every other target of rule all, so it runs after every job of the run and again after any
# rerun (a job rewrites its benchmark file and the targets downstream of it); it is no input of any
# job, so it makes no cycle.
RUNTIME_RESULTS = [R("results/RUNTIMES.tsv"), R("results/RUNTIMES.html")]


rule runtimes:
    input:
        done=lambda wildcards: [f for f in rules.all.input if f not in RUNTIME_RESULTS],
        code=library_code("publish/runtimes.py", "publish/pages.py"),
    output:
        tsv=R("results/RUNTIMES.tsv"),
        html=report(
            R("results/RUNTIMES.html"),
            caption="../report/runtimes.rst",
            category="5. Runtimes",
            labels={"page": "RUNTIMES: every job's wall time and memory"},
        ),
    log:
        R("results/logs/runtimes.log"),
    conda:
        "../envs/report.yaml"
    params:
        benchmarks=R("results/benchmarks"),
    script:
        "../workflow_scripts/make_runtimes.py"
