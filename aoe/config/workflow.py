"""Config logic of the Snakemake workflow, kept out of the .smk files so it is unit-tested.

Import-light on purpose (no torch): the Snakefile imports it at DAG-build time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from aoe.config.hparams import schema_default
from aoe.config.table_kinds import table_kind

__all__ = [
    "ConfigError",
    "results_path",
    "Cell",
    "parse_run",
    "run_name",
    "PRETRAINED",
    "pretrained_cell",
    "pretrained_variants",
    "pretrained_embedding",
    "pretrained_pooling",
    "evaluation_text",
    "RELEASED",
    "released_checkpoints",
    "run_cells",
    "eval_cells",
    "table_cells",
    "built_tables",
    "built_figures",
    "built_analyses",
    "FIGURE_NAMES",
    "ANALYSIS_NAMES",
    "TableRow",
    "table_rows",
    "protocol_differences",
    "training_summary",
    "grid_paper_rows",
    "OBJECTIVE_LABELS",
    "row_label",
    "SCORED_SPLIT_MARK",
    "scored_split_selections",
    "row_entries",
    "table_inputs",
    "suite_results",
    "table_target",
    "indomain_cells",
    "cell_eval_gold",
    "train_params",
    "loss_settings",
    "settings_changed",
    "in_batch_pool_size",
    "init_cell",
    "start_cell",
]

PRETRAINED = "pretrained"  # objective of a backbone evaluated as downloaded
# objective of a published checkpoint evaluated as downloaded (config released.checkpoints: its key is
# the cell's train set, so results/eval/<backbone>/released/<key>/seed0 holds its evaluations)
RELEASED = "released"
# rule names a table's target must not take
RESERVED_TARGETS = frozenset({"all", "table", "tables", "figures", "analysis", "evaluate", "train", "train_all", "report", "recipe"})
NO_TRAINSET = "none"
PRETRAINED_SEED = 0


class ConfigError(ValueError):
    """A config value that is valid for the schema but inconsistent with the rest of the config."""


def results_path(config: dict, path: str) -> str:
    """``path``, written ``results/...``, in the configuration's own results tree (config ``results``:
    ``results`` for the paper grid, ``results/<preset>`` for each preset), so that configurations
    never write into each other's tree and a report never links to another one's ledger."""
    rel = path.removeprefix("results/") if path != "results" else ""
    return f"{config['results']}/{rel}" if rel else config["results"]


RERUN = "-rerun"  # seed42-rerun2: the third training of seed 42


@dataclass(frozen=True, order=True)
class Cell:
    """One model: results/models/{backbone}/{objective}/{trainset}/seed{seed}[-rerun{k}].

    ``rerun`` k > 0 trains the same cell again with the same seed (ACL Table 4's "fixed random
    seed = 42" row: the spread of repeated runs, which only nondeterministic kernels make
    nonzero); rerun 0 is the cell itself.
    """

    backbone: str
    objective: str
    trainset: str
    seed: int
    rerun: int = 0

    @property
    def run(self) -> str:
        """The last part of the path without its ``seed`` prefix: "42", or "42-rerun2"."""
        return run_name(self.seed, self.rerun)

    @property
    def path(self) -> str:
        return f"{self.backbone}/{self.objective}/{self.trainset}/seed{self.run}"

    @property
    def trained(self) -> bool:
        """Trained by this workflow (not a backbone or a published checkpoint as downloaded)."""
        return self.objective not in (PRETRAINED, RELEASED)

    @classmethod
    def from_wildcards(cls, w) -> Cell:
        """The cell of a job's wildcards (``seed`` is the run: "42" or "42-rerun2")."""
        return cls(w["backbone"], w["objective"], w["trainset"], *parse_run(w["seed"]))


def run_name(seed: int, rerun: int = 0) -> str:
    """The name of one training of a seed: "42", or "42-rerun2" (:func:`parse_run` reads it back)."""
    return f"{seed}{RERUN}{rerun}" if rerun else str(seed)


def parse_run(run: str | int) -> tuple[int, int]:
    """(seed, rerun) of a run name: "42" -> (42, 0), "42-rerun2" -> (42, 2)."""
    seed, _, rerun = str(run).partition(RERUN)
    return int(seed), int(rerun or 0)


def cell_parts(config: dict) -> dict[str, list[str]]:
    """The values each part of a cell path (results/models/<backbone>/<objective>/<trainset>/seed<N>)
    may take: the workflow's wildcard constraints and the target check (aoe.plan.targets) read them."""
    return {
        "backbone": list(config["backbones"]),
        "objective": list(dict.fromkeys([PRETRAINED, RELEASED, *config["objectives"], *(o for r in config["runs"] for o in r["objectives"])])),
        "trainset": list(dict.fromkeys([NO_TRAINSET, *config["trainsets"], *released_checkpoints(config), *pretrained_variants(config)])),
    }


def table_target(name: str) -> str:
    """The Snakemake target of a table: ``table<N>`` for ``table<N>_...``, else the whole name."""
    import re

    m = re.match(r"(table\d+)_", name)
    return m.group(1) if m else name


def built_tables(config: dict) -> dict[str, dict]:
    """The tables the default target builds: those ``build.tables`` names (null or absent: every table of
    ``tables``), in the order ``tables`` defines them. A name ``tables`` lacks is left out here;
    aoe.plan.check.check_build refuses it at planning."""
    chosen = (config.get("build") or {}).get("tables")
    return {name: spec for name, spec in config["tables"].items() if chosen is None or name in chosen}


