"""What a table's caption and notes say about how its rows were trained, generated from their resolved cells:
what this configuration ran (:func:`training_summary`) and how it trains otherwise than the paper grid
(:func:`protocol_differences`), so that a preset's table never shows a caption written for another run.
"""

from __future__ import annotations

from aoe.config.cell_settings import cell_eval_pooling, train_params
from aoe.config.cells import PRETRAINED, RELEASED, Cell
from aoe.config.pretrained import pretrained_pooling
from aoe.config.rows import OBJECTIVE_LABELS, TableRow, row_label, table_rows
from aoe.config.table_kinds import table_kind

__all__ = [
    "protocol_differences",
    "training_summary",
]


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
