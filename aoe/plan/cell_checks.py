"""Each trained cell's resolved recipe, checked while planning: its trained start (init), its batch size against
the train set's published rows and its processes, and its pooling (a padded pooling in one pass per micro-batch,
a pooler pooling on a backbone that has one, no batch-dependent pooling under SimCSE's SentEval).

Apart from :mod:`aoe.plan.training_checks` because these read what a cell resolves to across every layer
(aoe.config.hparams.resolve_cell), not one entry; and before any job runs, because the training job would refuse
them only after Snakemake has deleted the cell's previous model. Each raises
:class:`aoe.config.errors.ConfigError` naming the key that set the value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from aoe.config.hparams import objective_base
from aoe.config.cell_settings import start_cell
from aoe.config.cells import run_cells
from aoe.config.errors import ConfigError
from aoe.model.pooling_names import OFFICIAL_POOLING_NAMES, POOLER_POOLINGS
from aoe.plan.key_sources import key_path, source_text

__all__ = [
    "check_batch_sizes",
    "check_eval_pooling_backend",
    "check_inits",
    "check_padded_pooling_buckets",
    "check_pooler_poolings",
    "published_rows",
]


def check_inits(config: dict) -> None:
    """A trained cell's ``init`` (a trained model to start from) names a known train set and objective,
    is set only where the backbone is fully fine-tuned, and its chain of starts ends (no cycle)."""
    from aoe.config.hparams import resolve_cell
    from aoe.config.recipes import OBJECTIVES

    known = set(config["objectives"]) | set(OBJECTIVES)
    for cell in run_cells(config):
        chain = [cell]
        while True:
            current = chain[-1]
            recipe = resolve_cell(config, current.backbone, current.objective, current.trainset, current.seed)
            init, where = recipe.params.get("init"), recipe.provenance()["init"]
            if not init:
                break
            if init["trainset"] not in config["trainsets"]:
                raise ConfigError(f"{where}.trainset: unknown train set {init['trainset']!r}; known: {sorted(config['trainsets'])}")
            if init.get("objective") and init["objective"] not in known:
                raise ConfigError(f"{where}.objective: unknown objective {init['objective']!r}; known: {sorted(known)}")
            if recipe.params["finetune"] != "full":
                raise ConfigError(
                    f"{where}: cell {current.path} fine-tunes with {recipe.params['finetune']!r}; a trained start needs "
                    f"full fine-tuning (set backbones.{current.backbone}.train_overrides.init: null)"
                )
            start = start_cell(current, init)
            if start in chain:
                loop = [*chain[chain.index(start):], start]
                raise ConfigError(f"{where}: the starts form a cycle: {' starts from '.join(c.path for c in loop)}")
            chain.append(start)


def published_rows(dataset: str, split: str) -> int | None:
    """Rows of the published split behind a train set, known without the data: the STS sets'
    scored pairs (aoe.data.sts.EXPECTED_ROWS) or a pair set's published rows (aoe.data.catalog.SOURCES;
    the NLI sets' labelled rows). Each prepared table of the split has at most as many (the NLI pairs
    drop the neutral rows, the triplets need an entailment and a contradiction). None where the size is
    known only once the data is there: AllNLI's download, the LLM-written tables."""
    from aoe.data.catalog import SOURCES
    from aoe.data.sts import EXPECTED_ROWS

    if (dataset, split) in EXPECTED_ROWS:
        return EXPECTED_ROWS[(dataset, split)]
    src = SOURCES.get(dataset, {}).get(split)
    return src.rows if src is not None else None


def _train_key(set_by: str, cell, key: str, base: str) -> tuple:
    """The config path of a training setting's ``set_by`` (aoe.config.hparams.TRAIN_LAYERS); a code default's:
    the train set's own key, where the fix goes. Built from the layers, not split at the dots a
    train set's name may hold."""
    from aoe.config.hparams import TRAIN_LAYERS

    for layer in TRAIN_LAYERS:
        parts = {"backbone": cell.backbone, "trainset": cell.trainset, "objective": cell.objective, "base": base}
        path = (*(p.format(**parts) for p in layer), key)
        if ".".join(path) == set_by:
            return path
    return ("trainsets", cell.trainset, "train", key)


