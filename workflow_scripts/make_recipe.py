"""Rule recipe: the active config -> results/RECIPE.md and results/recipe.json (aoe.plan.ledger)."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.config.workflow import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.plan.ledger import build_recipe, recipe_json, recipe_markdown

recipe = build_recipe(snakemake.config, snakemake.params.configfiles)
Path(snakemake.output.json).write_text(recipe_json(recipe))
Path(snakemake.output.md).write_text(recipe_markdown(recipe))
logging.getLogger("aoe.plan.ledger").info("wrote %s (%d trained cells)", snakemake.output.md, len(recipe["cells"]))
