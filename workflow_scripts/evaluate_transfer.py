"""Rule evaluate_transfer: SentEval's transfer tasks (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC), SimCSE's settings."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.run import run_transfer_evaluation

p = snakemake.params
run_transfer_evaluation(
    model_dir=snakemake.input.model,
    downstream=p.downstream,
    out=snakemake.output[0],
    tasks=p.tasks,
    mode=p.mode,
    max_rows=p.max_rows,
    pooling=p.pooling,
    prompt=p.prompt,
    eval_text=p.eval_text,
    eval_pooling=p.eval_pooling,
    batch_size=p.batch_size,
    max_length=p.max_length,
    cell=p.cell,
    cache_root=p.cache_root,
    backend=p.backend,
)
