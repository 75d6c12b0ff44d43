"""Rule evaluate_sts: a model (or the backbone as downloaded) on the 7 STS tasks, SentEval 'all' protocol."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.run import run_sts_evaluation

run_sts_evaluation(
    model_dir=snakemake.input.model,
    tables=snakemake.input.tables,
    manifests=snakemake.input.manifests,
    out=snakemake.output[0],
    pooling=snakemake.params.pooling,
    eval_pooling=snakemake.params.eval_pooling,
    prompt=snakemake.params.prompt,
    eval_text=snakemake.params.eval_text,
    batch_size=snakemake.params.batch_size,
    max_length=snakemake.params.max_length,
    cell=snakemake.params.cell,
    tasks=snakemake.params.tasks,
    cache_root=snakemake.params.get("cache_root"),
    backend=snakemake.params.backend,
    downstream=snakemake.params.downstream,
    max_pairs=snakemake.params.max_pairs,
    uncapped_tasks=snakemake.params.uncapped_tasks,
)