# build.figures and build.analyses: what the schema's defaults name (everything); a hand-built config may leave them out
FIGURE_NAMES = ("fig3", "fig10", "fig4", "fig5", "fig_gradients", "training_curves")
ANALYSIS_NAMES = ("saturation", "gis")


def built_figures(config: dict) -> list[str]:
    """The figures the default target builds (config ``build.figures``; absent: every one)."""
    chosen = (config.get("build") or {}).get("figures")
    return list(FIGURE_NAMES if chosen is None else chosen)


def built_analyses(config: dict) -> list[str]:
    """The analyses the default target builds (config ``build.analyses``; absent: every one)."""
    chosen = (config.get("build") or {}).get("analyses")
    return list(ANALYSIS_NAMES if chosen is None else chosen)


def run_cells(config: dict) -> list[Cell]:
    """Every trained model of the grid."""
    return list(_run_cells(_runs_key(config, default_rows=False)))


@functools.lru_cache(maxsize=8)
def _run_cells(runs: tuple) -> tuple[Cell, ...]:
    # input functions ask for the grid once per job: planning the paper grid calls this ~300 times
    return tuple(sorted({Cell(b, obj, t, seed, k) for b, t, objectives, seeds, reruns in runs
                         for obj in objectives for seed in seeds for k in range(reruns)}))


def released_checkpoints(config: dict) -> dict[str, dict]:
    """config released.checkpoints: published models evaluated as downloaded (AoE Table 8)."""
    return (config.get("released") or {}).get("checkpoints") or {}


def pretrained_variants(config: dict) -> dict[str, dict]:
    """config evaluation.pretrained_variants: a backbone as downloaded under another pooling or prompt
    than its own; a variant's name is the pretrained cell's third folder (``none``: its own)."""
    return config["evaluation"].get("pretrained_variants") or {}


def pretrained_cell(backbone: str, variant: str = NO_TRAINSET) -> Cell:
    return Cell(backbone, PRETRAINED, variant, PRETRAINED_SEED)


def pretrained_embedding(config: dict, backbone: str, variant: str = NO_TRAINSET) -> tuple[str, str | None]:
    """(pooling, prompt) of a backbone evaluated as downloaded: its own (:func:`pretrained_pooling`, and
    backbones.<name>.prompt), or a pretrained variant's, where a key the variant leaves out keeps the backbone's."""
    spec = config["backbones"][backbone]
    own = {"pooling": pretrained_pooling(config, backbone)[0], "prompt": spec.get("prompt")}
    if variant != NO_TRAINSET:
        own.update(pretrained_variants(config)[variant])
    return own["pooling"], own["prompt"]


def pretrained_pooling(config: dict, backbone: str, variant: str = NO_TRAINSET) -> tuple[str, str]:
    """(pooling, what set it) of a backbone evaluated as downloaded: a pretrained variant's pooling, else
    ``backbones.<name>.pooling`` where the config names one, else the pooling its folder's sentence-transformers
    files name (``its own, <file>``: :mod:`aoe.config.folder_pooling`; issue 70), else the code default (CLS, the
    papers', which a raw transformers folder such as BERT-base keeps)."""
    from aoe.config.folder_pooling import FolderPoolingError, backbone_folder_pooling
    from aoe.config.hparams import backbone_pooling

    if variant != NO_TRAINSET and "pooling" in pretrained_variants(config)[variant]:
        return pretrained_variants(config)[variant]["pooling"], f"evaluation.pretrained_variants.{variant}.pooling"
    if "pooling" in config["backbones"][backbone]:
        return backbone_pooling(config, backbone)
    try:
        own = backbone_folder_pooling(config, backbone)
    except FolderPoolingError as err:  # at planning, as every config error: the key, the file, the fix
        source = next((k for k in ("package", "path") if config["backbones"][backbone].get(k)), "path")
        raise ConfigError(f"backbones.{backbone}.{source} (evaluated as downloaded, with no pooling named): {err}") from None
    if own is not None:
        return own.pooling, f"its own, {Path(own.file).parent.name}/{Path(own.file).name} mode {own.mode}"
    return backbone_pooling(config, backbone)


def evaluation_text(config: dict, backbone: str, objective: str, trainset: str) -> str:
    """How an evaluation of the cell rewrites each text before the prompt: backbones.<name>.eval_text
    (aoe.model.prompts.EVAL_TEXTS), or ``raw`` where no prompt wraps the text (the official eval.py rewrites
    prompted texts only), so a change reruns only the evaluations it changes (a Snakemake param)."""
    if objective == PRETRAINED:
        prompt = pretrained_embedding(config, backbone, trainset)[1]
    elif objective == RELEASED:
        prompt = released_checkpoints(config)[trainset].get("prompt")
    else:
        prompt = config["backbones"][backbone].get("prompt")
    return config["backbones"][backbone].get("eval_text", schema_default("backbones", "*", "eval_text")) if prompt is not None else "raw"


