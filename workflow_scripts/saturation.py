"""Rule saturation: cosine-saturation statistics of a pair table under a backbone as downloaded."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.saturation import run_saturation

p = snakemake.params
run_saturation(
    snakemake.input.model,
    snakemake.input.table,
    snakemake.input.manifest,
    snakemake.output[0],
    pooling=p.pooling,
    prompt=p.prompt,
    batch_size=p.batch_size,
    max_length=p.max_length,
    max_pairs=p.max_pairs,
)
