"""The config against its JSON schema, before Snakemake fills in defaults: one line per problem.

Snakemake's ``validate`` prints a failing config with the whole schema and config after the
message (thousands of lines for an unknown key). :func:`check_schema` runs the same schema
first and, on failure, raises :class:`aoe.config.workflow.ConfigError` with one line: the key's
path, what is wrong, the config file that set it and, for an unknown key, the valid ones.

It also validates the free-form override dictionaries against the schema of the keys they
override, which a plain schema cannot do without copying those definitions (and their
defaults, which Snakemake would then fill in and so override everything):

- ``backbones.<b>.train_overrides`` and ``backbones.<b>.objective_train.<t>.<o>``: keys and values of ``trainsets.<t>.train``;
- ``trainsets.<t>.objective_settings.<objective>`` (``.all``: every objective) and
  ``backbones.<b>.objective_settings.<trainset>.<objective>``: keys and values of ``objectives.<o>``;
- ``objectives.<o>.by_format.<format>``: keys and values of ``objectives.<o>.weights``;
- ``llm_supervised.generators.<table>.generation``: keys and values of ``llm_supervised.generation``.

It also holds every cross-key check the schema cannot express (:func:`check_config`), one
function per concern, each raising ConfigError naming the key: the build selection, objectives, runs, backbones,
train sets, trained starts (init), batch sizes, analysis.saturation, table targets, tables, llm_supervised, evaluation.mteb and
figures. :func:`complete_config` runs the schema and all of them once, at start-up
(rules/common.smk, and :func:`load_config` for tools outside the workflow); the rules files
only compute from a config that passed. What stays in the rules is what needs the run itself:
the data mirror on disk (rules/common.smk), a requested target (Snakefile), a job's wildcards
(input functions), a figure asked for whose model no run trains (:func:`aoe.results.figures.figure_inputs`).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from aoe.config.hparams import EVERY_OBJECTIVE, NOT_SET, YAML_LOADER, lookup, objective_base, read_yaml, schema_default
from aoe.config.table_kinds import table_kind
from aoe.model.pooling_names import OFFICIAL_POOLING_NAMES, POOLER_POOLINGS, split_senteval_batch
from aoe.config.errors import ConfigError
from aoe.config.cells import PRETRAINED, RELEASED, NO_TRAINSET, _trained_reruns, _trained_seeds, run_cells
from aoe.config.pretrained import pretrained_variants, released_checkpoints
from aoe.config.cell_settings import start_cell
from aoe.config.rows import TableRow, _spec_trainsets, table_rows
from aoe.config.workflow import EVAL_POOLING_SUITES, RESERVED_TARGETS, built_tables, built_figures, table_target

__all__ = [
    "CHECKS",
    "check_backbones",
    "check_batch_sizes",
    "check_build",
    "check_config",
    "check_figures",
    "check_inits",
    "check_llm_supervised",
    "check_mteb",
    "check_objectives",
    "check_pretrained_variants",
    "check_released",
    "check_runs",
    "check_saturation",
    "check_schema",
    "check_senteval_caps",
    "check_table_targets",
    "check_tables",
    "check_eval_pooling_backend",
    "check_padded_pooling_buckets",
    "check_trainsets",
    "COMMAND_LINE",
    "published_rows",
    "read_typed",
    "unknown_backbone",
    "complete_config",
    "config_sources",
    "key_source",
    "load_config",
]


def _validator(schema: dict):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema)


def _where(path: Iterable) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


# what key_source returns for a value given on the command line (snakemake --config key=value)
COMMAND_LINE = "--config"


def config_sources(workflow) -> tuple[list[str], dict]:
    """A running workflow's config files in the order Snakemake merged them (the last wins), and its
    --config values: what the messages name (:func:`key_source`).

    Snakemake lists the --configfile files first in ``workflow.configfiles`` and the Snakefile's
    ``configfile: "config.yaml"`` after them, but merges config.yaml first, then the --configfile
    files, then --config: a bad value a preset sets over config.yaml's was reported "(in config.yaml)".
    """
    given = {Path(f).resolve() for f in workflow.overwrite_configfiles or ()}
    files = sorted(workflow.configfiles, key=lambda f: Path(f).resolve() in given)  # stable: config.yaml first
    command_line = getattr(getattr(workflow, "config_settings", None), "config", None)  # Snakemake >= 8
    return [str(f) for f in files], dict(command_line or {})


def key_source(path: tuple, configfiles: Iterable[str | Path], overrides: dict | None = None) -> str | None:
    """Where the value at ``path`` was set: :data:`COMMAND_LINE` when ``overrides`` (the --config
    values, merged over every file) set it, else the last of ``configfiles`` (in merge order,
    :func:`config_sources`) whose YAML sets it, relative to the working directory when below it;
    None if none does."""
    if overrides and lookup(overrides, path) is not NOT_SET:
        return COMMAND_LINE
    found = None
    for file in configfiles:
        try:
            node = read_yaml(file)  # parsed once while unchanged: config.yaml takes ~0.1 s, read for each message
        except (OSError, yaml.YAMLError):
            continue
        if lookup(node, path) is not NOT_SET:
            found = Path(file)
    if found is None:
        return None
    try:  # as the user typed it on the command line, relative to the workflow folder
        return str(found.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:  # elsewhere: absolute (Snakemake makes "../x.yaml" "/work/wf/../x.yaml"), without the ".."
        return os.path.normpath(found.absolute())


def _source_text(path: tuple, configfiles: list, overrides: dict | None) -> str:
    """"in <file>", "from --config" or "" (set nowhere): where the value at ``path`` was set."""
    source = key_source(path, configfiles, overrides)
    if source is None:
        return ""
    return f"from {source}" if source == COMMAND_LINE else f"in {source}"


def _set_in(path: tuple, configfiles: list, overrides: dict | None) -> str:
    """" (in <file>)", " (from --config)" or "": the same, as a message's parenthesis."""
    source = _source_text(path, configfiles, overrides)
    return f" ({source})" if source else ""


