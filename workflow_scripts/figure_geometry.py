"""Rules fig3 / fig10: real vs imaginary halves of STS pairs (t-SNE, sample pairs, distance KDE) and AVG_re / AVG_im."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

import json

import numpy as np

from aoe.results.figures import dataset_name, display_label
from aoe.results.figures.pairs import load_pairs
from aoe.results.figures.sts_geometry import geometry_stats, highlighted_pairs, plot_geometry, select_pairs
from aoe.util.jsonio import write_json_atomic

p = snakemake.params
cfg = dict(p.geometry)
data = load_pairs(snakemake.input.pairs)
with np.load(snakemake.input.tsne, allow_pickle=False) as z:
    geo = {k: z[k] for k in z.files}
geo["settings"] = json.loads(str(geo["settings"]))
zone = p.zone
# the distances (KDE, AVG_re, AVG_im) cover the whole zone even when t-SNE embeds a subset of it
zone_idx = select_pairs(data["cos"], zone, cfg["saturation_threshold"])
stats = geometry_stats(data, zone_idx, cfg["distance"])
where = f"cos > {cfg['saturation_threshold']:g}" if zone == "saturation" else "all pairs"
cell = data["meta"]["model"].get("cell")
name = display_label(cell, snakemake.config) if cell else p.label  # the names the tables use, not config keys
test_set = dataset_name(data["meta"]["data"]["dataset"], data["meta"]["data"].get("split") or "test")
plot_geometry(
    data,
    geo,
    stats,
    snakemake.output[0],
    snakemake.output[1],
    title=f"{name}\n{test_set}, {where} ({stats['pairs']} of {len(data['cos'])} pairs"
    + (f"; t-SNE of {len(geo['idx'])})" if len(geo["idx"]) < stats["pairs"] else ")"),
    max_label_chars=cfg["max_label_chars"],
    kde_idx=zone_idx,
)
stats.update(
    {
        "zone": zone,
        "saturation_threshold": cfg["saturation_threshold"],
        "pairs_total": int(len(data["cos"])),
        "share_of_pairs": stats["pairs"] / max(len(data["cos"]), 1),
        "tsne": {**geo["settings"], "pairs": int(len(geo["idx"]))},
        "sample_pairs": [
            {"sentence1": str(data["sentence1"][geo["idx"][j]]), "sentence2": str(data["sentence2"][geo["idx"][j]]), "gold": float(data["score"][geo["idx"][j]]), "cos": float(data["cos"][geo["idx"][j]])}
            for j in geo["sample"]
        ],
        "highlighted_pairs": highlighted_pairs(data, geo, cfg["saturation_threshold"]),
        "model": data["meta"]["model"],
        "data": data["meta"]["data"],
    }
)
write_json_atomic(stats, snakemake.output.json)
print(json.dumps({k: stats[k] for k in ("pairs", "AVG_re", "AVG_im")}))
