"""Rule llm_pairs: parse the completions, count and drop malformed ones, write the labelled pair table."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.llm_supervised.pairs import build_llm_pairs

manifest = build_llm_pairs(
    generations=snakemake.input.generations,
    generation_summary=snakemake.input.summary,
    texts_manifest=snakemake.input.texts_manifest,
    table=snakemake.output.table,
    manifest=snakemake.output.manifest,
    annotated_out=snakemake.output.generations,
    dataset=snakemake.wildcards.llmset,
)
print(json.dumps({k: manifest[k] for k in ("rows", "rows_per_subset", "counts")}, indent=2))