# a row's name in tables, figures and captions, by objective (a row's own ``label`` wins: :func:`row_label`)
OBJECTIVE_LABELS = {
    PRETRAINED: "as downloaded",
    "aoe": "AoE",
    "aoe_from_bert": "AoE from BERT",
    "angle_arxiv": "AnglE",
    "sbert_paper": "SBERT (SBERT's recipe)",
    "simcse_paper": "SimCSE (sup., SimCSE's recipe, our NLI triplets)",
    "cosent": "CoSENT",
    "sbert": "SBERT",
    "simcse_sup": "SimCSE (sup.)",
    "only_angle": "only angle",
    "only_contrastive": "only contrastive",
    "only_cosine": "only cosine",
    "only_ibn": "only ibn",
    "wo_ibn": "w/o ibn",
    "wo_angle": "w/o angle",
}


def row_label(row: dict) -> str:
    """A table row's name: its own ``label``, else its objective's (:data:`OBJECTIVE_LABELS`) with its variant
    or evaluation-only pooling or scoring gold."""
    if row.get("label"):
        return row["label"]
    name = OBJECTIVE_LABELS.get(row["objective"], row["objective"])
    if row["objective"] == PRETRAINED and row.get("variant", NO_TRAINSET) != NO_TRAINSET:
        return f"{name} ({row['variant']})"
    if row.get("eval_pooling"):
        return f"{name} (evaluated {row['eval_pooling']})"
    if row.get("eval_gold"):
        return f"{name} ({row['eval_gold']} gold)"
    return name


@dataclass(frozen=True)
class TableRow:
    """One row of a table: a (backbone, objective) over its columns' train sets and its seeds."""

    backbone: str
    objective: str
    trainsets: tuple[str, ...]
    seeds: tuple[int, ...]
    label: str | None = None
    section: str = ""
    reruns: int = 1  # trainings per seed (Cell.rerun 0 .. reruns-1)
    variant: str = NO_TRAINSET  # a pretrained row: evaluation.pretrained_variants key, or its own embedding
    eval_pooling: str = ""  # an evaluation-only variant row: its cells' STS or transfer under this pooling ("": the cell's own)
    eval_gold: str = ""  # an in-domain variant row: its cells' in-domain files read against this gold ("": the cell's own)

    @property
    def cells(self) -> list[Cell]:
        if self.objective == PRETRAINED:
            return [pretrained_cell(self.backbone, self.variant)]
        return [Cell(self.backbone, self.objective, t, s, k) for t in self.trainsets for s in self.seeds for k in range(self.reruns)]

    def as_dict(self) -> dict:
        return {
            "backbone": self.backbone,
            "objective": self.objective,
            "trainsets": list(self.trainsets),
            "seeds": list(self.seeds),
            "reruns": self.reruns,
            "label": self.label,
            "section": self.section,
            "variant": self.variant,
            "eval_pooling": self.eval_pooling,
            "eval_gold": self.eval_gold,
        }


def _runs_key(config: dict, default_rows: bool) -> tuple:
    """The runs as run_cells reads them; ``default_rows``: without the entries marked ``named_rows_only`` (trained for
    the table rows that name their seeds and reruns, AoE Table 4's random-seed rows), which no other row takes."""
    default = schema_default("runs", "*", "reruns")
    return tuple((r["backbone"], r["trainset"], tuple(r["objectives"]), tuple(r["seeds"]), int(r.get("reruns", default)))
                 for r in config["runs"] if not (default_rows and r.get("named_rows_only")))


@functools.lru_cache(maxsize=16)
def _trained_index(runs: tuple) -> dict[tuple[str, str, str], dict[int, int]]:
    """(backbone, objective, trainset) -> {seed: trainings of it} (table_rows asks once per row and seed)."""
    index: dict[tuple[str, str, str], dict[int, set[int]]] = {}
    for c in _run_cells(runs):
        index.setdefault((c.backbone, c.objective, c.trainset), {}).setdefault(c.seed, set()).add(c.rerun)
    return {k: {seed: len(r) for seed, r in v.items()} for k, v in index.items()}


def _trained_seeds(config: dict, backbone: str, objective: str, trainset: str) -> tuple[int, ...]:
    """The seeds the runs train a cell with."""
    return tuple(sorted(_trained_index(_runs_key(config, False)).get((backbone, objective, trainset), {})))


