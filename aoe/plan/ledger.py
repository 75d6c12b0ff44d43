"""The recipe ledger (``snakemake recipe``): every value every trained cell uses, where it came from,
and whether it departs from what the official code trained.

results/recipe.json has one entry per trained cell of the active config; results/RECIPE.md a
summary row per cell and one section per (backbone, objective, train set) with each value, the
config key (and file) that set it, its source and the official value, ⚠ where they differ. The
official values are aoe/resources/official_recipes.yaml (read from the official repository's
history, each with its commit and line). Reads the config files only; torch-free.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from aoe.config.hparams import NOT_SET, code_source, frozen_while, key_comments, lookup, read_yaml, recipe_anchor, resolve_cell
from aoe.config.cells import run_cells
from aoe.config.cell_settings import in_batch_pool_size, start_cell, train_params

__all__ = ["DEVIATES", "OFFICIAL_LOSS_BASES", "build_recipe", "cell_ledger", "changes_markdown", "official_recipes", "recipe_changes",
           "recipe_json", "recipe_markdown"]

OFFICIAL_RECIPES = Path(__file__).resolve().parents[1] / "resources" / "official_recipes.yaml"
DEVIATES = "⚠"
# Objectives whose loss the official AnglE loss (w1 cosine + w2 in-batch + w3 angle) trains;
# ablations and baselines have no official loss to compare with.
OFFICIAL_LOSS_BASES = frozenset({"aoe", "angle_arxiv"})
# the value a row shows when a key was left at a code default
NO_FILE = "code"
# Keys whose official counterpart means something else: shown, never flagged. Ours counts the
# micro-batches of one step across all processes, the official trainer's is per GPU (batch_size
# and in_batch_pool compare the two recipes).
NOT_COMPARED = frozenset({"gradient_accumulation_steps"})


@lru_cache(maxsize=1)
def official_recipes() -> dict:
    return read_yaml(OFFICIAL_RECIPES)


def _official_recipe(trainset: str, objective: str, finetune: str) -> tuple[str | None, dict]:
    """The first recipe whose ``match`` fits: each of its keys a value or a list of values; an absent key fits all."""
    cell = {"trainset": trainset, "objective": objective, "finetune": finetune}
    for name, recipe in official_recipes()["recipes"].items():
        match = recipe.get("match", {})
        if all(cell[k] in (v if isinstance(v, list) else [v]) for k, v in match.items()):
            return name, recipe
    return None, {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(sorted(map(str, a)), sorted(map(str, b))))
    return a == b


def _hub_name(model: Any) -> Any:
    """A hub id without its namespace: google-bert/bert-base-uncased and bert-base-uncased, or the
    NousResearch and meta-llama copies of Llama-2-7b-hf, are the same weights under two owners."""
    return model.rsplit("/", 1)[-1] if isinstance(model, str) else model


@dataclass
class ConfigFiles:
    """Which config file set a dotted key: the last of the run's files that has it."""

    paths: list[Path]

    def __post_init__(self) -> None:
        self.data = [read_yaml(p) or {} for p in self.paths]
        self.comments = [key_comments(p) for p in self.paths]

    def find(self, dotted: str) -> tuple[str, str]:
        """(the file that set the key, its source): the last file with the key; a file that only
        restates an earlier file's value without a comment takes that file's comment."""
        keys = tuple(dotted.split("."))
        found = []
        for path, data, comments in zip(self.paths, self.data, self.comments):
            if (value := lookup(data, keys)) is not NOT_SET:
                found.append((str(path), value, comments.get(keys, "")))
        if not found:
            return SCHEMA_FILE, f"schema default: {_schema_description(keys)}"
        path, value, comment = found[-1]
        for _, earlier, earlier_comment in reversed(found[:-1]):
            if comment or earlier != value:
                break
            comment = earlier_comment
        return path, comment


SCHEMA_FILE = "schemas/config.schema.yaml"


@lru_cache(maxsize=1)
def _schema() -> dict:
    return read_yaml(Path(__file__).resolve().parents[2] / SCHEMA_FILE)


