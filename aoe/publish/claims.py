"""REPORT.md's "Gains the papers claim in their prose": each gain a paper states between two of its rows, beside the
same difference of our two rows (:data:`CLAIMS`), measured alike or as the table names (:mod:`aoe.results.likeness`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aoe.config.table_kinds import table_kind
from aoe.plan.ledger import md_cell
from aoe.publish.cells import fmt, fmt_paper, row_measure
from aoe.results.likeness import UnlikeNumbers, like_for_like, named_text
from aoe.results.paper_numbers import paper_reference
from aoe.results.stats import delta_text, gain_bound
from aoe.results.table_model import draws_seed
from aoe.util.jsonio import finite_or_none

__all__ = ["CLAIMS", "NOT_CLAIMED", "Claim", "claims_section"]


@dataclass(frozen=True)
class Claim:
    """A gain a paper states in its prose: the difference of two of its rows in one column (printed with
    '%', in points), which the same two rows of one of our tables give too."""

    ref: str  # paper_numbers.yaml path of the claimed number (a text_claims entry)
    label: str
    table: str  # config.yaml tables.<name> holding both rows
    column: str  # the column key
    backbone: str
    objective: str  # the row that gains
    baseline: str  # the row it gains over
    source: str  # where the paper says it
    note: str = ""  # how our two rows differ from the paper's


CLAIMS: tuple[Claim, ...] = (
    # BERT-base: the paper's SimCSE is SimCSE's published number, so ours is the row at SimCSE's recipe (simcse_paper);
    # its AoE-BERT is the released arXiv AnglE-BERT under angle-emb 0.1.1 (issue #68), so ours is the arXiv-era cell
    *(Claim(f"acl2024_table1/text_claims/avg_improvement_over_SimCSE_percent/{group}", f"AoE − SimCSE, {name}, STS avg", "table1_sts", "avg",
            backbone, aoe, simcse, "ACL §5.1, aoe-acl2024.txt l.196", note)
      for group, backbone, name, aoe, simcse, note in (
          ("BERT-base", "bert-base-uncased", "BERT-base", "angle_arxiv", "simcse_paper",
           "the paper's AoE-BERT is the released arXiv AnglE-BERT under angle-emb 0.1.1, issue #68: ours is the arXiv-era cell"),
          ("LLaMA7B", "llama-2-7b", "LLaMA-2 7B", "aoe", "simcse_sup", ""),
          ("LLaMA13B", "llama-2-13b", "LLaMA-2 13B", "aoe", "simcse_sup", ""))),
    # the row ACL Table 2's AoE stands beside: the arXiv in-domain cell (angle_arxiv), whose run ACL prints (config.yaml table2_indomain)
    *(Claim(f"acl2024_table2/text_claims/AoE_improvement_percent/vs_{name}", f"AoE − {name}, in-domain avg (STS-B, GIS)", "table2_indomain", "avg",
            "bert-base-uncased", "angle_arxiv", baseline, "ACL §5.1, aoe-acl2024.txt l.198") for name, baseline in (("SBERT", "sbert"), ("SimCSE", "simcse_sup"))),
    Claim("angle_arxiv_transfer_sts_versions/text_claims/AnglE_BERT_over_SimCSE_BERT_percent", "AnglE-BERT − SimCSE-BERT, STS avg",
          "angle_transfer_sts", "avg", "bert-base-uncased", "angle_arxiv", "simcse_paper", "angle-arxiv-a.txt l.146, -b l.148, -c l.157",
          "the paper's AnglE-BERT is the released checkpoint's 82.37"),
    *(Claim(f"angle_arxiv_transfer_sts_versions/text_claims/AnglE_LLaMA_over_SimCSE_LLaMA_percent/{version}", "AnglE-LLaMA2-7B − SimCSE-LLaMA2-7B, STS avg",
            "angle_transfer_sts", "avg", "llama-2-7b", "aoe", "simcse_sup", source)
      for version, source in (("arxiv_a_and_c", "angle-arxiv-a.txt l.146, -c l.157"), ("arxiv_b", "angle-arxiv-b.txt l.148 (its own LLaMA rows)"))),
    Claim("angle_arxiv_table2_nontransfer/text_claims/AnglE_over_SBERT_absolute_gain", "AnglE − SBERT, non-transfer avg (5 datasets)",
          "angle_table2_nontransfer", "avg", "bert-base-uncased", "angle_arxiv", "sbert", "angle-arxiv-a.txt l.173, -b l.179, -c l.185"),
    Claim("angle_arxiv_table3_ablation/text_claims/ibn_without_ISP_detection_drop_percent", "only ibn − only ibn without ISP detection, STS-B",
          "angle_table3_ablation", "stsb", "bert-base-uncased", "only_ibn", "ibn_without_isp", "angle-arxiv-a.txt l.187, -b l.194, -c l.198",
          "the paper's 'drop' read in points below its only ibn row"),
)
# the prose numbers no pair of our rows gives (the reasons, with their sources: aoe/resources/paper_numbers.yaml notes)
NOT_CLAIMED = (
    "the t-test p-values (angle-arxiv-b.txt l.177 p = 3.71%, ACL Table 1's caption p < 5%): the papers do not say what the tests pair, "
    "our tables' t-tests are over seeds, paired where the seeds match, else Welch's",
    "AnglE-LLaMA's transfer-task gains of 4.34% and 4.48% over DiffCSE- and SimCSE-RoBERTa (angle-arxiv-a.txt l.230): published models the grid does not train",
    "ACL §5's MTEB comparison models (bge-large-en-v1.5 64.23 ...): not evaluated here; AoE's own 64.64 is table released_mteb's",
)


def _claim_rows(table: dict, backbone: str, objective: str) -> list[dict]:
    """The rows of ours of (backbone, objective): the row scored as trained first, then its evaluation-only variants
    (another scoring pooling or gold), which a claim takes where the other row is measured as they are."""
    rows = [r for r in table["rows"] if not r.get("reference") and r.get("backbone") == backbone and r.get("objective") == objective]
    return sorted(rows, key=lambda r: bool(r.get("eval_pooling") or r.get("eval_gold")))


def _claim_pair(table: dict, c: "Claim") -> tuple[dict, dict, dict, str] | None:
    """(gaining row, baseline row, the differences the table names, '') of the claim's rows measured alike (the fewest
    named differences, the rows scored as trained first), else (its first rows, {}, how they are measured otherwise);
    None where the table lacks either (a preset on another backbone)."""
    gaining, baseline = _claim_rows(table, c.backbone, c.objective), _claim_rows(table, c.backbone, c.baseline)
    if not gaining or not baseline:
        return None
    best, why = None, ""
    for a in gaining:
        for b in baseline:
            try:
                named = like_for_like(row_measure(a), row_measure(b), table.get("compare_across"), f"{c.ref}: {a['label']} − {b['label']}")
            except UnlikeNumbers as err:
                why = why or err.difference
                continue
            if best is None or len(named) < len(best[2]):
                best = (a, b, named)
    return (*best, "") if best else (gaining[0], baseline[0], {}, why)


def claims_section(tables: list[dict], numbers_file: str | Path | None = None) -> str:
    """Ours beside each gain a paper claims in its prose (:data:`CLAIMS`): the difference of the means of our
    two rows in the claim's table and column, Δ = ours − paper; one line per claim whose table is among
    ``tables`` ("–" where either row has no result yet); "" when none is."""
    by_name = {t["name"]: t for t in tables}
    lines = []
    for c in CLAIMS:
        table = by_name.get(c.table)
        if table is None:
            continue
        paper = paper_reference(c.ref, numbers_file, ["avg"])[1].get("avg")
        pair = _claim_pair(table, c)
        if pair is None:  # a preset's table without the claim's rows (another backbone): nothing to set beside it
            continue
        *rows, named, why = pair
        means = [finite_or_none(r.get("mean", {}).get(c.column)) for r in rows]
        digits = table_kind(table["kind"]).digits(c.column)
        if why:
            ours, delta = f"– (measured otherwise: {why})", "–"
        elif None in means:
            ours, delta = "–", "–"
        else:
            gain = means[0] - means[1]
            ours = f"{fmt(means[0], digits)} − {fmt(means[1], digits)} = {gain:+.{digits}f}"
            # the bound of a difference: both rows' seed spreads, the paper's two rows one draw each
            values = [(r.get("values") or {}).get(c.column) or {} for r in rows]
            bound = gain_bound(*values) if all(draws_seed(True, r["objective"]) for r in rows) else None
            delta = "–" if paper is None else delta_text(gain - paper, bound, digits)
        label = f"{c.label} ({c.note})" if c.note else c.label
        if not why:
            # which two rows, and what of their measurement differs as the table allows (issue 69)
            label += f" [ours: {rows[0]['label']} − {rows[1]['label']}" + (f"; {named_text(named)}" if named else "") + "]"
        lines.append(f"| {md_cell(label)} | `{c.table}` {md_cell(c.backbone)} | {ours} | {fmt_paper(paper, digits)} | {delta} | {md_cell(c.source)} |")
    if not lines:
        return ""
    return "\n".join([
        "## Gains the papers claim in their prose", "",
        "Each claim is the difference of two of the paper's rows in one column, printed with '%' but in points; ours is the "
        "same difference of our two rows' means (each over its runs). Δ = ours − paper, with the header's bound for a "
        "difference: t·√(σa²(1 + 1/ka) + σb²(1 + 1/kb)), each row's seed σ as there, the rows taken as independent. Not "
        "compared, no pair of our rows gives them: " + "; ".join(NOT_CLAIMED) + ".", "",
        "| Claim | Our table, backbone | Ours | Paper | Δ | Paper source |", "|---|---|---|---|---|---|", *lines, "",
    ])
