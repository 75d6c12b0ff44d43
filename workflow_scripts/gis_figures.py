"""Rules gis_figures / gis_collected_figures: the GIS appendix figures from a statistics JSON (no data read)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.gis.stats import plot_length_violins, plot_ngram_overlap, plot_pairs_per_repo

stats = json.loads(Path(snakemake.input[0]).read_text())
out_dir = Path(snakemake.output[0]).parent
prefix = "gis_collected" if "collected" in snakemake.input[0] else "gis"
if prefix == "gis_collected":
    plot_pairs_per_repo(stats, out_dir, name=f"{prefix}_fig7_pairs_per_repo")
plot_ngram_overlap(stats, out_dir, name=f"{prefix}_fig8_ngram_overlap")
plot_length_violins(stats, out_dir, name=f"{prefix}_fig9_token_lengths")
