# GitHub Issue Similarity: statistics and figures of the paper's appendix (Table 7, Fig. 7-9),
# from the published dataset (hub) and, on request, from our own collection via the GitHub API.


localrules:
    gis_collect,


rule gis_collect:
    # Needs the internet and (for 5,000 requests/hour instead of 60) $GITHUB_TOKEN: a local rule.
    # The response cache (gis_collector.cache) survives a killed run, so rerunning resumes.
    output:
        pairs="results/gis/collected/pairs.jsonl",
        stats="results/gis/collected/stats.json",
    log:
        "results/logs/gis/collect.log",
    benchmark:
        "results/benchmarks/gis/collect.tsv"
    conda:
        "../envs/data.yaml"
    params:
        collector=config["gis_collector"],
    script:
        "../workflow_scripts/gis_collect.py"


rule gis_stats:
    input:
        tables=expand("results/data/gis/{split}.parquet", split=["train", "valid", "test"]),
        backbone=f"results/backbones/{config['analysis']['gis']['tokenizer_backbone']}",
    output:
        "results/analysis/gis/stats.json",
    log:
        "results/logs/gis/stats.log",
    benchmark:
        "results/benchmarks/gis/stats.tsv"
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/gis_stats.py"


rule gis_figures:
    # Fig. 7 (pairs per repository) needs a repository per pair: only our collection has it.
    input:
        "results/analysis/gis/stats.json",
    output:
        report(
            multiext("results/figures/gis_fig8_ngram_overlap", ".pdf", ".png"),
            caption="../report/gis_figures.rst",
            category="Figures",
        ),
        report(
            multiext("results/figures/gis_fig9_token_lengths", ".pdf", ".png"),
            caption="../report/gis_figures.rst",
            category="Figures",
        ),
    log:
        "results/logs/gis/figures.log",
    conda:
        "../envs/report.yaml"
    script:
        "../workflow_scripts/gis_figures.py"


rule gis_collected_figures:
    input:
        "results/gis/collected/stats.json",
    output:
        multiext("results/figures/gis_collected_fig7_pairs_per_repo", ".pdf", ".png"),
        multiext("results/figures/gis_collected_fig8_ngram_overlap", ".pdf", ".png"),
        multiext("results/figures/gis_collected_fig9_token_lengths", ".pdf", ".png"),
    log:
        "results/logs/gis/collected_figures.log",
    conda:
        "../envs/report.yaml"
    script:
        "../workflow_scripts/gis_figures.py"


# One target per GIS figure of the AnglE appendix. Fig. 7 (pairs per repository) exists only for
# our own collection (needs the GitHub API); Fig. 8 and 9 come from the published dataset.
rule gis_fig7:
    input:
        multiext("results/figures/gis_collected_fig7_pairs_per_repo", ".pdf", ".png"),


rule gis_fig8:
    input:
        multiext("results/figures/gis_fig8_ngram_overlap", ".pdf", ".png"),


rule gis_fig9:
    input:
        multiext("results/figures/gis_fig9_token_lengths", ".pdf", ".png"),
