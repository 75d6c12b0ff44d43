rule table:
    input:
        results=get_table_inputs,
        # the paper's numbers too: a corrected number or heading there rewrites the tables that print it
        code=library_code(
            "results/load.py",
            "results/tables.py",
            "results/table_model.py",
            "results/paper_numbers.py",
            "results/ttests.py",
            "results/verdicts.py",
            "results/render.py",
            "results/stats.py",
            "results/studies.py",
            "results/likeness.py",
            "config/table_kinds.py",
            "resources/paper_numbers.yaml",
        ),
    output:
        tex=R("results/tables/{table}.tex"),
        csv=R("results/tables/{table}.csv"),
        md=R("results/tables/{table}.md"),
        json=R("results/tables/{table}.json"),
    log:
        R("results/logs/tables/{table}.log"),
    conda:
        "../envs/report.yaml"
    params:
        spec=lambda wildcards: config["tables"][wildcards.table],
        # each row with what its numbers are measured under (gold, protocol, pooling, recipe: aoe.config.measures), which
        # every t-test, gain and claim checks before it sets two rows against each other (aoe.results.likeness)
        rows=lambda wildcards: measured_rows(config, wildcards.table),
        name=lambda wildcards: wildcards.table,
        # how this configuration trains the table's rows otherwise than the paper grid: a note of the table
        differences=lambda wildcards: protocol_differences(config, grid_config(), wildcards.table),
        # rows whose models were chosen on a split the table scores: marked, with a note
        selections=lambda wildcards: scored_split_selections(config, wildcards.table),
        # rows whose models were chosen on a held-out split (SimCSE's STS-B dev): named in a note, no mark
        held_out=lambda wildcards: scored_split_selections(config, wildcards.table, held_out=True),
        # what this configuration ran for the rows (start, train set, length, seeds, pooling): after the caption
        protocol=lambda wildcards: training_summary(config, wildcards.table),
        # the paper's rows of the grid's table, shown whatever rows this configuration trains
        paper_rows=lambda wildcards: grid_paper_rows(grid_config(), wildcards.table),
    script:
        "../workflow_scripts/make_table.py"


# The table rendered for the Snakemake report (its Markdown twin as HTML: the paper's numbers and Δ
# under each matched row, the notes); the .tex, .csv and .json stay the files to use elsewhere.
rule table_html:
    input:
        md=R("results/tables/{table}.md"),
        code=library_code("publish/pages.py"),
    output:
        html=report(
            R("results/tables/{table}.html"),
            caption="../report/table.rst",
            category="2. Tables",
            labels={"table": "{table}"},
        ),
    log:
        R("results/logs/tables/{table}.html.log"),
    wildcard_constraints:
        table="[^/]+",
    conda:
        "../envs/report.yaml"
    params:
        source=lambda wildcards: f"tables/{wildcards.table}.md",
        # the caption's rule for Δ and its bound: the one sentence the tables and REPORT.md print (aoe.results.stats)
        flag_rule=FLAG_RULE,
    script:
        "../workflow_scripts/make_report_page.py"
