# GitHub Issue Similarity: statistics and figures of the paper's appendix (Table 7, Fig. 7-9),
# from the published dataset (hub) and, on request, from our own collection via the GitHub API.


localrules:
    gis_collect,


rule gis_collect:
    # Needs the internet and (for 5,000 requests/hour instead of 60) $GITHUB_TOKEN: a local rule.
    # The response cache (gis_collector.cache) survives a killed run, so rerunning resumes.
    output:
        pairs=R("results/gis/collected/pairs.jsonl"),
        stats=R("results/gis/collected/stats.json"),
    log:
        R("results/logs/gis/collect.log"),
    benchmark:
        R("results/benchmarks/gis/collect.tsv")
    conda:
        "../envs/data.yaml"
    params:
        collector=config["gis_collector"],
    script:
        "../workflow_scripts/gis_collect.py"


rule gis_stats:
    input:
        tables=expand(R("results/data/gis/{split}.parquet"), split=["train", "valid", "test"]),
        backbone=R(f"results/backbones/{config['analysis']['gis']['tokenizer_backbone']}"),
    output:
        R("results/analysis/gis/stats.json"),
    log:
        R("results/logs/gis/stats.log"),
    benchmark:
        R("results/benchmarks/gis/stats.tsv")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow_scripts/gis_stats.py"


rule gis_figures:
    # Fig. 7 (pairs per repository) needs a repository per pair: only our collection has it.
    input:
        R("results/analysis/gis/stats.json"),
    output:
        R("results/figures/gis_fig8_ngram_overlap.pdf"),
        report(
            R("results/figures/gis_fig8_ngram_overlap.png"),
            caption="../report/gis_figures.rst",
            category="3. Figures",
            labels={"figure": "AnglE Fig. 8: GIS n-gram overlap"},
        ),
        R("results/figures/gis_fig9_token_lengths.pdf"),
        report(
            R("results/figures/gis_fig9_token_lengths.png"),
            caption="../report/gis_figures.rst",
            category="3. Figures",
            labels={"figure": "AnglE Fig. 9: GIS token lengths"},
        ),
    log:
        R("results/logs/gis/figures.log"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow_scripts/gis_figures.py"


rule gis_collected_figures:
    input:
        R("results/gis/collected/stats.json"),
    output:
        multiext(R("results/figures/gis_collected_fig7_pairs_per_repo"), ".pdf", ".png"),
        multiext(R("results/figures/gis_collected_fig8_ngram_overlap"), ".pdf", ".png"),
        multiext(R("results/figures/gis_collected_fig9_token_lengths"), ".pdf", ".png"),
    log:
        R("results/logs/gis/collected_figures.log"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow_scripts/gis_figures.py"


# One target per GIS figure of the AnglE appendix. Fig. 7 (pairs per repository) exists only for
# our own collection (needs the GitHub API); Fig. 8 and 9 come from the published dataset.
rule gis_fig7:
    input:
        multiext(R("results/figures/gis_collected_fig7_pairs_per_repo"), ".pdf", ".png"),


rule gis_fig8:
    input:
        multiext(R("results/figures/gis_fig8_ngram_overlap"), ".pdf", ".png"),


rule gis_fig9:
    input:
        multiext(R("results/figures/gis_fig9_token_lengths"), ".pdf", ".png"),
