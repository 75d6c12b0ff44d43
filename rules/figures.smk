# The paper's embedding figures (AoE Fig. 3, 4, 5, 10 and the gradient figure the paper argues):
# config `figures`, code in aoe/results/figures/. They read model folders and never train.
#
#   figure_pairs   one job per model: the test pairs' embeddings (through the shared embedding
#                  cache the model's STS evaluation filled), cosines, gradient norms -> .npz
#   figure_tsne    t-SNE of the real and imaginary halves (saturation zone / all pairs) -> .npz
#   fig3, fig10, fig4, fig5, fig_gradients   CPU-only plotting: PDF, PNG and a JSON of the numbers
#   training_curves  per table (not a paper figure): loss vs step of its trained models, seeds overlaid,
#                    from their metrics.jsonl (config figures.training_curves, aoe/results/figures/curves.py)
#
# Each plotting rule is its own target (`snakemake fig4`); changing plot code reruns only it.

import re

from aoe.data.sts import SCORE_RANGE
from aoe.results.figures.curves import curve_inputs, curve_panels, curve_results, curve_tables
from aoe.config.workflow import built_figures
from aoe.results.figures import (
    FIGURES,
    figure_cells,
    figure_inputs,
    figure_results,
    model_label,
    pair_tables,
    shares_eval_cache,
    unavailable_figures,
)

_FIG = config["figures"]
_FIG_CELLS = figure_cells(config)
FIGURE_RESULTS = figure_results(config)
# results/figures/training_curves/{table}.pdf, .png, .json: part of `all` and `figures`, not of REPORT.md's inputs
CURVE_RESULTS = curve_results(config)
_CURVE_TABLES = curve_tables(config)
# the STS evaluation's embedding cache holds the figure dataset's pairs when it evaluates that dataset
_FIG_SHARES_EVAL = shares_eval_cache(config, STS_EVAL_DATASETS)

for _name, _why in unavailable_figures(config).items():
    if _name in built_figures(config):  # a figure build.figures leaves out is not built, and says nothing
        print(f"figures: {_name} left out of the targets: {_why}", file=sys.stderr)


rule figure_pairs:
    input:
        unpack(lambda wildcards: pair_tables(config, wildcards.dataset, STS_EVAL_DATASETS)),
        model=get_model_dir,
        # order only: the model's STS evaluation embeds the same text set first; this job reads it back
        sts=lambda wildcards: (
            R(
                f"results/eval/{wildcards.backbone}/{wildcards.objective}/{wildcards.trainset}/seed{wildcards.seed}/sts.json"
            )
            if _FIG_SHARES_EVAL
            else []
        ),
    output:
        R("results/analysis/figures/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}-test.npz"),
    log:
        R("results/logs/figures/pairs/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}.log"),
    benchmark:
        R("results/benchmarks/figures/pairs/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}.tsv")
    conda:
        "../envs/torch.yaml"
    threads: 2
    resources:
        # a cache hit after the STS evaluation: no GPU needed; a miss loads the model on the CPU and
        # embeds one STS test set, so the memory is the backbone's evaluation request
        mem_mb=eval_resources("eval_mem_mb"),
        runtime=eval_resources("eval_runtime"),
    params:
        pooling=get_eval_pooling,
        prompt=get_prompt,
        eval_text=get_eval_text,  # a changed rewrite reruns the evaluation
        batch_size=config["evaluation"]["sts"]["batch_size"],
        max_length=config["evaluation"]["sts"]["max_length"],
        # the evaluated tasks decide the text set, hence the cache entry; [] = the dataset's own texts
        tasks=config["evaluation"]["sts"]["tasks"] if _FIG_SHARES_EVAL else [],
        max_pairs=config["evaluation"]["sts"]["max_pairs"],
        uncapped_tasks=config["evaluation"]["sts"]["uncapped_tasks"],
        cache_root=config["evaluation"]["embedding_cache"],
        cell=lambda wildcards: dict(wildcards),
    script:
        "../workflow_scripts/figure_pairs.py"


rule figure_tsne:
    input:
        R("results/analysis/figures/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}-test.npz"),
    output:
        R("results/analysis/figures/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}-test.tsne-{zone}.npz"),
    log:
        R("results/logs/figures/tsne/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}-{zone}.log"),
    benchmark:
        R("results/benchmarks/figures/tsne/{backbone}/{objective}/{trainset}/seed{seed}/{dataset}-{zone}.tsv")
    wildcard_constraints:
        zone="saturation|all",
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=grows_on_retry(8000),
        runtime=30,
    params:
        geometry={k: v for k, v in _FIG["sts_geometry"].items() if k not in ("model", "distance", "max_label_chars")},
    script:
        "../workflow_scripts/figure_tsne.py"


rule fig3:
    input:
        unpack(lambda wildcards: figure_inputs(config, "fig3")),
        code=library_code("results/figures/sts_geometry.py", "results/figures/style.py"),
    output:
        R(f"results/figures/{FIGURES['fig3']}.pdf"),
        report(
            R(f"results/figures/{FIGURES['fig3']}.png"),
            caption="../report/fig3.rst",
            category="3. Figures",
            labels={"figure": "AoE Fig. 3: geometry of the saturation-zone pairs"},
        ),
        json=R(f"results/figures/{FIGURES['fig3']}.json"),
    log:
        R("results/logs/figures/fig3.log"),
    conda:
        "../envs/report.yaml"
    params:
        zone="saturation",
        geometry=_FIG["sts_geometry"],
        label=model_label(_FIG_CELLS["fig3"][0][1]),
    script:
        "../workflow_scripts/figure_geometry.py"