def _schema_description(keys: tuple[str, ...]) -> str:
    """The schema's description of a config key (values the schema fills in come from there)."""
    schema = _schema()
    node = schema
    for k in keys:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        props = node.get("properties", {})
        if k in props:
            node = props[k]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return ""
    return node.get("description", "")


def _flat(key: str, value: Any) -> list[tuple[str, Any]]:
    """Ledger keys of one setting: loss.weights -> weights.<component>, lora -> lora.<field>."""
    name = key.removeprefix("loss.")
    if isinstance(value, dict) and name in ("weights", "lora"):
        return [(f"{name}.{k}", v) for k, v in value.items()]
    return [(name, value)]


def cell_ledger(config: dict, cell, files: ConfigFiles) -> tuple[str | None, list[dict]]:
    """The official recipe compared (its name, or None) and one row per value of ``cell``: key, value,
    set_by, file, source, official, official_source, deviates."""
    recipe = resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
    settings = {s.key: s for s in recipe.settings}
    base = settings["objective"].value
    off_name, off = _official_recipe(cell.trainset, cell.objective, settings["finetune"].value)
    official = {**official_recipes().get("defaults", {}), **off.get("values", {})} if off_name else {}
    compare_loss = base in OFFICIAL_LOSS_BASES
    rows = []

    def add(key: str, value: Any, set_by: str, loss: bool = False) -> None:
        if set_by.startswith("code:"):
            file, src = NO_FILE, code_source(set_by)
        elif set_by == "cell":
            file, src = "", "the cell: runs[].objectives / seeds"
        elif set_by.startswith("derived:"):
            file, src = "", set_by.removeprefix("derived:").strip()
        else:
            file, src = files.find(set_by)
        off_entry = official.get(key)
        if off_entry is None or (loss and not compare_loss):
            off_value, off_src, dev = None, "", ""
        else:
            off_value, off_src = off_entry["value"], off_entry.get("source", "")
            same = _same(_hub_name(value), _hub_name(off_value)) if key == "init" else _same(value, off_value)
            dev = "" if key in NOT_COMPARED or same else DEVIATES
        rows.append({
            "key": key, "value": value, "set_by": set_by, "file": file, "source": src,
            "official": off_value, "official_source": off_src, "deviates": dev,
        })

    for key, s in settings.items():
        if key == "lora" and settings["finetune"].value == "full":
            continue  # no adapters: LoRA settings do not touch full fine-tuning
        if key in ("init", "in_batch_pool"):
            continue  # one row each below: the weights the cell starts from, the pool's size
        for k, v in _flat(key, s.value):
            add(k, v, s.set_by, loss=key.startswith("loss."))
    # AnglE's three loss terms, shown at 0 where our objective has none of them
    if compare_loss:
        for comp in ("cosine", "contrastive", "angle"):
            if not any(r["key"] == f"weights.{comp}" for r in rows):
                add(f"weights.{comp}", 0.0, settings["loss.weights"].set_by, loss=True)
    # the pool of in-batch negatives and ranking pairs: a micro-batch, or one process's slice of it
    mode = settings["in_batch_pool"]
    pool, gpus = in_batch_pool_size(
        config, cell.backbone, {k: settings[k].value for k in ("batch_size", "gradient_accumulation_steps", "in_batch_pool")}
    )
    if mode.value == "process":
        pool_by = f"derived: batch_size / gradient_accumulation_steps / {gpus} GPU(s), each process's own slice (in_batch_pool process, set by {mode.set_by}; aoe/training/train.py)"
    elif mode.value == "global_detached":
        pool_by = (f"derived: batch_size / gradient_accumulation_steps, all-gathered over processes, the others' embeddings without gradient "
                   f"(in_batch_pool global_detached, set by {mode.set_by}; aoe/training/train.py)")
    else:
        pool_by = f"derived: batch_size / gradient_accumulation_steps, all-gathered over processes (in_batch_pool global, set by {mode.set_by}; aoe/training/train.py)"
    add("in_batch_pool", pool, pool_by)
    # the starting weights: a trained cell's model (a two-stage run), else the backbone's
    start = start_cell(cell, settings["init"].value)
    bb = config["backbones"][cell.backbone]
    init_key = next((k for k in ("hf_id", "package", "gguf_package") if bb.get(k)), None)
    if start:
        add("init", f"results/models/{start.path}", settings["init"].set_by)
    elif init_key:
        # a start set to the backbone on purpose (init: null over a two-stage default) cites that key, whose comment says why
        by = settings["init"].set_by
        add("init", bb[init_key], f"backbones.{cell.backbone}.{init_key}" if by.startswith("code:") else by)
    return off_name, rows