def unknown_backbone(name: str, config: dict) -> str:
    """"unknown backbone 'x'; did you mean ...? known: ...", and where a new one is defined."""
    known = sorted(config["backbones"])
    close = difflib.get_close_matches(str(name), known, n=2, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (f"unknown backbone {name!r}; {hint}known: {', '.join(known)} (a new one is a backbones: entry with one "
            "source, hf_id, package, gguf_package or path: docs/configuration.md, \"Adding a backbone\")")


def _retired(key: tuple) -> str:
    """What replaced a key the schema once had ("" for any other key): the ``enabled`` switches of a
    table, the figures and the GIS analysis gave way to the build lists, a train set's
    ``objective_overrides`` to its ``objective_settings.all`` (issue 40)."""
    if len(key) == 3 and key[0] == "trainsets" and key[2] == "objective_overrides":
        return f"; objective_overrides gave way to trainsets.{key[1]}.objective_settings.{EVERY_OBJECTIVE}: move its keys there"
    if key[-1:] != ("enabled",):
        return ""
    parent = key[:-1]
    if len(parent) == 2 and parent[0] == "tables":
        lists = "tables"
    else:
        lists = {("figures",): "figures", ("figures", "training_curves"): "figures", ("analysis", "gis"): "analyses"}.get(parent)
    return f"; the enabled switches gave way to build.{lists}: list what is built there" if lists else ""


def _message(error, configfiles: list, overrides: dict | None = None) -> str:
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        key = (*path, extra[0]) if extra else path
        where = _set_in(key, configfiles, overrides)
        valid = f"; valid keys: {', '.join(allowed)}" if allowed else ""
        if len(extra) > 1:
            return f"{_where(path)}: unknown keys {', '.join(extra)}{where}{valid}"
        # a misspelt key: the closest valid ones first, as for a misspelt target (aoe.plan.targets)
        close = difflib.get_close_matches(str(key[-1]), allowed, n=3, cutoff=0.75) if extra and not _retired(key) else []
        if close:
            valid = f"; did you mean {' or '.join(close)}? valid keys: {', '.join(allowed)}"
        return f"{_where(key)}: unknown key{where}{valid}{_retired(key)}"
    return f"{_where(path)}: {error.message}{_set_in(path, configfiles, overrides)}"


# YAML 1.1 (PyYAML, Snakemake's reader) reads 5e-5 as text, since its floats need a dot (5.0e-5), and Snakemake
# reads every value inside a --config structure as text ('trainsets={"stsb":{"train":{"learning_rate":0.0001}}}'
# gives '0.0001'): where the schema takes a number, integer, boolean or null and not text, such text is read as one
_INTEGER = re.compile(r"[-+]?[0-9][0-9_]*")


def _typed(text: str, types) -> Any:
    """``text`` as the first of the schema's ``types`` that reads it, or NOT_SET."""
    types = [types] if isinstance(types, str) else list(types)
    word = text.strip()
    if "null" in types and word in ("null", "Null", "NULL", "~"):
        return None
    if "boolean" in types and word.lower() in ("true", "false"):
        return word.lower() == "true"
    if ("integer" in types or "number" in types) and _INTEGER.fullmatch(word):
        return int(word)
    if "integer" in types or "number" in types:
        try:
            number = float(word)
        except ValueError:
            return NOT_SET
        if math.isfinite(number) and ("number" in types or number.is_integer()):
            return number if "number" in types else int(number)
    return NOT_SET


def _leaf_errors(errors):
    for error in errors:
        yield error
        yield from _leaf_errors(error.context or ())


def read_typed(validator, instance) -> list:
    """Read, in place, each text value of ``instance`` that the schema of ``validator`` takes as a number, integer,
    boolean or null (and not as text) as that. The one place for config files and --config. Returns the errors
    that remain (one validation pass where nothing is read)."""
    for _ in range(1000):  # each pass reads at least one value, or ends
        errors, fixes = list(validator.iter_errors(instance)), {}
        for error in _leaf_errors(errors):
            path = tuple(error.absolute_path)
            if error.validator == "type" and isinstance(error.instance, str) and path and path not in fixes:
                value = _typed(error.instance, error.validator_value)
                if value is not NOT_SET:
                    fixes[path] = value
        if not fixes:
            return errors
        for path, value in fixes.items():
            lookup(instance, path[:-1])[path[-1]] = value
    return errors


def _first_error(validator, instance):
    """The error to report of ``instance``, after its text values the schema takes as numbers are read as numbers."""
    from jsonschema.exceptions import best_match

    return best_match(read_typed(validator, instance))


def _overrides(config: dict) -> Iterable[tuple[tuple, dict, str]]:
    """(path, value, which $defs/properties schema it takes) of every override dictionary."""
    for name, spec in (config.get("backbones") or {}).items():
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("train_overrides"), dict):
            yield ("backbones", name, "train_overrides"), spec["train_overrides"], "train"
        for ts, per_objective in (spec.get("objective_settings") or {}).items():
            for obj, value in (per_objective or {}).items():
                yield ("backbones", name, "objective_settings", ts, obj), value, "objective"
        for ts, per_objective in (spec.get("objective_train") or {}).items():
            for obj, value in (per_objective or {}).items():
                yield ("backbones", name, "objective_train", ts, obj), value, "train"
    for name, spec in (config.get("trainsets") or {}).items():
        if not isinstance(spec, dict):
            continue
        for obj, value in (spec.get("objective_settings") or {}).items():
            yield ("trainsets", name, "objective_settings", obj), value, "objective"
    for name, spec in (config.get("objectives") or {}).items():
        if isinstance(spec, dict):
            for fmt, value in (spec.get("by_format") or {}).items():
                yield ("objectives", name, "by_format", fmt), value, "weights"
    for name, spec in ((config.get("llm_supervised") or {}).get("generators") or {}).items():
        if isinstance(spec, dict) and isinstance(spec.get("generation"), dict):
            yield ("llm_supervised", "generators", name, "generation"), spec["generation"], "generation"


