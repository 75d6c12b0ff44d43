"""Rule fig5: density of the gold similarity scores of the figure dataset's test pairs (AoE Fig. 5)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

import json

from aoe.data.contracts import read_table
from aoe.results.figures import dataset_name
from aoe.results.figures.similarity import plot_gold_density

cfg = dict(snakemake.params.density)
meta = json.loads(Path(snakemake.input.manifest).read_text())
gold = read_table(snakemake.input.table, snakemake.input.manifest)["score"].to_numpy(dtype=float)
plot_gold_density(
    gold,
    list(cfg["gold_groups"]),
    snakemake.output[0],
    snakemake.output[1],
    kde_bandwidth=cfg["kde_bandwidth"],
    title=f"{dataset_name(meta['dataset'], meta['split'])}: gold scores ({len(gold)} pairs)",
)
