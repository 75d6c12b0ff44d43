"""Rule tokenize: a prepared table -> datasets Arrow token cache for one (backbone tokenizer, max_len)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.model.tokens import build_token_cache

identity = build_token_cache(
    snakemake.input.table,
    snakemake.input.backbone,
    int(snakemake.wildcards.max_len),
    snakemake.output[0],
    prompt=snakemake.params.prompt,
)
print(json.dumps(identity, indent=2))