def check_schema(
    config: dict, schema_path: str | Path, configfiles: Iterable[str | Path] = (), overrides: dict | None = None
) -> None:
    """Raise ConfigError with one line if ``config`` breaks the schema, overrides included; the line
    names the file that set the bad key (``configfiles`` in merge order, :func:`key_source`) or
    --config (``overrides``: the command line's values). Text the schema takes as a number (YAML 1.1's 5e-5,
    --config's nested values) is first read as one, in place (:func:`read_typed`)."""
    schema = read_yaml(schema_path)
    configfiles = list(configfiles)
    error = _first_error(_validator(schema), config)
    if error is not None:
        raise ConfigError(_message(error, configfiles, overrides))
    objective = schema["properties"]["objectives"]["additionalProperties"]
    sub = {
        "train": schema["$defs"]["train"],
        "objective": objective,
        "weights": objective["properties"]["weights"],
        "generation": schema["properties"]["llm_supervised"]["properties"]["generation"],
    }
    for path, value, kind in _overrides(config):
        error = _first_error(_validator({"$defs": schema["$defs"], **sub[kind]}), value)
        if error is not None:
            error.path.extendleft(reversed(path))  # absolute_path reads relative_path + parents
            raise ConfigError(_message(error, configfiles, overrides) + f" ({_where(path)} takes the keys of {_OVERRIDDEN[kind]})")


