"""Rule evaluate_nli_probe: AoE Table 5, logistic regression on the embedding of "premise [SEP] hypothesis"."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.run import run_nli_probe

p = snakemake.params
run_nli_probe(
    model_dir=snakemake.input.model,
    tables=snakemake.input.tables,
    out=snakemake.output[0],
    protocol=p.protocol,
    mode=p.mode,
    max_rows=p.max_rows,
    pooling=p.pooling,
    prompt=p.prompt,
    batch_size=p.batch_size,
    max_length=p.max_length,
    cell=p.cell,
    cache_root=p.cache_root,
)
