from aoe.config.checkpoint_selection import selection_input


rule train_model:
    input:
        tokens=get_trainset_tokens,
        table=get_trainset_table,
        backbone=R("results/backbones/{backbone}"),
        init=get_init_model,
        # select_checkpoint best: the pair table scored at each epoch end (none under last)
        select=lambda wildcards: selection_input(config, Cell.from_wildcards(wildcards)),
    output:
        directory(R("results/models/{backbone}/{objective}/{trainset}/seed{seed}")),
    log:
        R("results/logs/train/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    benchmark:
        R("results/benchmarks/train/{backbone}/{objective}/{trainset}/seed{seed}.tsv")
    conda:
        "../envs/torch.yaml"
    threads: 2  # data loading stays in the main process; the rest feeds torch's intra-op pool
    resources:
        # sbatch --nodes=1 (one accelerate launch spans the GPUs of one node), and the backbone's
        # partition and constraint when config.yaml names them (docs/cluster.md)
        **gpu_placement(),
        gpu=train_resources("gpus"),  # snakemake-executor-plugin-slurm: sbatch --gpus=N
        mem_mb=train_resources("mem_mb"),
        runtime=train_resources("runtime"),
        cpus_per_gpu=train_resources("cpus_per_gpu"),
    params:
        train=get_train_params,
        # the objective's every setting, built-in defaults included: a changed default reruns what it changes
        loss=get_loss_settings,
        # one process per GPU: accelerate launch spans them
        processes=lambda wildcards: max(1, train_resources("gpus")(wildcards)),
    script:
        "../workflow_scripts/train.py"