def build_recipe(config: dict, configfiles: list[str | Path]) -> dict:
    """{versions, cells: [{cell, anchor, official_recipe, rows}]} for every trained cell of ``config``."""
    files = ConfigFiles([Path(p) for p in configfiles])
    cells = []
    with frozen_while(config):  # each cell's ledger resolves it and the cells it starts from
        for cell in run_cells(config):
            if not cell.trained:
                continue
            off_name, rows = cell_ledger(config, cell, files)
            cells.append({
                "cell": cell.path,
                "backbone": cell.backbone, "objective": cell.objective, "trainset": cell.trainset, "seed": cell.seed,
                "run": cell.run,
                "anchor": recipe_anchor(cell.backbone, cell.objective, cell.trainset),
                "official_recipe": off_name,
                "length": training_length(config, cell, train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed)),
                "rows": rows,
            })
    return {"configfiles": [str(p) for p in configfiles], "official_versions": official_recipes().get("versions", {}), "cells": cells}


def recipe_json(recipe: dict) -> str:
    return json.dumps(recipe, indent=1, default=str) + "\n"


def format_value(x: Any) -> str:
    """A recipe value as RECIPE.md and the model cards print it."""
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:g}"
    if isinstance(x, (list, dict)):
        return json.dumps(x)
    return str(x)


def md_cell(text: Any) -> str:
    """``text`` safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


# the values the summary table shows per cell (the training length has a column of its own)
SUMMARY_KEYS = ("learning_rate", "batch_size", "in_batch_pool", "warmup_steps", "warmup_ratio", "max_length", "mixed_precision")


def training_length(config: dict, cell, params: dict) -> str:
    """How long a cell trains, as the loop counts it: ``epochs`` passes, or ``max_steps`` steps when set
    (it wins: aoe.training.train), with the epochs those steps make of the train set's published size."""
    from aoe.plan.cell_checks import published_rows

    if not params.get("max_steps"):
        return f"{params['epochs']} epoch{'s' * (params['epochs'] != 1)}"
    ts = config["trainsets"][cell.trainset]
    rows = published_rows(ts["dataset"], ts["split"])
    if not rows or rows < params["batch_size"]:
        return f"{params['max_steps']} steps"
    # the loop drops each epoch's last incomplete batch; published rows are an upper bound (NLI pairs drop neutral rows)
    return f"{params['max_steps']} steps (≈{params['max_steps'] / (rows // params['batch_size']):.2g} epochs of ≤{rows:,} rows)"


def _start(init_row: dict | None) -> str:
    """The summary's start column: a trained cell's objective/train set, else the backbone's weights."""
    if init_row is None:
        return "–"
    value = str(init_row["value"])
    if value.startswith("results/models/"):
        _, objective, trainset, _ = value.removeprefix("results/models/").split("/")
        return f"{objective}/{trainset} model"
    return "backbone"


