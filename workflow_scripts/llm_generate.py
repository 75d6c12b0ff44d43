"""Rule llm_generate: the generator writes a similar and a dissimilar sentence for every text (cached per text)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.llm_supervised.generate import run_generation

summary = run_generation(
    texts_path=snakemake.input.texts,
    model_dir=snakemake.input.backbone,
    generator=snakemake.params.generator,
    templates=snakemake.params.prompts,
    size=snakemake.params.size,
    settings=snakemake.params.generation,
    cache_dir=snakemake.params.cache,
    out_records=snakemake.output.generations,
    out_summary=snakemake.output.summary,
    threads=snakemake.threads,
)
print(json.dumps({k: v for k, v in summary.items() if k != "versions"}, indent=2))
