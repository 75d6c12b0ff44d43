"""Rule download_hub: a Hugging Face dataset snapshot, pinned to a commit."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.data.hub import fetch_hub_dataset

p = snakemake.params
fetch_hub_dataset(p.repo, p.revision, snakemake.output[0], subdir=p.subdir)
