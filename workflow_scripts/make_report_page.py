"""Rule report_page: a Markdown result (REPORT.md, RECIPE.md, a table's .md) -> its HTML page for the
Snakemake report (aoe.publish.pages.markdown_page)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.publish.pages import markdown_page, summary_with_recipe

source = Path(snakemake.input.md)
text = source.read_text()
if getattr(snakemake.params, "with_recipe", False):  # REPORT's page (rule report_page); a table's page has none
    text = summary_with_recipe(text, Path(snakemake.input.recipe).read_text())
Path(snakemake.output.html).write_text(markdown_page(text, title=source.stem, source=snakemake.params.source))
