"""REPORT.md's "Numbers the paper quotes in its prose": ours beside each number AoE quotes outside its tables.

AoE quotes a few measurements in sentences (paper_numbers.yaml ``acl2024_quoted``): the share of NLI pairs in the
cosine saturation zone (§4), the n-gram overlap of GIS pairs (Appendix B), the distances of Fig. 3's Ukraine pair
(§5.3). Our analyses measure the same quantities (:data:`QUOTED` says where), but a sentence rarely says what its
number was measured under. So each quantity carries the paper's measure as its sentence states it (what it leaves
unstated is written as such) and ours from the result file, and the Δ goes through the one gate every difference
passes (:func:`aoe.results.likeness.like_for_like`, issue 69): a Δ where both are measured alike, or otherwise only
as :attr:`Quoted.compare_across` names (the line prints it), else ``n/c`` with what differs. Reads files only.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aoe.plan.ledger import md_cell
from aoe.publish.cells import fmt, fmt_paper
from aoe.results.likeness import Measure, UnlikeNumbers, like_for_like, named_text
from aoe.results.paper_numbers import paper_reference
from aoe.util.jsonio import finite_or_none

__all__ = ["NOT_COMPARABLE", "QUOTED", "Quoted", "our_measure", "quoted_section"]

NOT_COMPARABLE = "n/c"


@dataclass(frozen=True)
class Quoted:
    """A number the paper quotes in its prose, what it was measured under, and where our analyses write the same
    quantity."""

    ref: str  # paper_numbers.yaml reference (column ``value``)
    label: str
    file: str  # fnmatch pattern of the result file(s)
    keys: tuple[str, ...]  # the value's path in that JSON
    kind: str  # how ours is measured: saturation, gis, tsne or euclidean (our_measure)
    paper: Measure  # what the paper's number was measured under, as its sentence says (unstated: said so)
    scale: float = 1.0  # ours x scale is in the paper's unit (a share -> percent)
    # a ratio: (the denominator's paper_numbers.yaml reference, its path in the JSON); ours and the
    # paper's are both numerator / denominator, so the line is free of either side's scale
    per: tuple[str, tuple[str, ...]] | None = None
    # the differences of measurement a Δ may cross, {field: why, with its source}; the line prints them
    compare_across: dict[str, str] = field(default_factory=dict)


# §4 (aoe-acl2024.txt l.109-111): "33% of the text pairs show a similarity above 0.95 and 66% above 0.8", the training
# data MultiNLI + SNLI; the sentence names neither the model nor the similarity, so no model of ours is measured as
# the paper's number was: each line is ours for one model, without a Δ
_SATURATION = Measure(protocol="share of the NLI training pairs above the threshold, by a similarity §4 does not name",
                      pooling="not stated (§4)", recipe="not stated (§4 names no model)")
# Appendix B (l.371, l.409): "the average overlapping of [...] pairs for 1-gram, 2-gram, and 3-gram is 22, 12, and 9":
# counts of GIS pairs, no model; the tokenisation and the splits are not stated
_GIS = Measure(protocol="mean count of n-grams two texts of a GIS pair share (tokenisation and splits not stated, Appendix B)")
_GIS_ACROSS = {"protocol": "Appendix B states no tokenisation; ours is its plainest reading, lower-cased words split on "
                           "whitespace over every split (aoe/gis/stats.py)"}
# §5.3 / Fig. 3 (l.250): "we draw lines between 5 sample text pairs and observe that the lengths of the lines [...] are
# larger for imaginary text embeddings [...] The real distance is 11.8, while the imaginary distance is 22.1": the
# lengths of the pair's lines in the t-SNE plots of Fig. 3a (real) and 3b (imaginary) of AoE-BERT's embeddings. Ours of
# that definition (key tsne_*) is a draw of our t-SNE run of another model, and even the ratio imaginary : real (the
# paper's 22.1 / 11.8 = 1.87) is one pair's in one run, which another t-SNE seed moves from 0.03 to 5.4 (the CPU demo's
# model, ten seeds: bench/studies/results/fig3_tsne_stability.json): never a Δ. The Euclidean distances of the halves
# in the embedding space (euclidean_*) are another definition, scaled by the model's norms: no Δ either.
_FIG3 = "*/figures/fig3_saturation_geometry.json"
_FIG3_REAL, _FIG3_IM = "acl2024_quoted/fig3_ukraine_real_distance", "acl2024_quoted/fig3_ukraine_imaginary_distance"
_FIG3_PAPER = Measure(protocol="length of the pair's line in the paper's t-SNE plot of the halves (t-SNE settings not given)",
                      recipe="AoE-BERT (Fig. 3)")
_FIG3_DEFS = {
    "tsne": "length of the pair's line in the t-SNE plots (the paper's definition, Fig. 3a/3b)",
    "euclidean": "Euclidean distance between the pair's halves in the embedding space (not the paper's definition)",
}
_TSNE_WHY = "one pair in one t-SNE run, which another t-SNE seed moves from 0.03 to 5.4 on the CPU demo's model"


QUOTED: tuple[Quoted, ...] = (
    *(Quoted(f"acl2024_quoted/nli_pairs_above_{t}_percent", f"NLI pairs with cosine > {t} (%)",
             "*/analysis/saturation/*/*.json", ("all", "share_above", t), "saturation", _SATURATION, 100.0) for t in ("0.95", "0.8")),
    *(Quoted(f"acl2024_quoted/gis_{kind}_{n}gram_overlap", f"GIS {kind.replace('_', '-')} pairs: mean {n}-gram overlap",
             "*/analysis/gis/stats.json", ("fig8_ngram_overlap", str(n), kind, "mean_count"), "gis", _GIS, compare_across=_GIS_ACROSS)
      for kind in ("non_duplicate", "duplicate") for n in (1, 2, 3)),
    *(Quoted(_FIG3_IM, f"Fig. 3 Ukraine pair: imaginary ÷ real distance, {_FIG3_DEFS[key]}" + (f"; {_TSNE_WHY}" if key == "tsne" else ""),
             _FIG3, ("highlighted_pairs", "ukraine", f"{key}_im"), key, _FIG3_PAPER,
             per=(_FIG3_REAL, ("highlighted_pairs", "ukraine", f"{key}_re")))
      for key in ("tsne", "euclidean")),
    *(Quoted(f"acl2024_quoted/fig3_ukraine_{part}_distance", f"Fig. 3 Ukraine pair: {part} distance, {_FIG3_DEFS[key]}; absolute",
             _FIG3, ("highlighted_pairs", "ukraine", f"{key}_{half}"), key, _FIG3_PAPER)
      for key in ("tsne", "euclidean") for part, half in (("real", "re"), ("imaginary", "im"))),
)


def _dig(data: Any, keys: tuple[str, ...]) -> float | None:
    for k in keys:
        if not isinstance(data, dict) or k not in data:
            return None
        data = data[k]
    return finite_or_none(data)


def _model_name(data: Any, config: dict | None) -> str | None:
    """The model a result file measured, as the figures' titles name it (aoe.results.figures.display_label)."""
    from aoe.results.figures import display_label

    cell = (data.get("model") or {}).get("cell") if isinstance(data, dict) and isinstance(data.get("model"), dict) else None
    if not isinstance(cell, dict) or not cell.get("backbone"):
        return None
    return display_label(cell, config)


