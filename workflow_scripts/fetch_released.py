"""Rule fetch_released: a published checkpoint (and an adapter's base) under results/released/, laid out as a trained model folder."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.model.released import materialize_released

record = materialize_released(snakemake.wildcards.checkpoint, dict(snakemake.params.spec), snakemake.output[0])
print(json.dumps(record, indent=2))
