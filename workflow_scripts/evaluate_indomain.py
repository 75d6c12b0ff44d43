"""Rule evaluate_indomain: a model on a train set's own evaluation split (AoE Table 2, AnglE Table 2)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.run import run_indomain_evaluation

run_indomain_evaluation(
    model_dir=snakemake.input.model,
    table=snakemake.input.table,
    manifest=snakemake.input.manifest,
    out=snakemake.output[0],
    evalset=snakemake.wildcards.evalset,
    pooling=snakemake.params.pooling,
    prompt=snakemake.params.prompt,
    batch_size=snakemake.params.batch_size,
    max_length=snakemake.params.max_length,
    cell=snakemake.params.cell,
    cache_root=snakemake.params.cache_root,
    gold=snakemake.params.gold,
)
