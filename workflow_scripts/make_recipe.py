"""Rule recipe: the active config -> results/RECIPE.md and results/recipe.json (aoe.plan.ledger)."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.plan.ledger import build_recipe, readings, readings_markdown, recipe_json, recipe_markdown

recipe = build_recipe(snakemake.config, snakemake.params.configfiles)
Path(snakemake.output.json).write_text(recipe_json(recipe))
md = recipe_markdown(recipe)
if snakemake.params.readings:  # the paper grid: the readings of the sources it did not take, each a preset over it
    md += readings_markdown(readings(recipe, [Path(p) for p in snakemake.params.readings], Path(snakemake.scriptdir).parent))
Path(snakemake.output.md).write_text(md)
logging.getLogger("aoe.plan.ledger").info("wrote %s (%d trained cells)", snakemake.output.md, len(recipe["cells"]))
