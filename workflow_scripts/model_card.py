"""Rule model_card: a trained cell's model folder and evaluation results -> results/cards/<cell>/README.md (aoe.publish.modelcard)."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.publish.modelcard import write_card

plan = dict(snakemake.params.plan)
write_card(plan, snakemake.output[0], numbers_file=snakemake.input.numbers)
logging.getLogger("aoe.publish.modelcard").info("wrote %s (%d result files)", snakemake.output[0], len(plan["results"]))
