# results/REPORT.md: every reproduced number next to the paper's (aoe.report). Reads the tables'
# JSON twins; results/figures/*.json are read when present, never required. The config files of
# the run (config.yaml, then the preset) are a param: the report names the preset behind each table.
rule report_md:
    input:
        tables=expand("results/tables/{table}.json", table=enabled_tables(config)),
    output:
        report("results/REPORT.md", caption="../report/report_md.rst", category="Summary"),
    params:
        configfiles=[os.path.relpath(f) for f in workflow.configfiles],
        figures_dir="results/figures",
    log:
        "results/logs/report_md.log",
    conda:
        "../envs/report.yaml"
    script:
        "../workflow_scripts/make_report.py"
