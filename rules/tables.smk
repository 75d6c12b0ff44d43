rule table:
    input:
        results=get_table_inputs,
        code=library_code("tables.py", "table_kinds.py"),
    output:
        tex=report(R("results/tables/{table}.tex"), caption="../report/table.rst", category="Tables"),
        csv=R("results/tables/{table}.csv"),
        md=report(R("results/tables/{table}.md"), caption="../report/table_md.rst", category="Tables"),
        json=R("results/tables/{table}.json"),
    log:
        R("results/logs/tables/{table}.log"),
    conda:
        "../envs/report.yaml"
    params:
        spec=lambda wildcards: config["tables"][wildcards.table],
        rows=lambda wildcards: [r.as_dict() for r in table_rows(config, wildcards.table)],
        name=lambda wildcards: wildcards.table,
    script:
        "../workflow_scripts/make_table.py"
