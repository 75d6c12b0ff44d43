"""Rule fig_gradients: gradient magnitude of the cosine vs the angle objective per cosine bin (AoE §1/§3, not in the paper)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

import json

from aoe.results.figures import dataset_name, display_label
from aoe.results.figures.gradients import gradient_summary, plot_gradients
from aoe.results.figures.pairs import load_pairs
from aoe.util.jsonio import write_json_atomic

p = snakemake.params
cfg = dict(p.gradients)
data = load_pairs(snakemake.input.pairs)
summary = gradient_summary(data, cfg["bins"], tuple(cfg["bin_range"]), cfg["tau"], p.saturation_threshold)
plot_gradients(
    summary,
    snakemake.output[0],
    snakemake.output[1],
    min_pairs_per_bin=cfg["min_pairs_per_bin"],
    title=(
        f"{display_label(data['meta']['model']['cell'], snakemake.config) if data['meta']['model'].get('cell') else p.label}\n"
        f"{dataset_name(data['meta']['data']['dataset'], data['meta']['data'].get('split') or 'test')} ({summary['pairs']} pairs)"
    ),
)
summary.update({"model": data["meta"]["model"], "data": data["meta"]["data"]})
write_json_atomic(summary, snakemake.output.json)
print(json.dumps({k: summary["objectives"][k]["saturation_zone"] for k in ("cos", "angle")}))
