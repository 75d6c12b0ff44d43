"""Rule evaluate_flickr30k: caption retrieval strict accuracy (AnglE arXiv section 4.5)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.run import run_retrieval_evaluation

p = snakemake.params
run_retrieval_evaluation(
    model_dir=snakemake.input.model,
    table=snakemake.input.table,
    manifest=snakemake.input.manifest,
    out=snakemake.output[0],
    pooling=p.pooling,
    prompt=p.prompt,
    batch_size=p.batch_size,
    max_length=p.max_length,
    cell=p.cell,
    cache_root=p.cache_root,
)