def _trained_cells(config: dict) -> list:
    """Every cell the workflow trains: the runs' and the trained starts they need (trainsets.<t>.train.init)."""
    from aoe.config.cell_settings import init_cell

    cells, todo = set(), list(run_cells(config))
    while todo:
        cell = todo.pop()
        if cell not in cells:
            cells.add(cell)
            if (start := init_cell(config, cell)) is not None:
                todo.append(start)
    return sorted(cells)


def check_batch_sizes(config: dict, configfiles: Iterable[str | Path] = (), overrides: dict | None = None) -> None:
    """Each trained cell's resolved batch_size fits its train set and splits over its processes.

    aoe.training.train refuses both too, but only inside the training job, after Snakemake has deleted the
    cell's previous model (its output folder). Here, at planning time, with the sizes known without
    the data (:func:`published_rows`, an upper bound of the examples; an unknown size is not
    checked), and the processes the rule launches (``backbones.<b>.resources.gpus``, at least 1).
    The message names the key that set the value and its file (``configfiles`` in merge order).
    """
    from aoe.config.hparams import resolve_cell
    from aoe.config.cell_settings import in_batch_pool_size

    configfiles = list(configfiles)

    def setting(recipe, cell, key: str) -> tuple[str, str]:
        """A cell's setting as a message names it: its config key, and where its value was set."""
        set_by = recipe.provenance()[key]
        path = _train_key(set_by, cell, key, objective_base(config, cell.objective))
        if set_by.startswith("code:"):  # no key sets it: the fix goes to the train set's own key
            return key_path(path), f"unset: the default of {set_by.removeprefix('code:')}"
        return set_by, source_text(path, configfiles, overrides)

    done = set()
    for cell in _trained_cells(config):
        if (cell.backbone, cell.objective, cell.trainset) in done:
            continue  # the settings do not depend on the seed: one message, for the first cell
        done.add((cell.backbone, cell.objective, cell.trainset))
        recipe = resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
        batch, accum = recipe.params["batch_size"], recipe.params["gradient_accumulation_steps"]
        ts = config["trainsets"][cell.trainset]
        rows = published_rows(ts["dataset"], ts["split"])
        _, processes = in_batch_pool_size(config, cell.backbone, recipe.params)
        if (rows is None or batch <= rows) and not batch % (accum * processes):
            continue
        # only now: where a value was set is read from the YAML files (~0.1 s a lookup on config.yaml)
        key, source = setting(recipe, cell, "batch_size")
        source = f" ({source})" if source else ""
        if rows is not None and batch > rows:
            raise ConfigError(
                f"{key}: {batch}{source} is more than the {rows} rows of {ts['dataset']} {ts['split']} (its published "
                f"size), the most train set {cell.trainset!r} can hold: cell {cell.path} would have no batch to train on; "
                f"set it to at most {rows}"
            )
        if batch % (accum * processes):
            accum_key, accum_source = setting(recipe, cell, "gradient_accumulation_steps")
            gpus = ("backbones", cell.backbone, "resources", "gpus")
            gpus_source = source_text(gpus, configfiles, overrides) or "unset: the schema's default"
            raise ConfigError(
                f"{key}: {batch}{source} must split into gradient_accumulation_steps ({accum}: {accum_key}"
                f"{', ' + accum_source if accum_source else ''}) micro-batches each divisible by the number of "
                f"processes ({processes}: {key_path(gpus)}, {gpus_source}) of cell {cell.path}; "
                f"set it to a multiple of {accum * processes}"
            )


def _cell_group_recipes(config: dict):
    """(first cell, its resolved recipe) of each (backbone, objective, train set) the runs train: seeds and reruns
    of one group share every setting these checks read, so each group is resolved once."""
    from aoe.config.hparams import resolve_cell

    done = set()
    for cell in run_cells(config):
        if (cell.backbone, cell.objective, cell.trainset) in done:
            continue
        done.add((cell.backbone, cell.objective, cell.trainset))
        yield cell, resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)


