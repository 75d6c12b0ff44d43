"""Rule llm_self_pairs: each text paired with itself (the unsupervised SimCSE-style baseline's training table)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.llm_supervised.pairs import build_self_pairs

manifest = build_self_pairs(
    snakemake.input.texts, snakemake.input.texts_manifest, snakemake.output.table, snakemake.output.manifest
)
print(json.dumps({k: manifest[k] for k in ("rows", "rows_per_subset")}, indent=2))
