"""What a table's rows compare besides the paper: each trained row's gain over its backbone as downloaded, and the
order of a backbone's objectives beside the paper's order of the same objectives (REPORT.md, under each table).

These hold on any backbone: a preset on a model the paper never ran has no paper number to set a row against, but
it can still check that training beats the model it started from and that the objectives fall in the paper's
order. A gain is a difference of two numbers, so it passes the gate of :mod:`aoe.results.likeness` (issue 69): the
backbone scored as the trained row is, or otherwise only as the table's ``compare_across`` names."""

from __future__ import annotations

from aoe.config.cells import PRETRAINED, RELEASED
from aoe.config.rows import OBJECTIVE_LABELS
from aoe.plan.ledger import md_cell
from aoe.publish.cells import fmt, fmt_paper, has_result, ours_rows, row_measure
from aoe.results.likeness import UnlikeNumbers, like_for_like, named_text
from aoe.util.jsonio import finite_or_none

__all__ = ["gain_lines", "ordering_lines", "summary_key"]


def summary_key(table: dict) -> str | None:
    """The column an ordering of rows goes by: the table's summary (Avg.), else its only column."""
    summary = [c["key"] for c in table["columns"] if c.get("summary")]
    if summary:
        return summary[0]
    return table["columns"][0]["key"] if len(table["columns"]) == 1 else None


def _paper_values(table: dict) -> dict[tuple[str, str], dict]:
    """(backbone, objective) of ours -> the paper's row for it, from our rows' paper lines and the
    reference rows the table's ``paper`` mapping names (those on a backbone this table does not train)."""
    out: dict[tuple[str, str], dict] = {}
    for r in table["rows"]:
        if r.get("paper") and r.get("paper_backbone") and not r.get("section"):
            out.setdefault((r["paper_backbone"], r["paper_objective"]), r["paper"])
    return out


def gain_lines(table: dict, kind) -> list[str]:
    """Each trained row's gain over its backbone as downloaded, per column: the comparison that holds
    on any backbone (a CPU preset's MiniLM has no paper row), beside the paper's own gain where the
    paper prints the backbone as downloaded too."""
    headers = [c["header"] for c in table["columns"]]
    keys = [c["key"] for c in table["columns"]]
    ours = [r for r in ours_rows(table) if not r.get("section")]
    paper = _paper_values(table)
    body = []

    def diff(a: dict, b: dict, key: str) -> str:
        x, y = finite_or_none(a.get(key)), finite_or_none(b.get(key))
        return "–" if x is None or y is None else f"{x - y:+.{kind.digits(key)}f}"

    # a gain is what training changed: the recipe differs by definition, every other difference of measurement is refused
    # (an int-gold row minus the backbone scored against the float gold) unless the table names it (aoe.results.likeness)
    allowed = {**(table.get("compare_across") or {}), "recipe": "a gain over the backbone as downloaded is what training changed"}
    named_lines, refused_lines = [], []
    for backbone in dict.fromkeys(r["backbone"] for r in ours):
        rows = [r for r in ours if r["backbone"] == backbone]
        # each evaluation of the backbone as downloaded is a base of its own (its own pooling, the pooling the run
        # trains: issue 70), and each gain names the one it is against; a trained row gains over every base measured
        # as it is (or otherwise only as the table names), and one alike with none says so (issue 69)
        bases = [r for r in rows if r["objective"] == PRETRAINED and has_result(r)]
        for r in rows:
            if not bases or r["objective"] in (PRETRAINED, RELEASED) or not has_result(r):
                continue
            alike, why = [], ""
            for base in bases:
                name = f"{backbone}: {r['label']} − {base['label']}"
                try:
                    alike.append((name, base, like_for_like(row_measure(r), row_measure(base), allowed, f"tables.{table['name']}: {name}")))
                except UnlikeNumbers as err:
                    why = why or err.difference
            if not alike:
                name = f"{backbone}: {r['label']} − {bases[0]['label']}"
                refused_lines.append(f"- {md_cell(name)}: no gain, measured otherwise ({md_cell(why)})")
            for name, base, named in alike:
                body.append(f"| {md_cell(name)} | " + " | ".join(diff(r["mean"], base["mean"], k) for k in keys) + " |")
                named.pop("recipe", None)
                if named:
                    named_lines.append(f"- {md_cell(name)}: {md_cell(named_text(named))}")
    # the paper's gain, where it prints a backbone as downloaded and a trained row of ours on it
    objectives = {r["objective"]: r["label"] for r in ours if r["objective"] not in (PRETRAINED, RELEASED)}
    for (p_backbone, objective), base in paper.items():
        if objective != PRETRAINED:
            continue
        for obj, label in objectives.items():
            if (p_backbone, obj) in paper:
                name = f"paper, {p_backbone}: {label} − {OBJECTIVE_LABELS[PRETRAINED]}"
                body.append(f"| {md_cell(name)} | " + " | ".join(diff(paper[(p_backbone, obj)], base, k) for k in keys) + " |")
    if not body:
        return ["", "Gain over the backbone as downloaded: none measured alike:", "", *refused_lines] if refused_lines else []
    # only the columns with a gain (a column no model of ours trains on has none)
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in body]
    shown = [i for i in range(len(keys)) if any(r[i + 1] != "–" for r in rows)]
    headers = [headers[i] for i in shown]
    keys = [keys[i] for i in shown]
    body = [f"| {r[0]} | " + " | ".join(r[i + 1] for i in shown) + " |" for r in rows]
    return [
        "",
        "Gain over the backbone as downloaded (mean of ours − the same backbone as downloaded, which draws no seed, so the "
        "gain spreads as the trained row's seeds do (its ± above); the check that holds on any backbone: does training beat "
        "the model it started from):",
        "",
        "| Gain | " + " | ".join(md_cell(h) for h in headers) + " |",
        "|---" * (len(keys) + 1) + "|",
        *body,
        *([""] + named_lines + refused_lines if named_lines or refused_lines else []),
    ]