_OVERRIDDEN = {
    "train": "trainsets.<name>.train",
    "objective": "objectives.<name>",
    "weights": "objectives.<name>.weights",
    "generation": "llm_supervised.generation",
}


# -- cross-key checks: what the schema cannot express, on a config that passed it -------------


def check_build(config: dict, configfiles: Iterable[str | Path] = (), overrides: dict | None = None) -> None:
    """``build.tables`` names tables that ``tables`` defines (the figures and analyses it may name are the
    schema's enums). The message names the file that set the list (a preset replaces config.yaml's whole)."""
    chosen = (config.get("build") or {}).get("tables")
    unknown = [t for t in chosen or () if t not in config["tables"]]
    if unknown:
        where = _set_in(("build", "tables"), list(configfiles), overrides)
        names = ", ".join(repr(t) for t in unknown)
        raise ConfigError(
            f"build.tables: {'no table' if len(unknown) == 1 else 'no tables'} {names} in tables{where}; "
            f"defined: {', '.join(config['tables'])} (define it under tables, or drop it from build.tables)"
        )


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
            return _where(path), f"unset: the default of {set_by.removeprefix('code:')}"
        return set_by, _source_text(path, configfiles, overrides)

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
            gpus_source = _source_text(gpus, configfiles, overrides) or "unset: the schema's default"
            raise ConfigError(
                f"{key}: {batch}{source} must split into gradient_accumulation_steps ({accum}: {accum_key}"
                f"{', ' + accum_source if accum_source else ''}) micro-batches each divisible by the number of "
                f"processes ({processes}: {_where(gpus)}, {gpus_source}) of cell {cell.path}; "
                f"set it to a multiple of {accum * processes}"
            )


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


def check_table_targets(config: dict) -> None:
    """Each built table's target rule (aoe.config.workflow.table_target) is its own and no workflow rule's."""
    targets: dict[str, str] = {}
    for name in built_tables(config):
        target = table_target(name)
        if target in targets:
            raise ConfigError(f"tables.{name}: its target {target!r} is also the target of tables.{targets[target]}; "
                              "build one of them (build.tables) or rename one")
        if target in RESERVED_TARGETS:
            raise ConfigError(f"tables.{name}: its target {target!r} is the name of a workflow rule; rename the table")
        targets[target] = name


def check_tables(config: dict) -> None:
    """Each built table (but gis_stats): known train sets (with an eval_split for an in-domain
    table) and at least one row, each row a model the runs train (:func:`_check_table_row`)."""
    trainsets = config["trainsets"]
    for name, table in built_tables(config).items():
        kind = table_kind(table["kind"])
        if kind.inputs == "gis_stats":
            continue
        if table.get("rows") and (table.get("backbones") or table.get("objectives")):
            # Snakemake merges a preset's table over config.yaml's key by key: its backbones and
            # objectives would silently lose to the rows config.yaml gives
            raise ConfigError(f"tables.{name}: has both rows and backbones/objectives (after merging the config files); "
                              "give one: a preset changing a table that config.yaml gives as rows must give rows")
        for ts in _spec_trainsets(table):
            if ts not in trainsets:
                raise ConfigError(f"tables.{name}: unknown train set {ts!r}; known: {sorted(trainsets)}")
            if kind.column_per_trainset and not trainsets[ts].get("eval_split"):
                raise ConfigError(f"tables.{name}: train set {ts!r} has no eval_split for an in-domain column")
        rows = table_rows(config, name)
        if not rows:
            raise ConfigError(f"tables.{name}: no rows (give backbones and objectives, or rows)")
        for i, row in enumerate(rows):
            where = f"tables.{name}" + (f".rows[{i}]" if table.get("rows") else "")
            if row.eval_pooling:
                _check_eval_pooling(config, where, table["kind"], row)
            if row.eval_gold:
                _check_eval_gold(where, table["kind"], row)
            _check_table_row(config, where, row)
        if table.get("study"):
            _check_study(name, table["study"], rows)
        _check_comparison(name, table, kind, rows)
        _check_like_for_like(config, name, table)


