"""Rule prepare_sts: one STS dataset split -> normalised parquet table + manifest."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.data.prepare import prepare_sts_table

prepare_sts_table(
    dataset=snakemake.wildcards.dataset,
    split=snakemake.wildcards.split,
    files=snakemake.params.files,
    table_out=snakemake.output.table,
    manifest_out=snakemake.output.manifest,
)
