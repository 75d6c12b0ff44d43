# results/REPORT.md: every reproduced number next to the paper's (aoe.report). Reads the tables'
# JSON twins and the figures' numbers.
rule report_md:
    input:
        tables=expand(R("results/tables/{table}.json"), table=built_tables(config)),
        # the numbers behind the figures (Fig. 3/4/10, gradients), so the summary waits for them
        figures=[f for f in FIGURE_RESULTS if f.endswith(".json")],
        # the analyses behind numbers the paper quotes in its prose (aoe.report.QUOTED)
        analysis=SATURATION_RESULTS + [f for f in GIS_RESULTS if f.endswith(".json")],
        code=library_code("report.py", "tables.py", "table_kinds.py"),
    output:
        report(R("results/REPORT.md"), caption="../report/report_md.rst", category="Summary"),
    log:
        R("results/logs/report_md.log"),
    conda:
        "../envs/report.yaml"
    params:
        configfiles=RUN_CONFIGFILES,
    script:
        "../workflow_scripts/make_report.py"


# `snakemake recipe`: every value each trained cell of the active config trains with, the key and
# file that set it, its source, and the official code's value (aoe.ledger). Reads the config only.
rule recipe:
    input:
        configfiles=RUN_CONFIGFILES,
        official="aoe/resources/official_recipes.yaml",
        code=library_code("hparams.py", "ledger.py", "recipes.py"),
    output:
        md=R("results/RECIPE.md"),
        json=R("results/recipe.json"),
    log:
        R("results/logs/recipe.log"),
    conda:
        "../envs/report.yaml"
    params:
        configfiles=RUN_CONFIGFILES,
    script:
        "../workflow_scripts/make_recipe.py"
