"""Rules prepare_nli / prepare_pairs: one split of a non-STS dataset -> parquet table(s) + manifest."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.data.prepare import prepare_pairset

prepare_pairset(
    snakemake.wildcards.dataset,
    snakemake.wildcards.split,
    root=snakemake.params.root,
    out_dir=str(Path(snakemake.output.manifest).parent.parent),
)
