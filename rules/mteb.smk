# MTEB through the mteb package (AoE §5): aoe.evaluate.mteb_eval. With evaluation.mteb.local_tasks
# the tasks read the prepared STS tables / SentEval files (rule download_file: the mirror or their sources; no hub); otherwise the
# tasks (or the benchmark, MTEB(eng, v1)) are downloaded by mteb from the Hugging Face hub.
# Besides mteb.json (the tables' summary) the job writes mteb's own result files, as mteb lays them out
# (mteb_results/results/<model>/<revision>/<Task>.json + model_meta.json: submittable to the MTEB results
# repository as they are). It evaluates through an mteb.ResultCache kept beside the embedding cache
# ({embedding_cache}/mteb, not an output: Snakemake deletes a job's outputs before a rerun), so a rerun
# (a timed-out job's retry) skips the tasks it holds and resumes a cut-short one from its finished subsets.

from aoe.evaluate.mteb_local import local_task_inputs

MTEB = config["evaluation"]["mteb"]
# MTEB(eng, v1)'s 56 datasets from the hub: its retrieval corpora held as text (MS MARCO alone is 8.8M
# passages) and ~48 times the 7-task STS protocol's work (2,880 min for BERT-base at its 60 min): our
# estimates, to be replaced by a measured cluster run.
MTEB_FULL_EXTRA_MEM_MB = 112000
MTEB_FULL_RUNTIME_SCALE = 48
# local_tasks checked at start-up (schema enum, aoe.plan.evaluation_checks.check_mteb)
MTEB_LOCAL = local_task_inputs(MTEB["local_tasks"])


rule evaluate_mteb:
    input:
        model=get_model_dir,
        tables=expand(R("results/data/{dataset}/test.parquet"), dataset=MTEB_LOCAL["sts"]),
        manifests=expand(R("results/data/{dataset}/test.manifest.json"), dataset=MTEB_LOCAL["sts"]),
        files=[str(DOWNSTREAM / f) for t in MTEB_LOCAL["transfer"] for f in transfer_files(t)],
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/mteb.json"),
        mteb_results=directory(R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/mteb_results")),
    log:
        R("results/logs/evaluate_mteb/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    benchmark:
        R("results/benchmarks/evaluate_mteb/{backbone}/{objective}/{trainset}/seed{seed}.tsv")
    conda:
        "../envs/mteb.yaml"
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,  # snakemake-executor-plugin-slurm: sbatch --gpus=1
        cpus_per_gpu=2,  # = threads
        # the backbone's evaluation request; the full benchmark adds its corpora's memory and takes
        # MTEB_FULL_RUNTIME_SCALE times the STS evaluation's time, cut to the backbone's max_runtime
        # (LLaMA-2 7B: 8,640 min asked, 4,320 given; a timed-out job's retry reads back what it
        # embedded from the embedding cache; docs/cluster.md "Time limits")
        mem_mb=eval_resources("eval_mem_mb", extra=0 if MTEB["local_tasks"] else MTEB_FULL_EXTRA_MEM_MB),
        runtime=eval_resources("eval_runtime", 1 if MTEB["local_tasks"] else MTEB_FULL_RUNTIME_SCALE),
    params:
        benchmark=MTEB["benchmark"],
        tasks=MTEB["tasks"],
        local_tasks=MTEB["local_tasks"],
        downstream=str(DOWNSTREAM) if MTEB_LOCAL["transfer"] else None,
        pooling=get_eval_pooling,
        prompt=get_prompt,
        # a released checkpoint's own (its authors' retrieval prompt), else the config's
        query_instruction=lambda wildcards: (
            released_checkpoints(config).get(wildcards.trainset, {}).get("query_instruction")
            if wildcards.objective == RELEASED
            else None
        )
        or MTEB["query_instruction"],
        batch_size=MTEB["batch_size"],
        max_length=MTEB["max_length"],
        cell=lambda wildcards: dict(wildcards),
        cache_root=config["evaluation"]["embedding_cache"],
        # mteb's result cache (null embedding cache: none but the output folder, so a rerun evaluates again)
        result_cache=(
            str(Path(config["evaluation"]["embedding_cache"]) / "mteb")
            if config["evaluation"]["embedding_cache"]
            else None
        ),
    script:
        "../workflow_scripts/evaluate_mteb.py"