def _trained_reruns(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> int:
    """How many trainings of one seed the runs make (0: none)."""
    return _trained_index(_runs_key(config, False)).get((backbone, objective, trainset), {}).get(seed, 0)


def _spec_trainsets(spec: dict) -> list[str]:
    if "trainsets" in spec:
        return list(spec["trainsets"])
    return [spec["trainset"]] if "trainset" in spec else []


def row_entries(spec: dict) -> list[dict]:
    """A table spec's row entries: its explicit ``rows``, or backbones x (pretrained +) objectives,
    each with ``trainsets`` resolved (its own ``trainset(s)``, else the table's)."""
    if spec.get("rows"):
        entries = spec["rows"]
    else:
        objectives = ([PRETRAINED] if spec.get("include_pretrained", schema_default("tables", "*", "include_pretrained")) else []) + list(spec.get("objectives", []))
        entries = [{"backbone": b, "objective": o} for b in spec.get("backbones", []) for o in objectives]
    default_ts = _spec_trainsets(spec)
    return [{**e, "trainsets": list(e.get("trainsets") or ([e["trainset"]] if "trainset" in e else default_ts))} for e in entries]


def table_rows(config: dict, table: str) -> list[TableRow]:
    """The rows of a table, from its explicit ``rows`` or the cross product backbones x objectives.

    A row's train sets default to the table's (``trainsets``: one column each, in-domain tables; else
    ``trainset``). Its seeds default to every seed the runs train it with, and its reruns to those all
    of them have, so each seed weighs the same in the row's mean: the grid's five seeds once each, though
    seed 42 of the arXiv-era AnglE-BERT NLI cell (angle_arxiv) is trained five times for AoE Table 4's
    fixed-seed row (which names its seed and reruns, and whose run entry is marked ``named_rows_only``, so
    no other row takes those trainings); a
    configuration of one seed trained several times (presets/seed42-reruns.yaml, the papers' protocol), all of its
    trainings. Seeds given without reruns: each seed's first training.
    """
    rows = []
    trained = _trained_index(_runs_key(config, default_rows=True))
    for entry in row_entries(config["tables"][table]):
        obj = entry["objective"]
        trainsets = tuple(entry["trainsets"])
        reruns = entry.get("reruns")
        if obj in (PRETRAINED, RELEASED):
            seeds = (PRETRAINED_SEED,)
        elif "seeds" in entry:
            seeds = tuple(entry["seeds"])
        else:
            made = {(t, s): k for t in trainsets for s, k in trained.get((entry["backbone"], obj, t), {}).items()}
            seeds = tuple(sorted({s for _, s in made}))
            reruns = reruns or min(made.values(), default=1)
        label = entry.get("label")
        if obj == PRETRAINED and not label and entry.get("variant", NO_TRAINSET) == NO_TRAINSET:
            pooling, source = pretrained_pooling(config, entry["backbone"])
            if source.startswith("its own"):  # a folder's own pooling: the row says which (issue 70)
                label = f"{OBJECTIVE_LABELS[PRETRAINED]} (its own pooling: {pooling})"
        rows.append(TableRow(entry["backbone"], obj, trainsets, seeds, label, entry.get("section", schema_default("tables", "*", "rows", "*", "section")),
                             int(reruns or 1), entry.get("variant", NO_TRAINSET), entry.get("eval_pooling") or "",
                             entry.get("eval_gold") or ""))
    return rows


EVAL_POOLING_FILE = "{suite}.pool-{eval_pooling}.json"  # an evaluation-only variant's result beside the cell's own
# the suites scored under a cell's or a variant row's eval_pooling (the table kinds' suite names)
EVAL_POOLING_SUITES = ("sts", "transfer")


def suite_file(suite: str, eval_pooling: str = "") -> str:
    """The result file name of a suite: ``sts.json``, or an evaluation-only pooling's ``sts.pool-cls.json``
    (:data:`EVAL_POOLING_SUITES` have one: rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling)."""
    return EVAL_POOLING_FILE.format(suite=suite, eval_pooling=eval_pooling) if eval_pooling else f"{suite}.json"


def cell_eval_pooling(config: dict, cell: Cell) -> str | None:
    """The pooling of a trained cell's STS and transfer evaluations when it is not its trained one (the
    resolved ``eval_pooling``, :data:`aoe.config.hparams.EVAL_ONLY`); None for the trained pooling or an untrained
    cell. Both suites follow it: the official eval.py that scored a cell's STS scores SentEval's transfer
    tasks with the same pooling and batches (fcb6223 eval.py:58, 100-116; 1c5515b examples/NLI/eval_nli.py).
    The other suites (in-domain, NLI probe, Flickr30k, MTEB) score the trained pooling."""
    from aoe.config.hparams import resolve_cell

    if not cell.trained:
        return None
    return resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed).params.get("eval_pooling")


def cell_eval_gold(config: dict, cell: Cell) -> str:
    """The gold a cell's in-domain evaluation correlates with as its headline (the resolved ``eval_gold``,
    :data:`aoe.config.hparams.EVAL_ONLY`): ``int`` where the row's source scored int(score), as angle-emb's
    AnglE.evaluate did, else ``float``; the schema's default for an untrained cell (the backbone as downloaded)."""
    from aoe.config.hparams import resolve_cell, train_default

    if not cell.trained:
        return train_default("eval_gold")
    return resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed).params["eval_gold"]


def table_cells(config: dict, table: str) -> list[Cell]:
    """The models a table shows (each once)."""
    return sorted({c for row in table_rows(config, table) for c in row.cells})


def indomain_cells(config: dict, table: str) -> list[tuple[Cell, str]]:
    """(model, evaluation train set) pairs of an in-domain table: a trained model on its own train set's
    eval split; the pretrained backbone on every column's."""
    out = set()
    for row in table_rows(config, table):
        for ts in row.trainsets:
            for cell in row.cells:
                if cell.trainset == ts or cell.objective == PRETRAINED:
                    out.add((cell, ts))
    return sorted(out)


def table_inputs(config: dict, table: str) -> list[str]:
    """The result files a table reads (it never trains or embeds)."""
    kind = table_kind(config["tables"][table]["kind"])
    if kind.inputs == "gis_stats":
        return [results_path(config, "results/analysis/gis/stats.json")]
    if kind.inputs == "train_time":
        # the training jobs' own measurements: Snakemake's benchmark file and the run's metrics
        return [
            results_path(config, path)
            for c in table_cells(config, table)
            if c.trained
            for path in (f"results/benchmarks/train/{c.path}.tsv", f"results/models/{c.path}")
        ]
    if kind.column_per_trainset:
        return [results_path(config, f"results/eval/{c.path}/{kind.suite}_{ts}.json") for c, ts in indomain_cells(config, table)]
    files = {f"results/eval/{c.path}/{suite_file(kind.suite, row.eval_pooling)}" for row in table_rows(config, table) for c in row.cells}
    return [results_path(config, f) for f in sorted(files)]