def _order(items: list[tuple[str, float]], lower_is_better: bool) -> list[tuple[str, float]]:
    return sorted(items, key=lambda item: item[1], reverse=not lower_is_better)


def ordering_lines(table: dict, kind) -> list[str]:
    """Where a backbone (or an ablation's section) has several trained rows: their order by the summary
    column beside the paper's order of the same objectives, on the same backbone where the paper has it,
    else on each backbone of the paper's that holds two or more of them (AoE > SimCSE > SBERT on
    BERT-base): a preset on another backbone is checked for the paper's ordering, not its numbers."""
    key = summary_key(table)
    if key is None:
        return []
    header = next(c["header"] for c in table["columns"] if c["key"] == key)
    lower = key in kind.lower_is_better
    digits = kind.digits(key)
    paper = _paper_values(table)
    paper_backbones = list(dict.fromkeys(b for b, _ in paper))
    groups: dict[tuple[str, str], dict[str, dict]] = {}
    for r in ours_rows(table):
        if r["objective"] != RELEASED and finite_or_none(r["mean"].get(key)) is not None:
            # one row per objective: an ablation's seed rows (one objective on other seeds) order nothing
            groups.setdefault((r["backbone"], r.get("section") or ""), {}).setdefault(r["objective"], r)
    out = []
    for (backbone, section), by_objective in groups.items():
        rows = {r["label"]: r for r in by_objective.values()}
        ours = _order([(label, r["mean"][key]) for label, r in rows.items()], lower)
        orders = []
        candidates = [backbone] + ([b for b in paper_backbones if b != backbone] if not section else [])
        for p_backbone in candidates:
            values = []
            for label, r in rows.items():
                # an ablation's row has its own paper row; elsewhere the paper's row of the same objective
                own = r.get("paper") if p_backbone == backbone and r.get("paper_backbone") == backbone else None
                value = finite_or_none((own or paper.get((p_backbone, r["objective"])) or {}).get(key))
                if value is not None:
                    values.append((label, value))
            if len(values) >= 2:
                orders.append((p_backbone, _order(values, lower)))
                if p_backbone == backbone:
                    break  # the paper's own rows of this backbone: the comparison that needs no other
        trained = [label for label, r in rows.items() if r["objective"] != PRETRAINED]
        if len(ours) < 2 or (len(trained) < 2 and not orders):
            continue
        sign = " < " if lower else " > "
        text = sign.join(f"{md_cell(label)} {fmt(v, digits)}" for label, v in ours)
        parts = []
        for p_backbone, order in orders:
            common = [label for label, _ in order]
            same = [label for label, _ in ours if label in common] == common
            parts.append(f"the paper on {p_backbone}: " + sign.join(f"{md_cell(label)} {fmt_paper(v, digits)}" for label, v in order)
                         + (" (the same order)" if same else " (**another order**)"))
        claimed = [label for label in (table.get("study") or {}).get("paper_order") or [] if label in rows]
        if not parts and len(claimed) >= 2:
            # an objective comparison: the paper's order is its claim (its rows are on another backbone or recipe)
            same = [label for label, _ in ours if label in claimed] == claimed
            parts = [f"the paper's claim ({md_cell(table['study']['source'])}): " + sign.join(md_cell(label) for label in claimed)
                     + (" (the same order)" if same else " (**another order**)")]
        if not parts:
            parts = ["the paper orders fewer than two of these on one backbone"]
        out.append(f"- {md_cell(backbone)}{f' ({md_cell(section)})' if section else ''}: ours {text}; " + "; ".join(parts) + ".")
    if not out:
        return []
    return ["", f"Ordering by {md_cell(header)} ({'lower' if lower else 'higher'} is better), ours beside the paper's of the same rows:", "", *out]