def _check_like_for_like(config: dict, name: str, table: dict) -> None:
    """Before anything trains: each row set against a paper or reproduction number is measured as that number was
    (paper_numbers.yaml ``measured``), and a study's rows differ only as the table's ``compare_across`` names, the
    checks the table itself makes when built (:mod:`aoe.results.likeness`), so a configuration that would refuse one
    fails now, naming the key."""
    from aoe.config.measures import measured_rows
    from aoe.results.likeness import Measure, UnlikeNumbers, like_for_like
    from aoe.results.tables import paper_side, row_paper_refs

    rows = measured_rows(config, name)
    allowed = table.get("compare_across") or {}
    try:
        for key in ("paper", "reproduction"):
            for i, (row, ref) in enumerate(zip(rows, row_paper_refs(table, rows, key))):
                if ref:
                    ours = Measure.of(row["measure"])
                    like_for_like(ours, paper_side(ours, ref), allowed,
                                  f"tables.{name}.rows[{i}] ({key}: {ref})")
        if table.get("study") or table.get("comparison"):
            what = "study" if table.get("study") else "comparison"
            for i, row in enumerate(rows[1:], 1):
                like_for_like(Measure.of(rows[0]["measure"]), Measure.of(row["measure"]), allowed, f"tables.{name}.rows[{i}] ({what})")
    except UnlikeNumbers as err:
        raise ConfigError(str(err)) from None


def _check_comparison(name: str, table: dict, kind, rows: list[TableRow]) -> None:
    """An objective comparison (kind ``objective_comparison``) has its ``comparison``, and no other kind one; each
    objective it names is that of one trained row of the table."""
    comparison = table.get("comparison")
    if kind.compares_rows and not comparison:
        raise ConfigError(f"tables.{name}: kind {table['kind']} judges its rows by a comparison: give tables.{name}.comparison "
                          "(claim, source, higher, lower; separates optional), e.g. presets/objectives-vs-cosent.yaml")
    if comparison and not kind.compares_rows:
        raise ConfigError(f"tables.{name}.comparison: only a table of kind objective_comparison judges one (this one is {table['kind']})")
    if not comparison:
        return
    objectives = [r.objective for r in rows]
    for key in ("higher", "lower", "separates"):
        objective = comparison.get(key)
        if objective is not None and (objectives.count(objective) != 1 or objective in (PRETRAINED, RELEASED)):
            raise ConfigError(f"tables.{name}.comparison.{key}: {objective!r} must be the objective of one trained row of the "
                              f"table (its rows' objectives: {', '.join(objectives)})")


def _check_study(name: str, study: dict, rows: list[TableRow]) -> None:
    """A study table's claim names rows it has: test best the label of the row the paper chose (one row's:
    a preset replacing the rows must keep it), test increasing at least two rows in the order of the setting."""
    from aoe.results.tables import row_label

    labels = [row_label(r.as_dict()) for r in rows]
    if study["test"] == "best":
        if labels.count(study.get("best")) != 1:
            raise ConfigError(f"tables.{name}.study.best: {study.get('best')!r} must be the label of one row of the table "
                              f"(its rows: {', '.join(map(repr, labels))})")
    elif len(rows) < 2:
        raise ConfigError(f"tables.{name}.study: test increasing needs two rows or more")