def suite_results(config: dict) -> list[str]:
    """What target ``evaluate`` builds: the configured suites on every model of the grid, plus what tables read."""
    files = set()
    for c in eval_cells(config):
        if c.objective == PRETRAINED and c.trainset != NO_TRAINSET:
            continue  # a pretrained variant is an evaluation setting of a table: only what its tables read
        for suite in config["evaluation"]["suites"]:
            if suite == "indomain":
                if c.trained:
                    files.add(results_path(config, f"results/eval/{c.path}/indomain_{c.trainset}.json"))
            else:
                files.add(results_path(config, f"results/eval/{c.path}/{suite}.json"))
    for table, spec in built_tables(config).items():
        if table_kind(spec["kind"]).suite is not None:
            files.update(table_inputs(config, table))
    return sorted(files)


def eval_cells(config: dict) -> list[Cell]:
    """Every model that gets evaluated: all trained cells plus each used backbone as downloaded."""
    cells = set(run_cells(config))
    for table in built_tables(config):
        cells.update(table_cells(config, table))
    return sorted(cells)


def _length(p: dict) -> str:
    """A cell's training length from its resolved params: "200 steps of 32 pairs", "5 epochs of 32 pairs"."""
    span = f"{p['max_steps']} steps" if p["max_steps"] > 0 else f"{p['epochs']} epoch{'s' if p['epochs'] != 1 else ''}"
    return f"{span} of {p['batch_size']} {_FORMAT_WORDS.get(p['format'], p['format'])}"


# a train set's format in words (aoe.config.recipes.resolve_format's names)
_FORMAT_WORDS = {"nli3": "labelled NLI pairs"}


def _training_length(config: dict, row: TableRow) -> str:
    trainset = row.trainsets[0]
    return _length(train_params(config, row.backbone, row.objective, trainset, row.seeds[0] if row.seeds else 42))


def _start_text(backbone: str, objective: str, init: dict | None, named: bool = True) -> str:
    """Where a cell's training starts, from its resolved ``init``: the backbone as downloaded (``named``: by its
    name), or a model trained before it (a two-stage run: the official STS-B example's start from the NLI model)."""
    if not init:
        return f"{backbone} as downloaded" if named else "its weights as downloaded"
    start = init.get("objective") or objective
    return f"the {OBJECTIVE_LABELS.get(start, start)} model trained on {init['trainset']}"


def _pooling_text(config: dict, row: TableRow, cell: Cell) -> str:
    """The pooling a row's numbers were embedded with: the trained one, or the evaluation-only one beside it."""
    trained = _cell_params(config, cell)["pooling"]
    scored = row.eval_pooling or cell_eval_pooling(config, cell) or trained
    return trained if scored == trained else f"{trained} (trained), {scored} (scored)"


def _cell_params(config: dict, cell: Cell) -> dict:
    from aoe.config.hparams import resolve_cell

    return resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed).params


def _runs_text(row: TableRow) -> str:
    seeds = f"seed{'s' if len(row.seeds) > 1 else ''} {', '.join(map(str, row.seeds))}"
    return seeds + (f", {row.reruns} runs {'each' if len(row.seeds) > 1 else 'of it'}" if row.reruns > 1 else "")


def _said_once(pairs: list[tuple[str, str]]) -> str:
    """One facet of a table's rows (their start, length ...): the value most rows share, then the others,
    each with the rows that take it; the value alone where every row shares it."""
    by_value: dict[str, list[str]] = {}
    for who, value in pairs:
        by_value.setdefault(value, []).append(who)
    if len(by_value) == 1:
        return next(iter(by_value))
    common = max(by_value, key=lambda v: len(by_value[v]))
    others = "; ".join(f"{', '.join(dict.fromkeys(whos))}: {value}" for value, whos in by_value.items() if value != common)
    return f"{common} ({others})"


def _join(names) -> str:
    names = list(dict.fromkeys(names))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _row_facets(config: dict, row: TableRow, who: str) -> dict[str, list[tuple[str, str]]]:
    """(who, value) of each facet of one trained row, per train set where its train sets differ in it."""
    per_set = []
    for trainset in row.trainsets:
        cell = Cell(row.backbone, row.objective, trainset, row.seeds[0])
        p = train_params(config, row.backbone, row.objective, trainset, row.seeds[0])
        per_set.append((trainset, {"start": _start_text(row.backbone, row.objective, p.get("init"), named=False), "length": _length(p),
                                   "pooling": _pooling_text(config, row, cell), "finetune": p["finetune"]}))
    out: dict[str, list[tuple[str, str]]] = {}
    for facet in ("start", "length", "pooling", "finetune"):
        values = [(t, v[facet]) for t, v in per_set]
        if len({v for _, v in values}) == 1:
            out[facet] = [(who, values[0][1])]
        else:
            out[facet] = [(f"{who} on {t}", v) for t, v in values]
    out["runs"] = [(who, _runs_text(row))]
    return out


