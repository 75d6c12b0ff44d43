# evaluation.backend senteval: SimCSE's SentEval, installed by its own env (not on PyPI)
SUITE_ENV = "../envs/senteval.yaml" if config["evaluation"]["backend"] == "senteval" else "../envs/torch.yaml"


rule evaluate_sts:
    input:
        model=get_model_dir,
        tables=expand(R("results/data/{dataset}/test.parquet"), dataset=STS_EVAL_DATASETS),
        manifests=expand(R("results/data/{dataset}/test.manifest.json"), dataset=STS_EVAL_DATASETS),
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/sts.json"),
    log:
        R("results/logs/evaluate_sts/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    benchmark:
        R("results/benchmarks/evaluate_sts/{backbone}/{objective}/{trainset}/seed{seed}.tsv")
    conda:
        SUITE_ENV
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,  # snakemake-executor-plugin-slurm: sbatch --gpus=1
        cpus_per_gpu=2,  # = threads
        mem_mb=eval_resources("eval_mem_mb"),
        runtime=eval_resources("eval_runtime"),
    params:
        pooling=get_eval_pooling,
        eval_pooling=get_cell_eval_pooling,  # trainsets.<t>.objective_train.<o>.eval_pooling, or a variant row's
        prompt=get_prompt,
        eval_text=get_eval_text,  # a changed rewrite reruns the evaluation
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        cell=lambda wildcards: dict(wildcards),
        tasks=config["evaluation"]["sts"]["tasks"],
        cache_root=config["evaluation"]["embedding_cache"],
        backend=config["evaluation"]["backend"],
        downstream=str(DOWNSTREAM),  # backend senteval reads SentEval's folder
        max_pairs=config["evaluation"]["sts"]["max_pairs"],
        uncapped_tasks=config["evaluation"]["sts"]["uncapped_tasks"],
    script:
        "../workflow_scripts/evaluate_sts.py"


# An evaluation-only variant of a trained cell (a table row's eval_pooling): the same model scored under
# another pooling, beside its own sts.json; nothing is retrained.
use rule evaluate_sts as evaluate_sts_eval_pooling with:
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/sts.pool-{eval_pooling}.json"),
    log:
        R("results/logs/evaluate_sts/{backbone}/{objective}/{trainset}/seed{seed}.pool-{eval_pooling}.log"),
    benchmark:
        R("results/benchmarks/evaluate_sts/{backbone}/{objective}/{trainset}/seed{seed}.pool-{eval_pooling}.tsv")


rule evaluate_indomain:
    input:
        model=get_model_dir,
        table=lambda wildcards: get_indomain_split(wildcards) + ".parquet",
        manifest=lambda wildcards: get_indomain_split(wildcards) + ".manifest.json",
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/indomain_{evalset}.json"),
    log:
        R("results/logs/evaluate_indomain/{backbone}/{objective}/{trainset}/seed{seed}/{evalset}.log"),
    benchmark:
        R("results/benchmarks/evaluate_indomain/{backbone}/{objective}/{trainset}/seed{seed}/{evalset}.tsv")
    conda:
        "../envs/torch.yaml"
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,
        cpus_per_gpu=2,
        mem_mb=eval_resources("eval_mem_mb"),
        runtime=eval_resources("eval_runtime"),
    params:
        pooling=get_eval_pooling,
        prompt=get_prompt,
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        cell=lambda wildcards: {k: wildcards[k] for k in ("backbone", "objective", "trainset", "seed")},
        cache_root=config["evaluation"]["embedding_cache"],
        gold=get_cell_eval_gold,  # trainsets.<t>.train / objective_train.<o>.eval_gold: the headline's gold
    script:
        "../workflow_scripts/evaluate_indomain.py"


rule saturation:
    input:
        model=R("results/backbones/{backbone}"),
        table=R("results/data/{dataset}/{split}.parquet"),
        manifest=R("results/data/{dataset}/{split}.manifest.json"),
    output:
        R("results/analysis/saturation/{backbone}/{dataset}-{split}.json"),
    log:
        R("results/logs/saturation/{backbone}/{dataset}-{split}.log"),
    benchmark:
        R("results/benchmarks/saturation/{backbone}/{dataset}-{split}.tsv")
    conda:
        "../envs/torch.yaml"
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,
        cpus_per_gpu=2,
        mem_mb=eval_resources("eval_mem_mb"),
        runtime=eval_resources("eval_runtime"),
    params:
        pooling=lambda wildcards: pretrained_embedding(config, wildcards.backbone)[0],  # the backbone as downloaded
        prompt=get_prompt,
        max_pairs=config["analysis"]["saturation"]["max_pairs"],
        max_length=config["analysis"]["saturation"]["max_length"],
        batch_size=config["evaluation"]["sts"]["batch_size"],
    script:
        "../workflow_scripts/saturation.py"


rule evaluate_flickr30k:
    input:
        model=get_model_dir,
        table=R("results/data/flickr30k/test.parquet"),
        manifest=R("results/data/flickr30k/test.manifest.json"),
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/flickr30k.json"),
    log:
        R("results/logs/evaluate_flickr30k/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    benchmark:
        R("results/benchmarks/evaluate_flickr30k/{backbone}/{objective}/{trainset}/seed{seed}.tsv")
    conda:
        "../envs/torch.yaml"
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,
        cpus_per_gpu=2,
        mem_mb=eval_resources("eval_mem_mb"),
        runtime=eval_resources("eval_runtime", 0.5),
    params:
        pooling=get_eval_pooling,
        prompt=get_prompt,
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        cell=lambda wildcards: dict(wildcards),
        cache_root=config["evaluation"]["embedding_cache"],
    script:
        "../workflow_scripts/evaluate_flickr30k.py"


rule evaluate_transfer:
    input:
        model=get_model_dir,
        files=get_transfer_inputs,
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/transfer.json"),
    log:
        R("results/logs/evaluate_transfer/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    benchmark:
        R("results/benchmarks/evaluate_transfer/{backbone}/{objective}/{trainset}/seed{seed}.tsv")
    conda:
        SUITE_ENV
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,
        cpus_per_gpu=2,
        mem_mb=eval_resources("eval_mem_mb", 2),
        runtime=eval_resources("eval_runtime", 4),  # SentEval's test mode: 10-fold CV with inner model selection, on the CPU side
    params:
        downstream=str(DOWNSTREAM),
        tasks=config["evaluation"]["transfer"]["tasks"],
        mode=config["evaluation"]["transfer"]["mode"],
        max_rows=config["evaluation"]["transfer"]["max_rows"],
        pooling=get_eval_pooling,
        eval_pooling=get_cell_eval_pooling,  # as evaluate_sts's: the cell's, or a variant row's
        prompt=get_prompt,
        eval_text=get_eval_text,  # a changed rewrite reruns the evaluation
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        cell=lambda wildcards: dict(wildcards),
        cache_root=config["evaluation"]["embedding_cache"],
        backend=config["evaluation"]["backend"],
    script:
        "../workflow_scripts/evaluate_transfer.py"


# A transfer table row's eval_pooling: the same model's transfer tasks under another pooling, beside its
# transfer.json (a batch-dependent one in SentEval's transfer batches); nothing is retrained.
use rule evaluate_transfer as evaluate_transfer_eval_pooling with:
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/transfer.pool-{eval_pooling}.json"),
    log:
        R("results/logs/evaluate_transfer/{backbone}/{objective}/{trainset}/seed{seed}.pool-{eval_pooling}.log"),
    benchmark:
        R("results/benchmarks/evaluate_transfer/{backbone}/{objective}/{trainset}/seed{seed}.pool-{eval_pooling}.tsv")


rule evaluate_nli_probe:
    input:
        model=get_model_dir,
        tables=[
            R(f"results/data/{t}.nli3.parquet") for t in probe_inputs(config["evaluation"]["nli_probe"]["protocol"])
        ],
    output:
        R("results/eval/{backbone}/{objective}/{trainset}/seed{seed}/nli_probe.json"),
    log:
        R("results/logs/evaluate_nli_probe/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    benchmark:
        R("results/benchmarks/evaluate_nli_probe/{backbone}/{objective}/{trainset}/seed{seed}.tsv")
    conda:
        "../envs/torch.yaml"
    threads: 2
    resources:
        **gpu_placement(),  # sbatch --nodes=1, the backbone's partition and constraint (docs/cluster.md)
        gpu=1,
        cpus_per_gpu=2,
        mem_mb=eval_resources("eval_mem_mb", 4),
        runtime=eval_resources("eval_runtime", 4),
    params:
        protocol=config["evaluation"]["nli_probe"]["protocol"],
        mode=config["evaluation"]["nli_probe"]["mode"],
        max_rows=config["evaluation"]["nli_probe"]["max_rows"],
        pooling=get_eval_pooling,
        prompt=get_prompt,
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        cell=lambda wildcards: dict(wildcards),
        cache_root=config["evaluation"]["embedding_cache"],
    script:
        "../workflow_scripts/evaluate_nli_probe.py"
