"""Rule download_file: one published file from the data mirror, else from its public URL; sha256-checked."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.data.download import fetch_published

p = snakemake.params
# the mirror is read here, not passed as a param: a param would rerun this (and all it feeds) when it changes
origin = fetch_published(
    snakemake.wildcards.relpath, Path(snakemake.output[0]), url=p.url, sha256=p.sha256, mirror=snakemake.config["data"]["mirror"]
)
print(f"{snakemake.wildcards.relpath}: {origin}", flush=True)