def our_measure(kind: str, data: Any, model: str | None) -> Measure:
    """What our number of quantity ``kind`` (:attr:`Quoted.kind`) in result ``data`` was measured under."""
    model_info = data.get("model") if isinstance(data, dict) and isinstance(data.get("model"), dict) else {}
    name = model or str(model_info.get("path") or "our model")
    pooling = str(model_info.get("pooling") or "not recorded")
    if kind == "saturation":
        return Measure(protocol="share of the NLI pairs whose cosine is above the threshold", pooling=pooling, recipe=name)
    if kind == "gis":
        return Measure(protocol="mean count of lower-cased whitespace word n-grams two texts of a GIS pair share, every split")
    if kind == "tsne":
        return Measure(protocol="length of the pair's line in our t-SNE plot of the halves", recipe=name)
    if kind == "euclidean":
        return Measure(protocol="Euclidean distance between the pair's halves in the embedding space", recipe=name)
    raise ValueError(f"quoted number: unknown kind {kind!r}; the kinds are saturation, gis, tsne, euclidean")


def _where(path: Path, model: str | None) -> str:
    if "analysis" in path.parts:
        where = "/".join(path.parts[path.parts.index("analysis") + 1:])
    else:
        where = "/".join(path.parts[path.parts.index("figures"):]) if "figures" in path.parts else path.name
    return f"`{where}`" + (f" ({md_cell(model)})" if model else "")


