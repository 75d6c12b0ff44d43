"""Rule llm_sample_texts: the unique texts of the source column that the LLM labels (a seeded sample if n_texts is set)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.llm_supervised.pairs import sample_texts, write_texts

texts, info = sample_texts(
    snakemake.input.table, column=snakemake.params.column, n=snakemake.params.n_texts, seed=snakemake.params.seed
)
info["source_manifest"] = json.loads(Path(snakemake.input.manifest).read_text())
write_texts(texts, info, snakemake.output.texts, snakemake.output.manifest)
print(json.dumps({k: v for k, v in info.items() if k != "source_manifest"}, indent=2))
