"""Rule fetch_backbone: materialise a backbone's weights and tokenizer under results/backbones/."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.model.backbones import materialize_backbone

info = materialize_backbone(snakemake.wildcards.backbone, snakemake.params.spec, snakemake.output[0])
print(json.dumps(info, indent=2))
