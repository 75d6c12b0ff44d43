"""A table's rows: each (backbone, objective) row of ours with its train sets, seeds and reruns resolved against
what the runs train, its name in tables and captions, the models it shows, and the paper's rows the paper grid
hangs on the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

from aoe.config.cells import NO_TRAINSET, PRETRAINED, PRETRAINED_SEED, RELEASED, Cell, trained_runs
from aoe.config.hparams import schema_default
from aoe.config.pretrained import pretrained_cell, pretrained_pooling

__all__ = [
    "table_cells",
    "TableRow",
    "table_rows",
    "grid_paper_rows",
    "OBJECTIVE_LABELS",
    "row_label",
    "row_entries",
    "indomain_cells",
]


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
    trained = trained_runs(config, default_rows=True)
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
