"""Rule fig4: cosine density per gold-rating group per objective (AoE Fig. 4) and each model's distance to gold."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

import json

from aoe.results.figures import display_label
from aoe.results.figures.pairs import load_pairs
from aoe.results.figures.similarity import distance_to_gold, plot_similarity_density
from aoe.util.jsonio import write_json_atomic

p = snakemake.params
cfg = dict(p.density)
edges = list(cfg["gold_groups"])
models = []
for label, path in zip(p.labels, snakemake.input.pairs, strict=True):
    data = load_pairs(path)
    d = distance_to_gold(data["cos"], data["score"], edges, tuple(p.score_range))
    cell = data["meta"]["model"].get("cell")
    # label: the JSON key (stable); title: the names the tables use
    title = display_label(cell, snakemake.config) if cell else label
    models.append({"label": label, "title": title, "cos": data["cos"], "gold": data["score"], "distance": d, "meta": data["meta"]})
plot_similarity_density(models, edges, snakemake.output[0], snakemake.output[1], kde_bandwidth=cfg["kde_bandwidth"])
result = {
    "definition": {
        "distance_to_gold": "size-weighted mean over gold groups of W1(rank-normalised cosines, rank-normalised gold) of the group's pairs",
        "w1_raw": "W1(cosine, gold mapped linearly onto [0, 1])",
    },
    "gold_groups": edges,
    "score_range": list(p.score_range),
    "models": {m["label"]: {**m["distance"], "model": m["meta"]["model"], "data": m["meta"]["data"]} for m in models},
}
write_json_atomic(result, snakemake.output.json)
print(json.dumps({m["label"]: {k: m["distance"][k] for k in ("distance_to_gold", "w1_raw")} for m in models}))
