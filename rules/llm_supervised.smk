# LLM-supervised training data (AnglE arXiv §4.5, Figure 5, Table 4): config `llm_supervised`, code in
# aoe/llm_supervised/. The tables it writes are prepared tables like the others, so `trainsets` entries
# on dataset stsb_llm / stsb_self train through tokenize and train_model, and tables read the usual
# evaluation results.
#
#   llm_sample_texts   the source column's unique texts (a seeded sample for CPU presets)
#   llm_generate       a generator writes a similar and a dissimilar sentence per text (GPU job;
#                      cached per text under llm_supervised.cache, so a rerun generates nothing)
#   llm_pairs          malformed outputs counted by reason and dropped; (text, similar) 1, (text, dissimilar) 0
#   llm_self_pairs     (text, text) 1: the unsupervised SimCSE-style baseline on the same texts
#
# Each entry of llm_supervised.generators (table name -> generator) gets its own llm_generate and
# llm_pairs jobs, {llmset} being the table name (stsb_llm, stsb_llm_chatglm, ...): the same texts and
# prompts, its own decoding settings and conda environment.

from aoe.llm_supervised import SELF_DATASET, SPLIT

_LLM = config["llm_supervised"]
_LLM_SOURCE = R(f"results/data/{_LLM['source']['dataset']}/{_LLM['source']['split']}")


localrules:
    llm_sample_texts,
    llm_pairs,
    llm_self_pairs,


wildcard_constraints:
    llmset="|".join(map(re.escape, llm_generators(config))) or "NO_GENERATORS",


rule llm_sample_texts:
    input:
        table=f"{_LLM_SOURCE}.parquet",
        manifest=f"{_LLM_SOURCE}.manifest.json",
    output:
        texts=R("results/llm_supervised/texts.parquet"),
        manifest=R("results/llm_supervised/texts.manifest.json"),
    log:
        R("results/logs/llm_supervised/sample_texts.log"),
    conda:
        "../envs/data.yaml"
    params:
        column=_LLM["source"]["column"],
        n_texts=_LLM["n_texts"],
        seed=_LLM["sample_seed"],
    script:
        "../workflow_scripts/llm_sample_texts.py"


rule llm_generate:
    input:
        texts=R("results/llm_supervised/texts.parquet"),
        backbone=lambda wildcards: R(f"results/backbones/{get_llm_generator(wildcards)['backbone']}"),
        code=library_code("llm_supervised/generate.py", "llm_supervised/prompts.py"),
    output:
        generations=R("results/llm_supervised/{llmset}/generations.jsonl"),
        summary=R("results/llm_supervised/{llmset}/generations.json"),
    log:
        R("results/logs/llm_supervised/{llmset}/generate.log"),
    benchmark:
        R("results/benchmarks/llm_supervised/{llmset}/generate.tsv")
    conda:
        lambda wildcards: f"../envs/{get_llm_generator(wildcards)['env']}.yaml"
    threads: 2
    resources:
        **gpu_placement(llm_generator_resources),  # one node, the generator's partition and constraint
        gpu=1,  # snakemake-executor-plugin-slurm: sbatch --gpus=1
        cpus_per_gpu=2,  # = threads
        mem_mb=grows_on_retry(lambda wildcards: llm_generator_resources(wildcards)["eval_mem_mb"]),
        runtime=lambda wildcards: llm_generator_resources(wildcards)["eval_runtime"],
    params:
        generator=lambda wildcards: get_llm_generator(wildcards)["backbone"],
        prompts=_LLM["prompts"],
        size=_LLM["size"],
        # the shared decoding settings, and this generator's own over them
        generation=lambda wildcards: {**_LLM["generation"], **get_llm_generator(wildcards)["generation"]},
        cache=_LLM["cache"],
    script:
        "../workflow_scripts/llm_generate.py"


rule llm_pairs:
    input:
        generations=R("results/llm_supervised/{llmset}/generations.jsonl"),
        summary=R("results/llm_supervised/{llmset}/generations.json"),
        texts_manifest=R("results/llm_supervised/texts.manifest.json"),
        code=library_code("llm_supervised/pairs.py", "llm_supervised/prompts.py"),
    output:
        table=R(f"results/data/{{llmset}}/{SPLIT}.parquet"),
        manifest=R(f"results/data/{{llmset}}/{SPLIT}.manifest.json"),
        generations=R(f"results/data/{{llmset}}/{SPLIT}.generations.jsonl"),
    log:
        R("results/logs/llm_supervised/{llmset}/pairs.log"),
    conda:
        "../envs/data.yaml"
    script:
        "../workflow_scripts/llm_pairs.py"


rule llm_self_pairs:
    input:
        texts=R("results/llm_supervised/texts.parquet"),
        texts_manifest=R("results/llm_supervised/texts.manifest.json"),
        code=library_code("llm_supervised/pairs.py"),
    output:
        table=R(f"results/data/{SELF_DATASET}/{SPLIT}.parquet"),
        manifest=R(f"results/data/{SELF_DATASET}/{SPLIT}.manifest.json"),
    log:
        R("results/logs/llm_supervised/self_pairs.log"),
    conda:
        "../envs/data.yaml"
    script:
        "../workflow_scripts/llm_self_pairs.py"