def recipe_markdown(recipe: dict) -> str:
    lines = [
        "# Training recipe of every trained cell",
        "",
        "Every value each cell trains with, the config key (and file) that set it, that key's source, and the "
        f"official code's value for the same recipe where one exists ({DEVIATES}: ours differs). `code` rows are "
        "defaults written in aoe/config/hparams.py or aoe/config/recipes.py with their source. Official values: "
        "aoe/resources/official_recipes.yaml.",
        "",
        f"- Config files (later ones override earlier): {', '.join(f'`{c}`' for c in recipe['configfiles'])}",
    ]
    for name, v in (recipe.get("official_versions") or {}).items():
        lines.append(f"- Official code `{name}`: {md_cell(v.get('package', ''))}, commit `{v.get('commit', '')}` ({v.get('date', '')})")
    lines += ["", f"Cells: {len(recipe['cells'])}.", ""]
    header = ["cell", "objective", "start", "loss weights", "length", *SUMMARY_KEYS, DEVIATES]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for c in recipe["cells"]:
        by = {r["key"]: r for r in c["rows"]}
        weights = ", ".join(f"{r['key'][8:]} {format_value(r['value'])}" for r in c["rows"] if r["key"].startswith("weights.") and r["value"])
        n_dev = sum(bool(r["deviates"]) for r in c["rows"])
        lines.append(
            f"| [{md_cell(c['cell'])}](#{c['anchor']}) | {by['objective']['value']} | {_start(by.get('init'))} | {weights} | {c['length']} | "
            + " | ".join(format_value(by[k]["value"]) if k in by else "–" for k in SUMMARY_KEYS)
            + f" | {n_dev or ''} |"
        )
    seen = set()
    for c in recipe["cells"]:
        if c["anchor"] in seen:
            continue
        seen.add(c["anchor"])
        seeds = [x["run"] for x in recipe["cells"] if x["anchor"] == c["anchor"]]  # "42", "42-rerun1", ...
        lines += [
            "",
            f'<a id="{c["anchor"]}"></a>',
            f"## {c['backbone']} / {c['objective']} / {c['trainset']}",
            "",
            f"Seeds: {', '.join(seeds)}. Official recipe compared: "
            + (f"`{c['official_recipe']}`." if c["official_recipe"] else "none (the official code has no recipe for this train set and backbone)."),
            "",
            *recipe_table([r for r in c["rows"] if r["key"] != "seed"]),
        ]
    return "\n".join(lines) + "\n"


