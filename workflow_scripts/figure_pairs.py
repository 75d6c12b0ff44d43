"""Rule figure_pairs: one model's embeddings of the figure dataset's test pairs, cosines and gradient norms."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.results.figures.pairs import run_figure_pairs

p = snakemake.params
meta = run_figure_pairs(
    snakemake.input.model,
    list(snakemake.input.tables),
    list(snakemake.input.manifests),
    snakemake.wildcards.dataset,
    snakemake.output[0],
    pooling=p.pooling,
    prompt=p.prompt,
    eval_text=p.eval_text,
    batch_size=p.batch_size,
    max_length=p.max_length,
    tasks=list(p.tasks),
    cache_root=p.cache_root,
    cell=dict(p.cell),
    max_pairs=p.max_pairs,
    uncapped_tasks=list(p.uncapped_tasks),
)
print(meta["embedding"], f"{meta['wall_seconds']:.1f} s")
