# results/REPORT.md: every reproduced number next to the paper's (aoe.report). Reads the tables'
# JSON twins and the figures' numbers. The config files of
# the run (config.yaml, then the preset) are a param: the report names the preset behind each table.
rule report_md:
    input:
        tables=expand("results/tables/{table}.json", table=enabled_tables(config)),
        # the numbers behind the figures (Fig. 3/4/10, gradients), so the summary waits for them
        figures=[f for f in FIGURE_RESULTS if f.endswith(".json")],
        code=library_code("report.py", "tables.py"),
    output:
        report("results/REPORT.md", caption="../report/report_md.rst", category="Summary"),
    log:
        "results/logs/report_md.log",
    conda:
        "../envs/report.yaml"
    params:
        # config.yaml first, then the --configfile files that override it (the preset)
        configfiles=[
            os.path.relpath(f)
            for f in sorted(
                workflow.configfiles,
                key=lambda f: Path(f).resolve() in {Path(o).resolve() for o in workflow.overwrite_configfiles},
            )
        ],
    script:
        "../workflow_scripts/make_report.py"
