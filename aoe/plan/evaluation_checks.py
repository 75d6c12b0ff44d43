"""What is evaluated and drawn besides the tables, checked while planning: the evaluation settings
(SentEval's caps, the local MTEB tasks), the models evaluated as downloaded (released checkpoints,
pretrained variants), the saturation analysis and the figures.

Apart from :mod:`aoe.plan.training_checks` (what is trained) and :mod:`aoe.plan.table_checks` (what the tables
read): these keys name models and settings of the evaluation and analysis rules. Each raises
:class:`aoe.config.errors.ConfigError` naming the key.
"""

from __future__ import annotations

from aoe.config.workflow import built_figures
from aoe.config.cells import NO_TRAINSET, PRETRAINED
from aoe.config.errors import ConfigError
from aoe.config.pretrained import pretrained_variants, released_checkpoints
from aoe.plan.training_checks import unknown_backbone

__all__ = ["check_figures", "check_mteb", "check_pretrained_variants", "check_released", "check_saturation", "check_senteval_caps"]


def check_saturation(config: dict) -> None:
    """``analysis.saturation``: known backbones and, when any is given, a pair dataset and its split."""
    from aoe.data.catalog import pair_table_problem

    backbones = config["backbones"]
    sat = config.get("analysis", {}).get("saturation", {})
    for b in sat.get("backbones", []):
        if b not in backbones:
            raise ConfigError(f"analysis.saturation.backbones: {unknown_backbone(b, config)}")
    if sat.get("backbones") and (problem := pair_table_problem(sat["dataset"], sat["split"])):
        raise ConfigError(f"analysis.saturation: {problem}")


def check_senteval_caps(config: dict) -> None:
    """SimCSE's SentEval (evaluation.backend senteval) scores every STS pair and transfer sample: a CPU cap
    on them would be silently ignored there (and the STS figures, which honour it, would draw other pairs)."""
    if config["evaluation"]["backend"] != "senteval":
        return
    for key, value in (("sts.max_pairs", config["evaluation"]["sts"]["max_pairs"]),
                       ("transfer.max_rows", config["evaluation"]["transfer"]["max_rows"])):
        if value is not None:
            raise ConfigError(f"evaluation.{key}: {value} caps what the builtin protocol scores, and evaluation.backend "
                              f"senteval (SimCSE's SentEval) scores every pair and sample; set evaluation.{key} null "
                              "or evaluation.backend builtin")


def check_released(config: dict) -> None:
    """Each published checkpoint (released.checkpoints): a known backbone (its evaluation resources and
    results path), a key no train set uses (both name the cell's third folder), and a base for an adapter."""
    for name, spec in released_checkpoints(config).items():
        where = f"released.checkpoints.{name}"
        if spec["backbone"] not in config["backbones"]:
            raise ConfigError(f"{where}.backbone: {unknown_backbone(spec['backbone'], config)}")
        if name in config["trainsets"] or name == "none":
            raise ConfigError(f"{where}: the name is also a train set's; rename the checkpoint")
        if not spec.get("hf_id") and not spec.get("path"):
            raise ConfigError(f"{where}: give hf_id (the hub) or path (a local copy laid out as the hub serves it)")
        base = spec.get("base") or {}
        if spec.get("adapter") and not (base.get("hf_id") or base.get("path")):
            raise ConfigError(f"{where}.base: an adapter needs the model it was trained on (hf_id and revision, or path)")


def check_pretrained_variants(config: dict) -> None:
    """Each evaluation.pretrained_variants name is free as a cell's third folder (no train set,
    released checkpoint or ``none`` has it), and its prompt has a {text} slot."""
    from aoe.model.prompts import check_prompt

    taken = {NO_TRAINSET: "the backbone's own embedding", **{t: "a train set" for t in config["trainsets"]},
             **{c: "a released checkpoint" for c in released_checkpoints(config)}}
    for name, spec in pretrained_variants(config).items():
        where = f"evaluation.pretrained_variants.{name}"
        if name in taken:
            raise ConfigError(f"{where}: the name is also {taken[name]}'s (both name results/eval/<backbone>/<objective>/<name>); rename the variant")
        try:
            check_prompt(spec.get("prompt"))
        except ValueError as err:
            raise ConfigError(f"{where}.prompt: {err}") from None


def check_mteb(config: dict) -> None:
    """``evaluation.mteb.local_tasks`` are tasks aoe.evaluate.mteb_eval defines (the schema's enum
    lists them too: this catches the two drifting apart)."""
    from aoe.evaluate.mteb_local import MtebEvalError, local_task_inputs

    try:
        local_task_inputs(config["evaluation"]["mteb"]["local_tasks"])
    except MtebEvalError as err:
        raise ConfigError(f"evaluation.mteb.local_tasks: {err}") from None


def check_figures(config: dict) -> None:
    """Config errors the schema cannot see: unknown backbones, train sets, objectives, bad bins or groups.

    Raises :class:`aoe.config.errors.ConfigError` naming the key. A known model that no run
    trains is not an error here: :func:`aoe.results.figures.unavailable_figures` reports it, and the
    figure is left out of the targets.
    """
    fig = config.get("figures", {})
    from aoe.results.figures import FIGURES, figure_cells

    if not set(FIGURES) & set(built_figures(config)):
        return  # no embedding figure is built (build.figures)
    from aoe.config.recipes import OBJECTIVES  # torch-free: this runs when the DAG is built

    objectives = set(config["objectives"]) | set(OBJECTIVES) | {PRETRAINED}
    for name, pairs in figure_cells(config).items():
        for key, cell in pairs:
            if cell.backbone not in config["backbones"]:
                raise ConfigError(f"{key}: {unknown_backbone(cell.backbone, config)}")
            if cell.objective not in objectives:
                raise ConfigError(f"{key}: unknown objective {cell.objective!r}; known: {sorted(objectives)}")
            if cell.trained and cell.trainset not in config["trainsets"]:
                raise ConfigError(f"{key}: unknown train set {cell.trainset!r}; known: {sorted(config['trainsets'])}")
    groups = fig["similarity_density"]["gold_groups"]
    if any(b <= a for a, b in zip(groups, groups[1:])):
        raise ConfigError(f"figures.similarity_density.gold_groups: edges must increase, got {groups}")
    lo, hi = fig["gradients"]["bin_range"]
    if not hi > lo:
        raise ConfigError(f"figures.gradients.bin_range: must be increasing, got {[lo, hi]}")