rule fig10:
    input:
        unpack(lambda wildcards: figure_inputs(config, "fig10")),
        code=library_code("results/figures/sts_geometry.py", "results/figures/style.py"),
    output:
        R(f"results/figures/{FIGURES['fig10']}.pdf"),
        report(
            R(f"results/figures/{FIGURES['fig10']}.png"),
            caption="../report/fig10.rst",
            category="3. Figures",
            labels={"figure": "AoE Fig. 10: geometry of all pairs"},
        ),
        json=R(f"results/figures/{FIGURES['fig10']}.json"),
    log:
        R("results/logs/figures/fig10.log"),
    conda:
        "../envs/report.yaml"
    params:
        zone="all",
        geometry=_FIG["sts_geometry"],
        label=model_label(_FIG_CELLS["fig10"][0][1]),
    script:
        "../workflow_scripts/figure_geometry.py"


rule fig4:
    input:
        unpack(lambda wildcards: figure_inputs(config, "fig4")),
        code=library_code("results/figures/similarity.py", "results/figures/style.py"),
    output:
        R(f"results/figures/{FIGURES['fig4']}.pdf"),
        report(
            R(f"results/figures/{FIGURES['fig4']}.png"),
            caption="../report/fig4.rst",
            category="3. Figures",
            labels={"figure": "AoE Fig. 4: cosine density per gold group"},
        ),
        json=R(f"results/figures/{FIGURES['fig4']}.json"),
    log:
        R("results/logs/figures/fig4.log"),
    conda:
        "../envs/report.yaml"
    params:
        labels=[model_label(c) for _, c in _FIG_CELLS["fig4"]],
        density=_FIG["similarity_density"],
        score_range=list(SCORE_RANGE[_FIG["dataset"]]),
    script:
        "../workflow_scripts/figure_similarity.py"


rule fig5:
    input:
        unpack(lambda wildcards: figure_inputs(config, "fig5")),
        code=library_code("results/figures/similarity.py", "results/figures/style.py"),
    output:
        R(f"results/figures/{FIGURES['fig5']}.pdf"),
        report(
            R(f"results/figures/{FIGURES['fig5']}.png"),
            caption="../report/fig5.rst",
            category="3. Figures",
            labels={"figure": "AoE Fig. 5: gold score density"},
        ),
    log:
        R("results/logs/figures/fig5.log"),
    conda:
        "../envs/report.yaml"
    params:
        density=_FIG["similarity_density"],
    script:
        "../workflow_scripts/figure_gold.py"


rule fig_gradients:
    input:
        unpack(lambda wildcards: figure_inputs(config, "fig_gradients")),
        code=library_code("results/figures/gradients.py", "results/figures/style.py"),
    output:
        R(f"results/figures/{FIGURES['fig_gradients']}.pdf"),
        report(
            R(f"results/figures/{FIGURES['fig_gradients']}.png"),
            caption="../report/fig_gradients.rst",
            category="3. Figures",
            labels={"figure": "Score gradient vs cosine (not a paper figure)"},
        ),
        json=R(f"results/figures/{FIGURES['fig_gradients']}.json"),
    log:
        R("results/logs/figures/fig_gradients.log"),
    conda:
        "../envs/report.yaml"
    params:
        gradients=_FIG["gradients"],
        saturation_threshold=_FIG["sts_geometry"]["saturation_threshold"],
        label=model_label(_FIG_CELLS["fig_gradients"][0][1]),
    script:
        "../workflow_scripts/figure_gradients.py"


# One figure per table with trained models: a panel per (backbone, objective, train set), its seeds
# and reruns overlaid; the loss every log_every steps and, where a cell selects its checkpoint
# (select_checkpoint best), each epoch end's validation Spearman. Reads the models' metrics.jsonl only
# (the TensorBoard event files beside it, <model>/tensorboard/, hold the same numbers).
rule training_curves:
    input:
        models=lambda wildcards: curve_inputs(config, wildcards.table),
        code=library_code("results/figures/curves.py", "results/figures/style.py"),
    output:
        R("results/figures/training_curves/{table}.pdf"),
        report(
            R("results/figures/training_curves/{table}.png"),
            caption="../report/training_curves.rst",
            category="4. Training curves",
            subcategory="{table}",
            labels={"table": "{table}"},
        ),
        json=R("results/figures/training_curves/{table}.json"),
    log:
        R("results/logs/figures/training_curves/{table}.log"),
    wildcard_constraints:
        # the tables that have curves; a pattern nothing matches when none has
        table="|".join(re.escape(t) for t in _CURVE_TABLES) or "(?!)",
    conda:
        "../envs/report.yaml"
    params:
        panels=lambda wildcards: curve_panels(config, wildcards.table),
    script:
        "../workflow_scripts/figure_curves.py"