def training_summary(config: dict, table: str) -> str:
    """What this configuration ran for ``table``'s rows, from their resolved cells: per backbone, the trained rows'
    train sets, start (the backbone as downloaded or an earlier stage's model), length, seeds and pooling, each said
    once with the rows that differ from the rest; then the backbones scored as downloaded. The table's caption carries
    it (rule table), so a preset's table never shows a caption written for another run (issue 62: the demo's Table 2
    said its AoE started from the grid's NLI model, where the demo's starts from MiniLM as downloaded)."""
    rows = table_rows(config, table)
    trained = [r for r in rows if r.objective not in (PRETRAINED, RELEASED) and r.seeds and r.trainsets]
    per_column = table_kind(config["tables"][table]["kind"]).column_per_trainset
    out = []
    for backbone in dict.fromkeys(r.backbone for r in trained):
        facets: dict[str, list[tuple[str, str]]] = {"start": [], "length": [], "runs": [], "pooling": [], "finetune": []}
        mine = [r for r in trained if r.backbone == backbone]
        for row in mine:
            for facet, pairs in _row_facets(config, row, row_label(row.as_dict())).items():
                facets[facet] += pairs
        sets = _join(sorted({t for r in mine for t in r.trainsets}))
        # full fine-tuning is said by saying nothing; LoRA / QLoRA adapters are named
        tuning = "" if {v for _, v in facets["finetune"]} == {"full"} else f"; fine-tuning {_said_once(facets['finetune'])}"
        out.append(f"{backbone} trained on {sets}{' (a model per column)' if per_column and ' and ' in sets else ''} from "
                   f"{_said_once(facets['start'])}; {_said_once(facets['length'])}; {_said_once(facets['runs'])}; "
                   f"pooling {_said_once(facets['pooling'])}{tuning}")
    downloaded = [r for r in rows if r.objective == PRETRAINED]
    for backbone in dict.fromkeys(r.backbone for r in downloaded):
        pairs = [(row_label(r.as_dict()), _pooling_said(*pretrained_pooling(config, r.backbone, r.variant))) for r in downloaded if r.backbone == backbone]
        if len({value for _, value in pairs}) == 1:
            out.append(f"{backbone} as downloaded, pooling {pairs[0][1]}")
        else:  # the backbone scored several ways (the CPU demo: its own pooling, and the one it trains): each row says its own
            out.append(f"{backbone} " + "; ".join(f"{who}, pooling {value}" for who, value in pairs))
    return f"This run: {'. '.join(out)}." if out else ""


def _pooling_said(pooling: str, source: str) -> str:
    """A pooling as a caption says it: with its folder's file where it is the folder's own (issue 70)."""
    return f"{pooling}, its own ({source.removeprefix('its own, ').replace(' mode ', ': mode ')})" if source.startswith("its own") else pooling


def protocol_differences(config: dict, grid: dict, table: str) -> list[str]:
    """How this configuration's ``table`` trains its rows otherwise than the paper grid's (``grid``: config.yaml
    alone): the train sets, the backbones, where training starts, the training length and the pooling of its trained
    rows; [] where they agree or the grid has no such table. A preset's table set beside the paper's numbers says so
    (issue 54: the demo's in-domain STS-B model stood in AoE Table 1, which trains on NLI; issue 62: its Table 2's
    AoE starts from MiniLM as downloaded, the grid's from the NLI model)."""
    if table not in grid.get("tables", {}) or config is grid:
        return []
    # a backbone as downloaded and a released checkpoint train nothing here: no recipe to compare
    ours = [r for r in table_rows(config, table) if r.objective not in (PRETRAINED, RELEASED)]
    theirs = [r for r in table_rows(grid, table) if r.objective not in (PRETRAINED, RELEASED)]
    if not ours or not theirs:
        return []
    out = []
    sets = lambda rows: sorted({t for r in rows for t in r.trainsets})
    if sets(ours) != sets(theirs):
        out.append(f"trained on {', '.join(sets(ours))} (paper: {', '.join(sets(theirs))})")
    backbones = lambda rows: sorted({r.backbone for r in rows})
    if not set(backbones(ours)) <= set(backbones(theirs)):
        out.append(f"backbone {', '.join(backbones(ours))} (paper: {', '.join(backbones(theirs))})")
    match = next((r for r in theirs if r.objective == ours[0].objective), theirs[0])
    if ours[0].trainsets and ours[0].seeds and match.trainsets and match.seeds:
        mine, paper = (train_params(c, r.backbone, r.objective, r.trainsets[0], r.seeds[0]) for c, r in ((config, ours[0]), (grid, match)))
        # the backbone as downloaded on both sides is one start (a backbone of its own is said above)
        if bool(mine.get("init")) or bool(paper.get("init")):
            start, paper_start = (_start_text(r.backbone, r.objective, p.get("init")) for r, p in ((ours[0], mine), (match, paper)))
            if start != paper_start:
                out.append(f"start {start} (paper: {paper_start})")
    length, paper_length = _training_length(config, ours[0]), _training_length(grid, match)
    if length != paper_length:
        out.append(f"{length} (paper: {paper_length})")
    if ours[0].trainsets and ours[0].seeds and match.trainsets and match.seeds:
        pooling = _pooling_text(config, ours[0], Cell(ours[0].backbone, ours[0].objective, ours[0].trainsets[0], ours[0].seeds[0]))
        paper_pooling = _pooling_text(grid, match, Cell(match.backbone, match.objective, match.trainsets[0], match.seeds[0]))
        if pooling != paper_pooling:
            out.append(f"pooling {pooling} (paper: {paper_pooling})")
    return out


