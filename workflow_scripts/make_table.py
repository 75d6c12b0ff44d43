"""Rule table: result files -> results/tables/{table}.tex, .csv, .md (and .json for the summary report)."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.results.render import write_table
from aoe.results.tables import render_table

table = render_table(snakemake.params.name, snakemake.params.spec, list(snakemake.input.results), rows=snakemake.params.rows,
                     differences=snakemake.params.differences, selections=snakemake.params.selections,
                     held_out=snakemake.params.held_out, protocol=snakemake.params.protocol,
                     paper_rows=snakemake.params.paper_rows)
write_table(table, snakemake.output.tex, snakemake.output.csv, snakemake.output.md, snakemake.output.json)
logging.getLogger("aoe.results.tables").info("%s: %d rows, %d reference rows, %d t-tests, %d missing cells", table.name, len(table.rows),
             len(table.references), len(table.ttests), len(table.missing))
