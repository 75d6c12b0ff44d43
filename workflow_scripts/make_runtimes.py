"""Rule runtimes: every job's benchmark file -> results/RUNTIMES.tsv and RUNTIMES.html (aoe.publish.runtimes)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.publish.pages import markdown_page
from aoe.publish.runtimes import benchmark_rows, runtime_markdown, runtime_tsv

rows = benchmark_rows(snakemake.params.benchmarks)
Path(snakemake.output.tsv).write_text(runtime_tsv(rows))
Path(snakemake.output.html).write_text(markdown_page(runtime_markdown(rows, root=snakemake.params.benchmarks), title="Job runtimes", source=snakemake.params.benchmarks))
