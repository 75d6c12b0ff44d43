"""Rule push_model: a trained model folder and its card -> the Hugging Face hub (aoe.publish.hub); the receipt
results/hub/<cell>.json records the repository, the commit and each file's sha256 (never the token)."""

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.publish.hub import push_model

out = Path(snakemake.output[0])
# laid out next to the receipt (same file system as the model: hard links, no copies), removed after
receipt = push_model(snakemake.input.model, snakemake.params.repo_id, snakemake.input.card,
                     private=snakemake.params.private, stage_in=out.parent)
out.write_text(json.dumps(receipt, indent=2) + "\n")
logging.getLogger("aoe.publish.hub").info("pushed %s to %s: commit %s", snakemake.input.model, receipt["repo_id"], receipt["commit"])