def recipe_table(rows: list[dict]) -> list[str]:
    """The Markdown table of a cell's ledger rows (:func:`cell_ledger`): RECIPE.md's and each model card's."""
    lines = ["| key | value | set by | file | source | official | |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        official = "–" if r["official"] is None else f"{md_cell(format_value(r['official']))} ({md_cell(r['official_source'])})"
        lines.append(f"| {r['key']} | {md_cell(format_value(r['value']))} | `{r['set_by']}` | {md_cell(r['file'])} | "
                     f"{md_cell(r['source']) or '**no source**'} | {official} | {r['deviates']} |")
    return lines


def _sections(recipe: dict) -> dict[str, dict]:
    """{section title: {"cells": n, "rows": {key: row}}} of a recipe.json; the values of a section's cells are one
    recipe (only the seed differs), so its first cell's rows stand for all."""
    out: dict[str, dict] = {}
    for c in recipe["cells"]:
        title = f"{c['backbone']} / {c['objective']} / {c['trainset']}"
        if title in out:
            out[title]["cells"] += 1
            continue
        out[title] = {"cells": 1, "rows": {r["key"]: r for r in c["rows"] if r["key"] != "seed"}}
    return out


def recipe_changes(before: dict, after: dict) -> list[dict]:
    """What a configuration change did to the grid's training: one entry per section (backbone / objective /
    train set) and key whose value differs between two recipe.json files, with both values and the source
    after; a section in one ledger only is one entry with key None."""
    old, new = _sections(before), _sections(after)
    out = []
    for title in sorted(old.keys() | new.keys()):
        if title not in new or title not in old:
            out.append({"section": title, "key": None, "cells": (new.get(title) or old[title])["cells"],
                        "before": "trained" if title in old else None, "after": "trained" if title in new else None, "source": ""})
            continue
        rows_old, rows_new = old[title]["rows"], new[title]["rows"]
        for key in [k for k in rows_new if k in rows_old] + [k for k in rows_new if k not in rows_old] + [k for k in rows_old if k not in rows_new]:
            a, b = rows_old.get(key), rows_new.get(key)
            if a is not None and b is not None and _same(a["value"], b["value"]):
                continue
            out.append({"section": title, "key": key, "cells": new[title]["cells"],
                        "before": None if a is None else a["value"], "after": None if b is None else b["value"],
                        "source": "" if b is None else b["source"]})
    return out


def changes_markdown(changes: list[dict], before: str, after: str) -> str:
    """:func:`recipe_changes` as a Markdown table, titled with the two ledgers' names."""
    lines = [f"Changed training values: {after} against {before} ({len({c['section'] for c in changes})} sections)", "",
             "| cells | key | before | after | source after |", "|---|---|---|---|---|"]
    for c in changes:
        if c["key"] is None:
            lines.append(f"| {c['section']} ({c['cells']}) | – | {'trained' if c['before'] else 'not trained'} | "
                         f"{'trained' if c['after'] else 'not trained'} | |")
        else:
            lines.append(f"| {c['section']} ({c['cells']}) | {c['key']} | {md_cell(format_value(c['before']))} | "
                         f"{md_cell(format_value(c['after']))} | {md_cell(c['source'])} |")
    return "\n".join(lines) + "\n"


def preset_summary(path: Path) -> str:
    """A preset's first comment sentence after its 'Overlay on the paper grid ...:' lead: what reading of the sources it is."""
    lines = [ln[1:].strip() for ln in path.read_text().splitlines() if ln.startswith("#")]
    text = " ".join(lines)
    first = text.split(": ", 1)[1].split(". ")[0].rstrip(".") + "." if ": " in text else text
    return first[:1].upper() + first[1:]


def reading_presets(root: Path, configfiles: list[str]) -> list[str]:
    """The overlay presets whose readings the ledger lists (presets/paper-*.yaml, relative to ``root``): for the paper
    grid alone (``configfiles`` config.yaml only); a preset's ledger compares nothing with them, they overlay the grid."""
    if [Path(f).name for f in configfiles] != ["config.yaml"]:
        return []
    return sorted(str(p.relative_to(root)) for p in (root / "presets").glob("paper-*.yaml"))


def readings(recipe: dict, presets: list[Path], root: Path) -> list[dict]:
    """What each overlay preset of the paper grid (``presets/paper-*.yaml``: another reading of the sources)
    changes against ``recipe`` (:func:`build_recipe` of the active config): ``[{preset, summary, changes}]`` with
    :func:`recipe_changes` of this config (before) and the config with the preset over it (after). The grid follows
    one source per value; these are the readings it did not take, so a reader sees each value's alternative and
    where it would come from."""
    from aoe.plan.check import load_config

    configfiles = recipe["configfiles"]
    extra = [Path(f) for f in configfiles if Path(f).resolve() != (root / "config.yaml").resolve()]
    out = []
    for preset in presets:
        other = build_recipe(load_config(root, [*extra, preset]), [*configfiles, preset])
        out.append({"preset": str(preset.relative_to(root)) if preset.is_relative_to(root) else str(preset),
                    "summary": preset_summary(preset), "changes": recipe_changes(recipe, other)})
    return out


def readings_markdown(found: list[dict]) -> str:
    """:func:`readings` as RECIPE.md's last section: per preset, each changed value, this grid's and the preset's."""
    lines = ["", '<a id="readings"></a>', "## Other readings of the sources", "",
             "The grid takes each value from one source, by the precedence of docs/configuration.md. Each preset below "
             "is a reading it did not take (`--configfile` it over config.yaml); the values it changes, the grid's "
             "(before) and the preset's (after), with the preset's source:", ""]
    for r in found:
        changed = [c for c in r["changes"] if c["key"] is not None]
        cells = {c["section"] for c in r["changes"]}
        lines += [f"### `{r['preset']}`", "", f"{r['summary']} {len(changed)} values in {len(cells)} cell groups.", ""]
        if r["changes"]:
            lines += changes_markdown(r["changes"], "the grid", r["preset"]).splitlines()[2:]
        lines.append("")
    return "\n".join(lines)


def main_diff(argv: list[str] | None = None, prog: str = "python -m aoe.plan.ledger") -> int:
    import argparse

    ap = argparse.ArgumentParser(prog=prog, description="The training values each cell changed between two results/recipe.json "
                                 "files (`snakemake recipe` of two configurations or two commits).")
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    ledgers = []
    for path in (args.before, args.after):
        try:
            ledgers.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as e:
            ap.error(f"{path}: not a recipe.json ({e}); `snakemake recipe` writes one into the results tree")
    print(changes_markdown(recipe_changes(*ledgers), str(args.before), str(args.after)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_diff())
