"""Rule gis_collect: rebuild the GIS dataset from the GitHub API (the token comes from $GITHUB_TOKEN only)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.gis import collect, load_repo_list

c = snakemake.params.collector
repos = c["repos"] if c["repos"] else load_repo_list()
collect(
    repos,
    Path(snakemake.output.pairs).parent,
    since=c["since"],
    until=c["until"],
    seed=c["seed"],
    cache_dir=c["cache"],
    progress=False,
)
