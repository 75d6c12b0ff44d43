rule evaluate_sts:
    input:
        model=get_model_dir,
        tables=expand("results/data/{dataset}/test.parquet", dataset=STS_EVAL_DATASETS),
        manifests=expand("results/data/{dataset}/test.manifest.json", dataset=STS_EVAL_DATASETS),
    output:
        "results/eval/{backbone}/{objective}/{trainset}/seed{seed}/sts.json",
    params:
        pooling=lambda wildcards: config["backbones"][wildcards.backbone].get("pooling", "cls")
        if wildcards.objective == PRETRAINED
        else None,
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        cell=lambda wildcards: dict(wildcards),
        tasks=config["evaluation"]["sts"]["tasks"],
    threads: 2
    resources:
        gpu=1,  # snakemake-executor-plugin-slurm: sbatch --gpus=1
        cpus_per_gpu=2,  # = threads
        mem_mb=16000,
        runtime=60,
    log:
        "results/logs/evaluate_sts/{backbone}/{objective}/{trainset}/seed{seed}.log",
    benchmark:
        "results/benchmarks/evaluate_sts/{backbone}/{objective}/{trainset}/seed{seed}.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/evaluate_sts.py"
