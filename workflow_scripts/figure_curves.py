"""Rule training_curves: a table's training curves (loss vs step, validation Spearman) from its models' metrics.jsonl."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.results.figures.curves import curves_summary, plot_training_curves
from aoe.util.jsonio import write_json_atomic

table = snakemake.wildcards.table
summary = curves_summary(table, list(snakemake.params.panels), snakemake.config)
plot_training_curves(summary, snakemake.output[0], snakemake.output[1])
write_json_atomic(summary, snakemake.output.json)
for panel in summary["panels"]:
    for run in panel["runs"]:
        last = f"loss {run['loss']['value'][-1]:.4g} at step {run['loss']['step'][-1]}" if run["loss"]["step"] else "no loss logged"
        print(f"{panel['title']}, seed {run['run']}: {last}")
