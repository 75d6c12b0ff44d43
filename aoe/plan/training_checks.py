"""What the runs train, checked by name across keys: each objective's base, each run's backbone, train set and
objectives (with a data format the train set provides), each backbone's one source and prompt, each train set's
split, formats and score range, each LLM-written table's generator.

The checks of the config's own entries, before any cell is resolved (that is :mod:`aoe.plan.cell_checks`); each
raises :class:`aoe.config.errors.ConfigError` naming the key. :func:`unknown_backbone` is the one message for a
backbone name no entry defines, wherever a key names one (runs, tables, figures, released checkpoints).
"""

from __future__ import annotations

import difflib
from pathlib import Path

from aoe.config.hparams import EVERY_OBJECTIVE, objective_base, schema_default
from aoe.config.cells import PRETRAINED
from aoe.config.errors import ConfigError

__all__ = ["check_backbones", "check_llm_supervised", "check_objectives", "check_runs", "check_trainsets", "unknown_backbone"]


def unknown_backbone(name: str, config: dict) -> str:
    """"unknown backbone 'x'; did you mean ...? known: ...", and where a new one is defined."""
    known = sorted(config["backbones"])
    close = difflib.get_close_matches(str(name), known, n=2, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (f"unknown backbone {name!r}; {hint}known: {', '.join(known)} (a new one is a backbones: entry with one "
            "source, hf_id, package, gguf_package or path: docs/configuration.md, \"Adding a backbone\")")


def check_objectives(config: dict) -> None:
    """``objectives.<o>.base`` names a configured objective or a recipe of aoe.config.recipes."""
    from aoe.config.recipes import OBJECTIVES

    objectives = config["objectives"]
    for name, spec in objectives.items():
        base = spec.get("base")
        if base is not None and base not in objectives and base not in OBJECTIVES:
            raise ConfigError(f"objectives.{name}.base: unknown objective {base!r}")
    if EVERY_OBJECTIVE in objectives:
        raise ConfigError(f"objectives.{EVERY_OBJECTIVE}: reserved name (trainsets.<t>.objective_settings.{EVERY_OBJECTIVE} "
                          "applies to every objective); give the objective another name")
    known = set(objectives) | set(OBJECTIVES)
    for ts, spec in config["trainsets"].items():
        for key in ("objective_settings", "objective_train"):
            for name in spec.get(key) or {}:
                if name not in known and not (key == "objective_settings" and name == EVERY_OBJECTIVE):
                    # a misspelt name would silently train the cell with the train set's common recipe
                    raise ConfigError(f"trainsets.{ts}.{key}.{name}: unknown objective {name!r}; known: {sorted(known)}")


def check_runs(config: dict) -> None:
    """Each entry of ``runs``: a known backbone and train set, trained objectives that exist, each
    with a data format its train set provides."""
    from aoe.config.recipes import OBJECTIVES, resolve_format

    backbones, trainsets, objectives = config["backbones"], config["trainsets"], config["objectives"]
    for i, run in enumerate(config["runs"]):
        where = f"runs[{i}]"
        if run["backbone"] not in backbones:
            raise ConfigError(f"{where}.backbone: {unknown_backbone(run['backbone'], config)}")
        if run["trainset"] not in trainsets:
            raise ConfigError(f"{where}.trainset: unknown train set {run['trainset']!r}; known: {sorted(trainsets)}")
        for obj in run["objectives"]:
            if obj == PRETRAINED:
                raise ConfigError(f"{where}.objectives: {PRETRAINED!r} is not trained; tables add it by include_pretrained")
            if obj not in objectives and obj not in OBJECTIVES:
                raise ConfigError(
                    f"{where}.objectives: unknown objective {obj!r}; known: {sorted(set(objectives) | set(OBJECTIVES))}"
                )
            base = objective_base(config, obj)
            try:
                resolve_format(base, trainsets[run["trainset"]].get("formats", ["pairs"]), objectives.get(base))
            except ValueError as err:
                raise ConfigError(f"{where}: {err} (trainsets.{run['trainset']}.formats)") from None


def check_backbones(config: dict) -> None:
    """Each backbone has exactly one source and, if any, a prompt template with ``{text}``; an
    eval_text rewrite only where a prompt wraps the text."""
    from aoe.model.prompts import check_prompt

    for name, spec in config["backbones"].items():
        # the same four sources as aoe.model.backbones.materialize_backbone (which imports torch: not while planning)
        # a source set null (a layered config file switching sources) or empty is none, as materialize_backbone reads it
        sources = [k for k in ("hf_id", "package", "gguf_package", "path") if spec.get(k)]
        if len(sources) != 1:
            raise ConfigError(
                f"backbones.{name}: give exactly one of hf_id, package, gguf_package, path (got {sources or 'none'})"
            )
        try:
            check_prompt(spec.get("prompt"))
        except ValueError as err:
            raise ConfigError(f"backbones.{name}.prompt: {err}") from None
        # the official eval.py rewrites prompted texts only: without a prompt the setting would do nothing
        if spec.get("eval_text", schema_default("backbones", "*", "eval_text")) != "raw" and spec.get("prompt") is None:
            raise ConfigError(
                f"backbones.{name}.eval_text: {spec['eval_text']} rewrites the text a prompt wraps, and this backbone has no prompt"
            )


def check_trainsets(config: dict) -> None:
    """Each train set: a split its dataset has, formats the dataset provides, an increasing score range that holds
    the pair table's scores."""
    from aoe.data.catalog import SOURCES, dataset_splits
    from aoe.data.contracts import score_scale

    all_splits = dataset_splits(config)
    for name, spec in config["trainsets"].items():
        splits = all_splits.get(spec["dataset"], ())
        if spec["split"] not in splits:
            raise ConfigError(
                f"trainsets.{name}: dataset {spec['dataset']!r} has no split {spec['split']!r}; it has {sorted(splits)}"
            )
        available = SOURCES[spec["dataset"]][spec["split"]].formats if spec["dataset"] in SOURCES else ("pairs",)
        extra = sorted(set(spec.get("formats", ["pairs"])) - set(available))
        if extra:
            raise ConfigError(f"trainsets.{name}.formats: {spec['dataset']} provides {list(available)}, not {extra}")
        lo, hi = spec["score_range"]
        if not hi > lo:
            raise ConfigError(f"trainsets.{name}.score_range: must be increasing, got {spec['score_range']}")
        # the pair table's contract bounds its scores: a range that does not hold them fails the train job
        # (aoe.data.contracts.check_score_range), known here before any job runs
        scale = score_scale(spec["dataset"], spec["split"]) if "pairs" in spec.get("formats", ["pairs"]) else None
        if scale is not None and not lo <= scale[0][0] <= scale[0][1] <= hi:
            (low, high), what = scale
            raise ConfigError(
                f"trainsets.{name}.score_range: {spec['score_range']} does not hold the scores of {spec['dataset']}/{spec['split']} "
                f"({what}: {low:g} to {high:g}); its labels are the scores rescaled by this range: set it to [{low:g}, {high:g}]"
            )


def check_llm_supervised(config: dict) -> None:
    """Each ``llm_supervised.generators`` entry names a table stsb_llm[_<name>], a backbone and an
    environment file; a train set on an LLM-written table names a configured generator's."""
    import re

    from aoe.llm_supervised import LLM_DATASET_PATTERN, generators

    gens, backbones = generators(config), config["backbones"]
    envs = Path(__file__).resolve().parents[2] / "envs"
    for name, spec in gens.items():
        where = f"llm_supervised.generators.{name}"
        if not re.fullmatch(LLM_DATASET_PATTERN, name):
            raise ConfigError(f"{where}: a generator's table is named stsb_llm or stsb_llm_<name> (lower-case letters, digits); rename it")
        if spec["backbone"] not in backbones:
            raise ConfigError(f"{where}.backbone: {unknown_backbone(spec['backbone'], config)}")
        if envs.is_dir() and not (envs / f"{spec['env']}.yaml").is_file():
            known = sorted(p.stem for p in envs.glob("*.yaml"))
            raise ConfigError(f"{where}.env: no envs/{spec['env']}.yaml; known: {known}")
    for ts_name, ts in config["trainsets"].items():
        if re.fullmatch(LLM_DATASET_PATTERN, ts["dataset"]) and ts["dataset"] not in gens:
            raise ConfigError(
                f"trainsets.{ts_name}.dataset: {ts['dataset']!r} is written by no llm_supervised.generators entry; "
                f"add llm_supervised.generators.{ts['dataset']}: {{backbone: ...}} or use one of {sorted(gens)}"
            )