def grid_paper_rows(grid: dict, table: str) -> list[dict]:
    """Every paper (and reproduction) row the paper grid's ``table`` shows: its rows' own ``paper`` and
    ``reproduction`` keys, its ``paper`` / ``reproduction`` mappings and its ``paper_reference`` list, each
    ``{ref, backbone, objective}`` (the row of ours it stands for; '' for a model no row trains), in that order.

    A preset's ``rows:`` (or ``paper_reference:``) list replaces the grid's whole, and with it the paper's numbers
    hung on those entries (issue 62: the demo's Table 1 lost the paper's SBERT † and SimCSE rows); the table
    rule adds these, so the paper's rows are the table's whatever a configuration trains."""
    spec = (grid.get("tables") or {}).get(table)
    if not spec:
        return []
    out: dict[str, dict] = {}
    for entry in spec.get("rows") or []:
        for key in ("paper", "reproduction"):
            if entry.get(key):
                out.setdefault(entry[key], {"ref": entry[key], "backbone": entry["backbone"], "objective": entry["objective"]})
    for key in ("paper", "reproduction"):
        for backbone, by_objective in (spec.get(key) or {}).items():
            for objective, ref in (by_objective or {}).items():
                out.setdefault(ref, {"ref": ref, "backbone": backbone, "objective": objective})
    for ref in spec.get("paper_reference") or []:
        out.setdefault(ref, {"ref": ref, "backbone": "", "objective": ""})
    return list(out.values())


# what a table row trained under such a selection carries, and the note that says why
SCORED_SPLIT_MARK = "§"


def scored_split_selections(config: dict, table: str, held_out: bool = False) -> list[dict]:
    """The rows of ``table`` whose models were chosen on a split their numbers are read on (``select_checkpoint:
    best`` with a ``select_split`` that :func:`selection_is_test` calls scored, as the official code chose for NLI-STS
    and QQP / QNLI): ``[{backbone, objective, trainsets, split}]``, one per row; [] under the grid's ``last``.
    Such a number is not a held-out estimate, so the table marks the row (:data:`SCORED_SPLIT_MARK`) and says so.
    ``held_out``: the rows chosen on a split the table does not score instead (SimCSE's recipe: STS-B dev), which
    a note names without the mark: the number is held out, the choice is still part of the recipe."""
    out = []
    for row in table_rows(config, table):
        if row.objective in (PRETRAINED, RELEASED):
            continue
        chosen = sorted({f"{found['dataset']} {found['split']}" for cell in row.cells
                         if (found := selection_split(config, cell)) and found["split_is_test"] != held_out})
        if chosen:
            out.append({"backbone": row.backbone, "objective": row.objective, "trainsets": list(row.trainsets), "split": ", ".join(chosen)})
    return out


def train_params(config: dict, backbone: str, objective: str, trainset: str, seed: int, job: bool = False) -> dict:
    """Resolved keyword arguments of aoe.training.train.TrainConfig for one cell (:func:`aoe.config.hparams.resolve_cell`).

    ``job``: a train job's Snakemake params, without :data:`aoe.config.hparams.RUN_ONLY` (how often it logs and
    checkpoints): changing those reruns nothing; the job reads them from the config itself.
    """
    from aoe.config.hparams import EVAL_ONLY, RUN_ONLY, OFF_DEFAULTS, resolve_cell

    params = {k: v for k, v in resolve_cell(config, backbone, objective, trainset, seed).params.items() if k not in EVAL_ONLY}
    # at its off default a later setting is left out: the params of jobs planned before it existed stay as they were
    params = {k: v for k, v in params.items() if not (k in OFF_DEFAULTS and v == OFF_DEFAULTS[k])}
    return {k: v for k, v in params.items() if k not in RUN_ONLY} if job else params


