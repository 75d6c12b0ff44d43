"""Rule download_file: one file from its public URL, checked against its pinned sha256 when known."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.workflow import start_log

start_log(snakemake.log[0])

from aoe.data.download import download_file

download_file(snakemake.params.url, Path(snakemake.output[0]), sha256=snakemake.params.sha256)
