"""Rule table: evaluation JSON files -> results/tables/{table}.tex and .csv."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.workflow import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.tables import build_table, load_sts_results, to_latex

spec = snakemake.params.spec
results = load_sts_results(snakemake.input)
table = build_table(results, spec, spec["kind"], spec.get("paper_reference", []))
note = f"Rows: our runs (mean $\\pm$ sample std over n seeds; fine-tuned on {spec['trainset']}) and the paper's reported numbers."
Path(snakemake.output.tex).write_text(to_latex(table, spec["kind"], spec.get("caption", ""), snakemake.params.name, note))
table.to_csv(snakemake.output.csv, index=False)