def loss_settings(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> dict:
    """Every loss setting of a cell as resolved, code defaults included (aoe.config.recipes): a train job's
    params, so that a changed built-in default reruns the cells it changes (Snakemake's params trigger)."""
    from aoe.config.hparams import resolve_cell

    settings = resolve_cell(config, backbone, objective, trainset, seed).settings
    return {s.key.removeprefix("loss."): s.value for s in settings if s.key.startswith("loss.")}


def settings_changed(config: dict, cells: list[Cell], root: str | Path = ".") -> list[tuple[Cell, str]]:
    """Trained models whose recorded settings (their aoe_config.json) differ from what ``config`` resolves
    for them now, each with the first difference (``key: recorded -> now``).

    Snakemake retrains those through its params trigger, from the params it recorded in .snakemake/;
    where that record is gone (the folder deleted, another working copy) it cannot tell, and a table
    would mix models of the old settings with a recipe ledger of the new.
    """
    import json

    from aoe.config.hparams import EVAL_ONLY, RUN_ONLY, resolve_cell

    out = []
    for cell in cells:
        record = Path(root) / results_path(config, f"results/models/{cell.path}/aoe_config.json")
        if not cell.trained or not record.is_file():
            continue
        try:
            saved = json.loads(record.read_text())
        except (OSError, ValueError):
            continue  # an unreadable record is the model's problem, found when it is loaded
        recipe = resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
        loss = {s.key: s.value for s in recipe.settings if s.key.startswith("loss.")}
        was = {**saved.get("train", {}), **{k: saved.get("objective", {}).get(k.removeprefix("loss.")) for k in loss}}
        now = json.loads(json.dumps({**recipe.params, **loss}))
        # how a run logs, and how its model is scored (the train job records the code's default there): no retraining
        diff = [k for k in now if k not in RUN_ONLY + EVAL_ONLY and k in was and was[k] != now[k]]
        if diff:
            out.append((cell, f"{diff[0]}: {was[diff[0]]!r} -> {now[diff[0]]!r}"))
    return out


def in_batch_pool_size(config: dict, backbone: str, params: dict) -> tuple[int, int]:
    """Pairs one loss of a cell sees, and its backbone's GPU count: a micro-batch
    (``batch_size / gradient_accumulation_steps``), split over the GPUs under ``in_batch_pool: process``
    (aoe.training.train: each process its own slice), whole under ``global`` and ``global_detached`` (all-gathered)."""
    micro = params["batch_size"] // max(1, params["gradient_accumulation_steps"])
    gpus = max(1, int(config["backbones"][backbone].get("resources", {}).get("gpus", schema_default("backbones", "*", "resources", "gpus"))))
    return (micro // gpus if params["in_batch_pool"] == "process" else micro), gpus


def start_cell(cell: Cell, init: dict | None) -> Cell | None:
    """The trained cell whose model ``cell`` starts from, given its resolved ``init``: the same backbone,
    seed and rerun, the init's train set and objective (else its own objective); None: the backbone's weights."""
    if not init:
        return None
    # a rerun repeats the whole chain: it starts from the same rerun of its init
    return Cell(cell.backbone, init.get("objective") or cell.objective, init["trainset"], cell.seed, cell.rerun)


def init_cell(config: dict, cell: Cell) -> Cell | None:
    """:func:`start_cell` of ``cell`` with its ``init`` resolved from ``config``."""
    return start_cell(cell, train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed).get("init"))


# ---- checkpoint selection (train setting select_checkpoint) -------------------------------------


def selection_is_test(config: dict, trainset: str, dataset: str, split: str) -> bool:
    """Whether a selection split is one the cell's reported numbers are read on: its train set's
    in-domain eval split, or an STS task's test split (the transfer evaluation of every trained model).

    The official code selects on such splits (fcb6223 train_angle.py:159-161 NLI-STS: the STS test
    set is the validation set; l.171-173 QQP/QNLI/RTE: the validation set is the test set), so a
    number read after such a selection is no longer a held-out estimate: the record says so.
    """
    from aoe.data.sts import STS_TASKS

    ts = config["trainsets"][trainset]
    if dataset == ts["dataset"] and split == ts.get("eval_split"):
        return True
    return split == "test" and dataset in STS_TASKS.values()


def selection_split(config: dict, cell: Cell) -> dict | None:
    """What a cell selects its checkpoint on under ``select_checkpoint: best``: ``{dataset, split, table,
    split_is_test}`` (``table``: the prepared pair table, an input of its train job); None under ``last``.

    A setting that cannot work is a :class:`ConfigError` naming the key that set it and the fix,
    raised while the run is planned rather than after a training.
    """
    from aoe.config.hparams import resolve_cell
    from aoe.data.catalog import pair_table_problem

    recipe = resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
    params, set_by = recipe.params, recipe.provenance()
    rule, split = params.get("select_checkpoint", "last"), params.get("select_split")
    if rule == "last":
        if split is not None:
            raise ConfigError(
                f"{set_by['select_split']}: {split!r} is read only by select_checkpoint: best, and "
                f"{set_by['select_checkpoint']} is last; remove select_split or set select_checkpoint: best"
            )
        return None
    if not isinstance(split, dict) or set(split) != {"dataset", "split"}:
        given = "none is set" if split is None else f"{set_by['select_split']} is {split!r}"
        raise ConfigError(
            f"{set_by['select_checkpoint']}: best needs select_split: {{dataset: <d>, split: <s>}} beside it, a prepared "
            f"pair table with gold scores held out from training (e.g. {{dataset: stsb, split: dev}}); {given}"
        )
    problem = pair_table_problem(split["dataset"], split["split"])
    if problem:
        raise ConfigError(f"{set_by['select_split']}: {problem}")
    ts = config["trainsets"][cell.trainset]
    if (split["dataset"], split["split"]) == (ts["dataset"], ts["split"]):
        raise ConfigError(
            f"{set_by['select_split']}: {split['dataset']}/{split['split']} is train set {cell.trainset!r}'s own "
            "training split, which would select the epoch that fits it best; name a held-out split "
            f"(e.g. {{dataset: stsb, split: dev}})"
        )
    return {
        "dataset": split["dataset"],
        "split": split["split"],
        "table": results_path(config, f"results/data/{split['dataset']}/{split['split']}.parquet"),
        "split_is_test": selection_is_test(config, cell.trainset, split["dataset"], split["split"]),
    }


def selection_input(config: dict, cell: Cell) -> list[str]:
    """The train job's selection table: none under ``select_checkpoint: last``, so its plan is unchanged."""
    found = selection_split(config, cell)
    return [found["table"]] if found else []
