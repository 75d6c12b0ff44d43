"""Rule evaluate_mteb: a model (or the backbone as downloaded) on MTEB through the mteb package."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from aoe.evaluate.mteb_eval import run_mteb_evaluation

run_mteb_evaluation(
    model_dir=snakemake.input.model,
    out=snakemake.output[0],
    benchmark=snakemake.params.benchmark,
    tasks=snakemake.params.tasks,
    local_tasks=snakemake.params.local_tasks,
    tables=snakemake.input.get("tables", []),
    manifests=snakemake.input.get("manifests", []),
    downstream=snakemake.params.downstream,
    pooling=snakemake.params.pooling,
    batch_size=snakemake.params.batch_size,
    max_length=snakemake.params.max_length,
    prompt=snakemake.params.prompt,
    query_instruction=snakemake.params.query_instruction,
    cell=snakemake.params.cell,
    cache_root=snakemake.params.get("cache_root"),
    results_dir=snakemake.output.mteb_results,
    result_cache=snakemake.params.get("result_cache"),
)
