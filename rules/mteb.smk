# MTEB through the mteb package (AoE §5): aoe.evaluate.mteb_eval. With evaluation.mteb.local_tasks
# the tasks read the prepared STS tables / SentEval files of the mirror (no hub); otherwise the
# tasks (or the benchmark, MTEB(eng, v1)) are downloaded by mteb from the Hugging Face hub.

from aoe.evaluate.mteb_eval import MtebEvalError, local_downstream_root, local_task_inputs, local_transfer_inputs

MTEB = config["evaluation"]["mteb"]
try:
    MTEB_LOCAL = local_task_inputs(MTEB["local_tasks"])
except MtebEvalError as err:
    raise WorkflowError(f"config evaluation.mteb.local_tasks: {err}") from None


rule evaluate_mteb:
    input:
        model=get_model_dir,
        tables=expand("results/data/{dataset}/test.parquet", dataset=MTEB_LOCAL["sts"]),
        manifests=expand("results/data/{dataset}/test.manifest.json", dataset=MTEB_LOCAL["sts"]),
        files=lambda wildcards: local_transfer_inputs(MTEB["local_tasks"], DOWNSTREAM),
    output:
        "results/eval/{backbone}/{objective}/{trainset}/seed{seed}/mteb.json",
    log:
        "results/logs/evaluate_mteb/{backbone}/{objective}/{trainset}/seed{seed}.log",
    benchmark:
        "results/benchmarks/evaluate_mteb/{backbone}/{objective}/{trainset}/seed{seed}.tsv"
    conda:
        "../envs/mteb.yaml"
    threads: 2
    resources:
        gpu=1,  # snakemake-executor-plugin-slurm: sbatch --gpus=1
        cpus_per_gpu=2,  # = threads
        mem_mb=16000 if MTEB["local_tasks"] else 128000,
        runtime=60 if MTEB["local_tasks"] else 2880,  # the 56 datasets of MTEB(eng, v1): hours on a GPU
    params:
        benchmark=MTEB["benchmark"],
        tasks=MTEB["tasks"],
        local_tasks=MTEB["local_tasks"],
        downstream=lambda wildcards, input: local_downstream_root(MTEB["local_tasks"], DOWNSTREAM, input.files),
        pooling=get_eval_pooling,
        prompt=get_prompt,
        query_instruction=MTEB["query_instruction"],
        batch_size=MTEB["batch_size"],
        max_length=MTEB["max_length"],
        cell=lambda wildcards: dict(wildcards),
        cache_root=config["evaluation"]["embedding_cache"],
    script:
        "../workflow_scripts/evaluate_mteb.py"
