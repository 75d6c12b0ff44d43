"""Rule download_senteval: fetch SimCSE's SentEval data archive, the transfer tasks' folder when no mirror is given."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.workflow import start_log

start_log(snakemake.log[0])

from aoe.data.download import fetch_senteval_archive
from aoe.data.io import sha256_file

p = snakemake.params
downstream = fetch_senteval_archive(p.url, Path(p.cache_dir), sha256=p.sha256)
archive = Path(p.cache_dir) / Path(p.url).name
record = {"url": p.url, "downstream": str(downstream.resolve())}
if archive.is_file():
    record["archive_sha256"] = sha256_file(archive)
Path(snakemake.output[0]).write_text(json.dumps(record, indent=2) + "\n")
