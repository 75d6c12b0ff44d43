"""Rule figure_tsne: t-SNE of the real and imaginary halves of the selected pairs (AoE Fig. 3 / Fig. 10)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

import json

import numpy as np

from aoe.results.figures.pairs import load_pairs
from aoe.results.figures.sts_geometry import compute_geometry
from aoe.util.fsutil import atomic_file

data = load_pairs(snakemake.input[0])
geo = compute_geometry(data, snakemake.wildcards.zone, dict(snakemake.params.geometry))
with atomic_file(snakemake.output[0], "wb") as fh:
    np.savez(fh, idx=geo["idx"], re_xy=geo["re_xy"], im_xy=geo["im_xy"], sample=geo["sample"], highlight_names=geo["highlight_names"], highlight_pos=geo["highlight_pos"], settings=np.array(json.dumps(geo["settings"])))
print(f"{len(geo['idx'])} pairs, {geo['settings']}")