def _check_eval_pooling(config: dict, where: str, kind_name: str, row: TableRow) -> None:
    """A row's evaluation-only pooling (rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling: the
    STS and transfer evaluations only): on an STS or transfer table's row of a model with weights of its own,
    a trained cell or a released checkpoint, not the backbone as downloaded (its other poolings:
    evaluation.pretrained_variants); under evaluation.backend senteval, not a batch-dependent one on STS."""
    suite = table_kind(kind_name).suite
    if suite not in EVAL_POOLING_SUITES:
        raise ConfigError(f"{where}.eval_pooling: an evaluation-only pooling is a variant of an STS or transfer evaluation "
                          f"(rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling); table kind {kind_name!r} has "
                          "none: drop the key or move the row to a table of kind sts7, stsb, ablation or transfer")
    if row.objective == PRETRAINED:
        raise ConfigError(f"{where}.eval_pooling: a backbone as downloaded has no evaluation-only pooling; give it "
                          "another pooling as a pretrained variant (evaluation.pretrained_variants, the row's variant)")
    if row.objective == RELEASED:
        known = released_checkpoints(config)
        for ts in row.trainsets:
            # a checkpoint's own pooling is what the row without eval_pooling scores (its sts.json / transfer.json)
            if ts in known and known[ts].get("pooling") == row.eval_pooling:
                raise ConfigError(f"{where}.eval_pooling: {row.eval_pooling!r} is checkpoint {ts!r}'s own pooling "
                                  f"(released.checkpoints.{ts}.pooling), which the row without eval_pooling scores; "
                                  "drop the key or name another pooling")
    try:
        scored, _ = split_senteval_batch(row.eval_pooling)
    except ValueError as err:
        raise ConfigError(f"{where}.{err}") from None
    if suite == "sts" and scored in OFFICIAL_POOLING_NAMES and config["evaluation"]["backend"] == "senteval":
        raise ConfigError(f"{where}.eval_pooling: {row.eval_pooling!r} depends on the batch, and evaluation.backend senteval "
                          "(SimCSE's SentEval) batches STS12-16 in another order than the official copy "
                          "(aoe.evaluate.senteval_batches); set evaluation.backend builtin or drop the key")


def _check_eval_gold(where: str, kind_name: str, row: TableRow) -> None:
    """A row's eval_gold reads the other gold of its cells' in-domain files (their by_gold): an in-domain table's row.
    The backbone as downloaded has both too (its headline is the float gold): its int-gold row is what an int-gold row's
    gain is set against (issue 69)."""
    if not table_kind(kind_name).read_gold:
        raise ConfigError(f"{where}.eval_gold: a gold variant reads the by_gold of in-domain evaluations (rule evaluate_indomain); "
                          f"table kind {kind_name!r} has none: drop the key or move the row to a table of kind indomain")


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
        # a cell trained with a padded pooling is scored with it (aoe.config.workflow.cell_eval_pooling)
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


def _check_table_row(config: dict, where: str, row: TableRow) -> None:
    """A known backbone; unless pretrained, train sets on which runs train it with every seed asked."""
    if row.backbone not in config["backbones"]:
        raise ConfigError(f"{where}: {unknown_backbone(row.backbone, config)}")
    if row.objective == PRETRAINED:
        variants = pretrained_variants(config)
        if row.variant != NO_TRAINSET and row.variant not in variants:
            raise ConfigError(f"{where}.variant: {row.variant!r} is not an evaluation.pretrained_variants entry "
                              f"(known: {sorted(variants)}); add it there or drop the key for the backbone's own embedding")
        return
    if row.variant != NO_TRAINSET:
        raise ConfigError(f"{where}.variant: only a pretrained row takes a variant; a trained model embeds as it "
                          "was trained (give the objective a pooling instead: objectives.<name>.base/pooling)")
    if row.objective == RELEASED:
        known = released_checkpoints(config)
        for ts in row.trainsets:
            if ts not in known:
                raise ConfigError(f"{where}: {ts!r} is not a checkpoint of released.checkpoints (known: {sorted(known)}); "
                                  "a released row's trainset names the checkpoint")
            if known[ts]["backbone"] != row.backbone:
                raise ConfigError(f"{where}: checkpoint {ts!r} is evaluated as backbone {known[ts]['backbone']!r} "
                                  f"(released.checkpoints.{ts}.backbone), not {row.backbone!r}")
        return
    if not row.trainsets:
        raise ConfigError(f"{where}: no train set (give trainset or trainsets)")
    for ts in row.trainsets:
        have = set(_trained_seeds(config, row.backbone, row.objective, ts))
        if not have:
            raise ConfigError(
                f"{where}: no run trains backbone {row.backbone!r} with objective {row.objective!r} on {ts!r}; "
                "add it to runs or remove it from the table"
            )
        if not row.seeds:
            raise ConfigError(f"{where}: every run of {row.objective!r} on {ts!r} is named_rows_only, so a row that names no "
                              "seeds takes none: give the row seeds (and reruns), or drop named_rows_only from one of those runs")
        if set(row.seeds) - have:
            raise ConfigError(f"{where}: seeds {sorted(set(row.seeds) - have)} of {row.objective!r} on {ts!r} are not trained by any run")
        for seed in row.seeds:
            made = _trained_reruns(config, row.backbone, row.objective, ts, seed)
            if made < row.reruns:
                raise ConfigError(
                    f"{where}: reruns {row.reruns} of {row.objective!r} on {ts!r} seed {seed}, but the runs train it "
                    f"{made} time(s); give that run reruns: {row.reruns}"
                )


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

    Raises :class:`aoe.config.workflow.ConfigError` naming the key. A known model that no run
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