def quoted_section(files: list[str | Path] | None, numbers_file: str | Path | None = None, config: dict | None = None) -> str:
    """Ours beside each number the paper quotes in its prose (:data:`QUOTED`), one line per result file that measures it
    (e.g. one per backbone of the saturation analysis); Δ = ours − paper where the gate passes, ``n/c`` and what differs
    where not; a ratio line (:attr:`Quoted.per`) divides ours and the paper's alike. ``config`` (backbones, trainsets)
    names the model a line measured."""
    lines = []
    data = {Path(f): json.loads(Path(f).read_text()) for f in files or []}  # each file once: several quantities read it
    for q in QUOTED:
        paths = sorted(p for p in data if fnmatch.fnmatch(str(p.resolve()), q.file))
        if not paths:
            continue
        label, values, _ = paper_reference(q.ref, numbers_file, ["value"])
        paper = values["value"]
        if q.per is not None:
            den_label, den, _ = paper_reference(q.per[0], numbers_file, ["value"])
            paper = paper / den["value"] if finite_or_none(paper) is not None and den["value"] else None
            label = f"{label} ÷ {den_label}"
        for path in paths:
            ours = _dig(data[path], q.keys)
            ours = None if ours is None else ours * q.scale
            if q.per is not None:
                den_ours = _dig(data[path], q.per[1])
                ours = ours / den_ours if ours is not None and den_ours else None
            model = _model_name(data[path], config)
            try:
                named = like_for_like(our_measure(q.kind, data[path], model), q.paper, q.compare_across, f"{q.ref}: {path}")
            except UnlikeNumbers as err:
                delta, measured = NOT_COMPARABLE, f"otherwise: {err.difference}"
            else:
                delta = "–" if ours is None or paper is None else f"{ours - paper:+.2f}"
                measured = named_text(named) or "alike"
            paper_text = fmt_paper(paper) if q.per is None else fmt(paper)
            lines.append(f"| {md_cell(q.label)} | {_where(path, model)} | {fmt(ours)} | {paper_text} | {delta} | "
                         f"{md_cell(measured)} | {md_cell(label)} |")
    if not lines:
        return ""
    return "\n".join([
        "## Numbers the paper quotes in its prose", "",
        "One measurement each (no seeds, no flag); the sources' wording is in aoe/resources/paper_numbers.yaml (`acl2024_quoted`). "
        "Measured: what differs between the paper's measurement, as its sentence states it, and ours (aoe.publish.quoted). "
        f"{NOT_COMPARABLE}: measured otherwise, so no Δ: another model or one the paper does not name, another definition, "
        "or, for Fig. 3, a draw of a t-SNE run on either side, which another t-SNE seed moves by two orders of magnitude "
        "(bench/studies/results/fig3_tsne_stability.json).", "",
        "| Quantity | Our file | Ours | Paper | Δ | Measured | Paper source |", "|---|---|---|---|---|---|---|", *lines, "",
    ])
