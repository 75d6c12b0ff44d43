"""Rule report_md: the tables' and figures' JSON files -> results/REPORT.md."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

from aoe.publish.report import build_report, git_commit

text = build_report(
    list(snakemake.input.tables),
    configfiles=snakemake.params.configfiles,
    commit=git_commit(Path(snakemake.scriptdir).parent),
    figure_files=list(snakemake.input.figures),
    analysis_files=list(snakemake.input.analysis),
)
Path(snakemake.output[0]).write_text(text)
logging.getLogger("aoe.publish.report").info("wrote %s (%d tables)", snakemake.output[0], len(snakemake.input.tables))