def check_eval_pooling_backend(config: dict) -> None:
    """Under evaluation.backend senteval, no trained cell's own eval_pooling is batch-dependent: its STS
    evaluation would need the official copy's STS12-16 batches, which SimCSE's SentEval does not make
    (its transfer batches are the same: a transfer row's eval_pooling runs there)."""
    if config["evaluation"]["backend"] != "senteval":
        return
    for cell, recipe in _cell_group_recipes(config):
        # a cell trained with a padded pooling is scored with it (aoe.config.cell_settings.cell_eval_pooling)
        key = "eval_pooling" if recipe.params.get("eval_pooling") else "pooling"
        pooling = recipe.params.get(key)
        if pooling in OFFICIAL_POOLING_NAMES:
            key = recipe.provenance()[key]
            raise ConfigError(f"{key}: {pooling!r} (cell {cell.path}'s STS and transfer evaluations) depends on the batch, and "
                              "evaluation.backend senteval (SimCSE's SentEval) batches STS12-16 in another order than the "
                              "official copy (aoe.evaluate.senteval_batches); set evaluation.backend builtin or drop the key")


def check_padded_pooling_buckets(config: dict) -> None:
    """A cell that trains with an official padded pooling embeds each micro-batch in one pass
    (length_buckets 1): its pooling reads the padding of the micro-batch padded to its longest text, as
    the official collator padded it (fcb6223 angle_emb/angle.py:262,314-334 padding='longest'). Length
    buckets would pad each bucket to its own longest text and so train another arithmetic; the train
    set's speed setting is not silently overridden but refused here, naming the key to add."""
    for cell, recipe in _cell_group_recipes(config):
        pooling, buckets = recipe.params["pooling"], recipe.params["length_buckets"]
        if pooling in OFFICIAL_POOLING_NAMES and buckets != 1:
            setters = recipe.provenance()
            raise ConfigError(
                f"{setters['pooling']}: {pooling!r} pools over the micro-batch's padding, so cell {cell.path} must embed "
                f"each micro-batch in one pass padded to its longest text (the official padding='longest'), but "
                f"length_buckets is {buckets} ({setters['length_buckets']}); add length_buckets: 1 to objectives.{cell.objective}"
            )


def check_pooler_poolings(config: dict) -> None:
    """A cell that pools with the backbone's pooler (``cls_mlp``: BERT's dense + tanh over [CLS], SimCSE's MLP) trains a
    backbone that has one, all its weights: a decoder (LLaMA, Gemma: aoe.config.memory.ARCHS family llama) has no
    pooler, and a LoRA adapter would neither train nor save it. Refused while planning, not after a download."""
    from aoe.config.memory import ARCHS

    for cell, recipe in _cell_group_recipes(config):
        params = recipe.params
        pooling = params["pooling"]
        if pooling not in POOLER_POOLINGS and not params.get("reinit_pooler"):
            continue
        setters = recipe.provenance()
        if pooling not in POOLER_POOLINGS:
            raise ConfigError(f"{setters['reinit_pooler']}: reinit_pooler draws afresh the pooler that pooling "
                              f"{', '.join(POOLER_POOLINGS)} reads, but cell {cell.path} pools with {pooling!r} "
                              f"({setters['pooling']}); remove reinit_pooler or pool with {POOLER_POOLINGS[0]}")
        arch = ARCHS.get(cell.backbone)
        if arch is not None and arch.family != "bert":
            raise ConfigError(f"{setters['pooling']}: {pooling!r} returns the backbone's pooler (dense + tanh over [CLS]), and "
                              f"backbone {cell.backbone!r} is a decoder without one (cell {cell.path}); train this objective "
                              f"on a BERT backbone, or pool with cls / last")
        if params["finetune"] != "full":
            raise ConfigError(f"{setters['pooling']}: {pooling!r} trains the backbone's pooler, which finetune "
                              f"{params['finetune']!r} ({setters['finetune']}) neither trains nor saves (cell {cell.path}); "
                              "train it with finetune: full")