# in the order they run: a config with several problems names the first
CHECKS = (
    check_build,
    check_objectives,
    check_runs,
    check_backbones,
    check_llm_supervised,
    check_trainsets,
    check_inits,
    check_batch_sizes,
    check_senteval_caps,
    check_saturation,
    check_table_targets,
    check_released,
    check_pooler_poolings,
    check_pretrained_variants,
    check_tables,
    check_eval_pooling_backend,
    check_padded_pooling_buckets,
    check_mteb,
    check_figures,
)


# the checks whose messages name the file that set a key: called with the config files and --config values
_NAMING_FILES = (check_build, check_batch_sizes)


def check_config(config: dict, configfiles: Iterable[str | Path] = (), overrides: dict | None = None) -> None:
    """Every cross-key check of :data:`CHECKS`, on a config the schema passed with its defaults
    filled in; raises ConfigError naming the first bad key (and, for :data:`_NAMING_FILES`, the file
    that set it: ``configfiles`` in merge order, ``overrides`` the --config values)."""
    configfiles = list(configfiles)
    for check in CHECKS:
        if check in _NAMING_FILES:
            check(config, configfiles, overrides)
        else:
            check(config)


def complete_config(
    config: dict, schema_path: str | Path, configfiles: Iterable[str | Path] = (), overrides: dict | None = None
) -> None:
    """Check ``config`` as the workflow does at start-up and fill in the schema's defaults, in place:
    the schema first, as one line (Snakemake's ``validate`` would print the whole schema), then
    Snakemake's ``validate`` for the defaults, then the cross-key checks (:func:`check_config`).
    ``configfiles``: the files merged into ``config``, in merge order, and ``overrides`` the --config
    values (a workflow's: :func:`config_sources`); the messages name them.
    Raises ConfigError."""
    from snakemake.utils import validate

    configfiles = list(configfiles)
    check_schema(config, schema_path, configfiles, overrides)
    validate(config, str(schema_path))
    check_config(config, configfiles, overrides)


def load_config(repo: str | Path, configfiles: Iterable[str | Path] = ()) -> dict:
    """The config a ``snakemake --configfile <configfiles>`` run of the workflow at ``repo`` sees:
    ``config.yaml`` with each file merged over it as Snakemake merges them, checked, the schema's
    defaults filled in. For tools outside the workflow (bench/), so they read what a run would."""
    from snakemake.utils import update_config

    repo = Path(repo)
    files = [repo / "config.yaml", *map(Path, configfiles)]
    config: dict = {}
    for path in files:
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        # parsed afresh, not read_yaml's shared copy: update_config merges the file's own dicts into config
        update_config(config, yaml.load(path.read_text(), Loader=YAML_LOADER) or {})
    complete_config(config, repo / "schemas" / "config.schema.yaml", files)
    return config
