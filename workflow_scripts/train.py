"""Rule train: fine-tune one (backbone, objective, train set, seed) cell."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.workflow import start_log

start_log(snakemake.log[0])

from aoe.train import TrainConfig, train

cfg = TrainConfig(**snakemake.params.train)
summary = train(
    snakemake.input.tokens,
    snakemake.input.table,
    snakemake.input.backbone,
    snakemake.output[0],
    cfg,
    extra_record={"cell": dict(snakemake.wildcards), "slurm_job_id": os.environ.get("SLURM_JOB_ID")},
)
print(json.dumps(summary, indent=2))
