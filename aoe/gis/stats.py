"""Statistics of a GIS pairs table (the paper's Table 7 and the data of Figures 7-9), and their plots.

:func:`compute_stats` works on any rows with ``text1``, ``text2`` and ``label``
(``split`` and ``repo`` optional), so it describes this collector's
``pairs.jsonl`` and the published ``WhereIsAI/github-issue-similarity`` alike
(use :func:`rows_from_splits` to tag the hub's splits; the hub rows have no
``repo`` column, so Figure 7's data is then ``None``). It returns a JSON-able
dict; the ``plot_*`` functions take that dict and never recompute anything, so
figures can be redrawn from a saved ``stats.json``.

Definitions (also written into the returned dict):

* **n-gram overlap** (Figure 8): both texts are lower-cased and split on
  whitespace; ``G_n(t)`` is the *set* of contiguous n-token tuples of ``t``.
  ``count = |G_n(text1) ∩ G_n(text2)|`` (the paper's axis is "Number of
  Overlapping", binned 0..50 and ">50") and ``jaccard = count / |G_n(text1) ∪
  G_n(text2)|`` (0 when both sets are empty). Computed for n = 1, 2, 3,
  separately for duplicate (label 1) and non-duplicate (label 0) pairs.
* **token length** (Figure 9, long-text share): ``len(tokenizer(text))`` for
  every ``text1`` and every ``text2`` of a split (a text in several pairs counts
  each time). The default tokenizer is whitespace splitting (``str.split``),
  which undercounts a BERT WordPiece tokenizer's length; the paper most likely
  used the BERT tokenizer (61.03 / 60.85 / 60.50 % of texts longer than 512).
  Pass e.g. ``lambda t: tok(t)["input_ids"]`` to reproduce that.
  Figure 9's histogram is over ``ln(max(length, 1))`` (the paper uses base e).
"""

from __future__ import annotations

import argparse
import codecs
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aoe.data.contracts import GIS_PAIRS, check_table
from aoe.data.io import DataError, text_lines

__all__ = [
    "SPLIT_ORDER",
    "compute_stats",
    "load_pairs",
    "main",
    "ngram_overlap",
    "plot_all",
    "plot_length_violins",
    "plot_ngram_overlap",
    "plot_pairs_per_repo",
    "rows_from_splits",
]

SPLIT_ORDER = ("train", "valid", "validation", "dev", "test")
NGRAM_ORDERS = (1, 2, 3)
# Figure 8 of the paper bins overlap counts up to 50 and lumps the rest as ">50".
MAX_OVERLAP_BIN = 50
_JACCARD_BINS = 20
_LOG_BIN_WIDTH = 0.25
_PAPER_LONG_SHARE = {"train": 0.6103, "valid": 0.6085, "test": 0.6050}


def _split_key(split: str) -> tuple[int, str]:
    return (SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER), split)


def load_pairs(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``pairs.jsonl`` file; a malformed line raises DataError naming the file and line, rows breaking
    the pairs' contract (:data:`aoe.data.contracts.GIS_PAIRS`: empty texts, a label not 0 or 1) naming the rows."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: pairs file not found")
    raw = path.read_bytes()
    # the collector writes UTF-8; a file edited or re-saved elsewhere may not be, and must name itself rather
    # than fail in a bare UnicodeDecodeError
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise DataError(f"{path}: UTF-16 (it starts with a UTF-16 byte-order mark), where JSON Lines are UTF-8; save it as UTF-8")
    # a UTF-8 byte-order mark (Windows editors write one) says nothing about the rows: dropped, not a line 1 that is not JSON
    raw = raw.removeprefix(codecs.BOM_UTF8)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}, line {line}: not UTF-8 ({exc.reason} at byte {exc.start}: Latin-1 or cp1252?), where JSON "
                        "Lines are UTF-8; save it as UTF-8") from None
    rows = []
    for line_no, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{path}, line {line_no}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}, line {line_no}: not a JSON object")
        missing = [k for k in ("text1", "text2", "label") if k not in row]
        if missing:
            raise DataError(f"{path}, line {line_no}: no {', '.join(missing)} (a pair is text1, text2, label)")
        bad = [k for k in ("text1", "text2") if not isinstance(row[k], str)]
        if bad:
            raise DataError(f"{path}, line {line_no}: {', '.join(bad)} must be a string")
        rows.append(row)
    if rows:  # an empty file is the caller's to explain (main: "no pairs")
        check_table(pd.DataFrame(rows), path, GIS_PAIRS)
    return rows


def rows_from_splits(splits: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Flatten ``{split: rows}`` (e.g. a ``datasets.DatasetDict``) into rows carrying their ``split``."""
    return [dict(row, split=name) for name, rows in splits.items() for row in rows]


def _word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = text.lower().split()
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def ngram_overlap(text1: str, text2: str, n: int) -> tuple[int, float]:
    """``(count, jaccard)`` of the word n-gram sets of two texts, as defined in the module docstring."""
    a, b = _word_ngrams(text1, n), _word_ngrams(text2, n)
    shared = len(a & b)
    union = len(a | b)
    return shared, (shared / union if union else 0.0)


def _label(row: Mapping[str, Any], index: int) -> int:
    value = row.get("label")
    try:
        label = int(float(value))  # the hub stores int64; some exports use floats or strings
    except (TypeError, ValueError):
        label = -1
    if label not in (0, 1) or float(value) != label:
        raise DataError(f"row {index}: label {value!r} is not 0 or 1")
    return label


def _summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "p05": 0.0, "p25": 0.0, "p75": 0.0, "p95": 0.0, "min": 0.0, "max": 0.0}
    arr = np.asarray(values, dtype=float)
    q = np.quantile(arr, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {
        "mean": float(arr.mean()),
        "median": float(q[2]),
        "p05": float(q[0]),
        "p25": float(q[1]),
        "p75": float(q[3]),
        "p95": float(q[4]),
        "min": float(arr.min()),
        "max": float(arr.max()),
    }


def compute_stats(
    rows: Iterable[Mapping[str, Any]],
    *,
    tokenizer: Callable[[str], Sequence[Any]] | None = None,
    tokenizer_name: str | None = None,
    long_threshold: int = 512,
) -> dict[str, Any]:
    """Table 7, Figure 7/8/9 data and the long-text share per split, as a JSON-able dict.

    ``rows`` need ``text1``, ``text2`` and ``label`` (0/1); ``split`` defaults to
    ``"all"`` and ``repo`` is optional (Figure 7's data is ``None`` unless every
    row has one). ``tokenizer`` maps a text to its tokens for lengths (default:
    ``str.split``); ``tokenizer_name`` labels it in the output. Texts longer than
    ``long_threshold`` tokens count as long. See the module docstring for the
    exact definitions.
    """
    tokenize = tokenizer or str.split
    table: dict[str, Counter[str]] = {}
    per_repo: dict[str, Counter[str]] | None = {}
    overlap_counts: dict[int, dict[int, list[int]]] = {n: {0: [], 1: []} for n in NGRAM_ORDERS}
    overlap_jaccard: dict[int, dict[int, list[float]]] = {n: {0: [], 1: []} for n in NGRAM_ORDERS}
    lengths: dict[str, list[int]] = {}
    empty_texts = 0
    n_rows = 0
    for index, row in enumerate(rows):
        n_rows += 1
        label = _label(row, index)
        split = str(row.get("split") or "all")
        text1, text2 = str(row.get("text1") or ""), str(row.get("text2") or "")
        kind = "positive" if label else "negative"
        table.setdefault(split, Counter())[kind] += 1
        repo = row.get("repo")
        if per_repo is not None and isinstance(repo, str) and repo:
            per_repo.setdefault(repo, Counter())[kind] += 1
        else:
            per_repo = None
        for n in NGRAM_ORDERS:
            count, jaccard = ngram_overlap(text1, text2, n)
            overlap_counts[n][label].append(count)
            overlap_jaccard[n][label].append(jaccard)
        for text in (text1, text2):
            empty_texts += not text.strip()
            lengths.setdefault(split, []).append(len(tokenize(text)))
    splits = sorted(table, key=_split_key)

    def counts(c: Counter[str]) -> dict[str, int]:
        return {"positive": c["positive"], "negative": c["negative"], "total": c["positive"] + c["negative"]}

    table7 = {s: counts(table[s]) for s in splits}
    table7["all"] = counts(sum(table.values(), Counter()))
    fig7 = None
    if per_repo:
        fig7 = {repo: counts(c) for repo, c in sorted(per_repo.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))}
    fig8: dict[str, Any] = {}
    count_bins = [str(i) for i in range(MAX_OVERLAP_BIN + 1)] + [f">{MAX_OVERLAP_BIN}"]
    jaccard_edges = np.linspace(0.0, 1.0, _JACCARD_BINS + 1)
    for n in NGRAM_ORDERS:
        fig8[str(n)] = {}
        for label, name in ((1, "duplicate"), (0, "non_duplicate")):
            cs, js = overlap_counts[n][label], overlap_jaccard[n][label]
            hist = Counter(min(c, MAX_OVERLAP_BIN + 1) for c in cs)
            fig8[str(n)][name] = {
                "pairs": len(cs),
                "mean_count": float(np.mean(cs)) if cs else 0.0,
                "median_count": float(np.median(cs)) if cs else 0.0,
                "mean_jaccard": float(np.mean(js)) if js else 0.0,
                "median_jaccard": float(np.median(js)) if js else 0.0,
                "count_histogram": {"bins": count_bins, "counts": [hist[i] for i in range(MAX_OVERLAP_BIN + 2)]},
                "jaccard_histogram": {
                    "edges": [round(float(e), 6) for e in jaccard_edges],
                    "counts": [int(c) for c in np.histogram(js, bins=jaccard_edges)[0]],
                },
            }
    all_lengths = [x for s in splits for x in lengths.get(s, [])]
    top = math.log(max(all_lengths, default=1) or 1)
    edges = np.arange(0.0, math.ceil(top / _LOG_BIN_WIDTH + 1) * _LOG_BIN_WIDTH + 1e-9, _LOG_BIN_WIDTH)
    fig9: dict[str, Any] = {}
    long_share: dict[str, float] = {}
    for s in splits:
        ls = lengths.get(s, [])
        logs = [math.log(max(x, 1)) for x in ls]
        long_share[s] = (sum(1 for x in ls if x > long_threshold) / len(ls)) if ls else 0.0
        fig9[s] = {
            "texts": len(ls),
            "tokens": _summary(ls),
            "log_tokens": _summary(logs),
            "log_histogram": {
                "edges": [round(float(e), 6) for e in edges],
                "counts": [int(c) for c in np.histogram(logs, bins=edges)[0]],
            },
            "share_longer_than_threshold": long_share[s],
        }
    return {
        "pairs": n_rows,
        "splits": splits,
        "tokenizer": tokenizer_name or ("whitespace (str.split)" if tokenizer is None else getattr(tokenizer, "__name__", "custom")),
        "long_threshold": long_threshold,
        "definitions": {
            "ngram_overlap_count": "|G_n(text1) & G_n(text2)|, G_n = set of word n-grams of the lower-cased, whitespace-split text",
            "ngram_overlap_jaccard": "count / |G_n(text1) | G_n(text2)| (0 if both are empty)",
            "token_length": "len(tokenizer(text)) for every text1 and text2 of the split",
            "log_histogram": "histogram of ln(max(token_length, 1))",
            "long_text": f"token_length > {long_threshold}",
        },
        "table7": table7,
        "fig7_pairs_per_repo": fig7,
        "fig8_ngram_overlap": fig8,
        "fig9_token_lengths": fig9,
        "long_text_share": long_share,
        "paper_long_text_share": dict(_PAPER_LONG_SHARE),
        "empty_texts": empty_texts,
    }


# -- plots (matplotlib, no pyplot: no global backend state) ------------------------------


def _save(fig: Any, out_dir: str | Path, name: str) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    for path in paths:
        # Figure.savefig picks the Agg canvas for PNG and the PDF backend for PDF.
        fig.savefig(path, dpi=200, bbox_inches="tight")
    return paths


def plot_pairs_per_repo(stats: Mapping[str, Any], out_dir: str | Path, *, name: str = "gis_fig7_pairs_per_repo") -> list[Path]:
    """Figure 7: stacked bars of positive/negative pairs per repository; returns the PDF and PNG paths."""
    from matplotlib.figure import Figure

    data = stats.get("fig7_pairs_per_repo")
    if not data:
        raise ValueError("these statistics have no per-repository counts (rows without a 'repo' field)")
    repos = list(data)
    pos = [data[r]["positive"] for r in repos]
    neg = [data[r]["negative"] for r in repos]
    fig = Figure(figsize=(max(6.0, 0.22 * len(repos) + 1.5), 3.6))
    ax = fig.add_subplot()
    x = np.arange(len(repos))
    ax.bar(x, pos, color="0.25", edgecolor="black", linewidth=0.4, label="duplicate (label 1)")
    ax.bar(x, neg, bottom=pos, color="0.85", edgecolor="black", linewidth=0.4, hatch="///", label="non-duplicate (label 0)")
    ax.set_xticks(x, repos, rotation=90, fontsize=6)
    ax.set_ylabel("pairs")
    ax.set_xlim(-0.6, len(repos) - 0.4)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, out_dir, name)


def plot_ngram_overlap(stats: Mapping[str, Any], out_dir: str | Path, *, name: str = "gis_fig8_ngram_overlap") -> list[Path]:
    """Figure 8: share of pairs per n-gram overlap count (0..50, >50), duplicates vs non-duplicates, n = 1..3."""
    from matplotlib.figure import Figure

    data = stats["fig8_ngram_overlap"]
    orders = sorted(data, key=int)
    fig = Figure(figsize=(3.2 * len(orders), 3.0))
    axes = fig.subplots(1, len(orders), sharey=True, squeeze=False)[0]
    styles = {
        "non_duplicate": {"color": "0.75", "hatch": "///", "label": "non-duplicate"},
        "duplicate": {"color": "0.15", "hatch": None, "label": "duplicate"},
    }
    for ax, n in zip(axes, orders):
        bins = data[n]["duplicate"]["count_histogram"]["bins"]
        x = np.arange(len(bins))
        for offset, kind in ((-0.2, "non_duplicate"), (0.2, "duplicate")):
            part = data[n][kind]
            total = max(part["pairs"], 1)
            share = np.asarray(part["count_histogram"]["counts"], dtype=float) / total
            style = styles[kind]
            ax.bar(
                x + offset,
                share,
                width=0.4,
                color=style["color"],
                hatch=style["hatch"],
                edgecolor="black",
                linewidth=0.2,
                label=f"{style['label']} (mean {part['mean_count']:.1f})",
            )
        # Every tenth count, then ">50"; the tick at 50 would collide with it.
        ticks = list(range(0, len(bins) - 2, 10)) + [len(bins) - 1]
        ax.set_xticks(ticks, [bins[t] for t in ticks])
        ax.set_title(f"{n}-gram")
        ax.set_xlabel("number of overlapping n-grams")
        ax.legend(frameon=False, fontsize=7)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].set_ylabel("share of pairs")
    return _save(fig, out_dir, name)


def plot_length_violins(stats: Mapping[str, Any], out_dir: str | Path, *, name: str = "gis_fig9_token_lengths") -> list[Path]:
    """Figure 9: violins of ln(token length) per split, drawn from the stored histograms, with ln(threshold) dashed."""
    from matplotlib.figure import Figure

    data = stats["fig9_token_lengths"]
    splits = list(stats.get("splits") or data)
    vpstats = []
    for split in splits:
        hist = data[split]["log_histogram"]
        edges = np.asarray(hist["edges"], dtype=float)
        counts = np.asarray(hist["counts"], dtype=float)
        centers = (edges[:-1] + edges[1:]) / 2
        # A light binomial smoothing turns the stored histogram into a violin-like density.
        smooth = np.convolve(counts, [0.25, 0.5, 0.25], mode="same")
        density = smooth / smooth.max() if smooth.max() > 0 else smooth
        # Zero-density bins would draw a hairline outside the data.
        nonzero = np.flatnonzero(density) if density.any() else np.arange(len(density))
        centers, density = centers[nonzero[0] : nonzero[-1] + 1], density[nonzero[0] : nonzero[-1] + 1]
        summary = data[split]["log_tokens"]
        vpstats.append(
            {
                "coords": centers,
                "vals": density,
                "mean": summary["mean"],
                "median": summary["median"],
                "min": summary["min"],
                "max": summary["max"],
            }
        )
    fig = Figure(figsize=(1.6 * len(splits) + 2.0, 3.4))
    ax = fig.add_subplot()
    parts = ax.violin(vpstats, positions=range(len(splits)), widths=0.8, showmeans=False, showextrema=True, showmedians=True)
    for body in parts["bodies"]:
        body.set_facecolor("0.8")
        body.set_edgecolor("black")
        body.set_alpha(1.0)
    for key in ("cmins", "cmaxes", "cbars", "cmedians"):
        if key in parts:
            parts[key].set_color("black")
    threshold = stats.get("long_threshold", 512)
    top = max([math.log(threshold)] + [v["max"] for v in vpstats])
    ax.set_ylim(0, top + 0.8)  # room above the threshold line for the legend
    ax.axhline(math.log(threshold), color="black", linestyle="--", linewidth=1.0, label=f"ln({threshold})")
    labels = [f"{s}\n{100 * data[s]['share_longer_than_threshold']:.1f}% > {threshold}" for s in splits]
    ax.set_xticks(range(len(splits)), labels)
    ax.set_ylabel(f"ln(token length), {stats.get('tokenizer', 'tokens')}", fontsize=8)
    ax.legend(frameon=False, fontsize=8, loc="upper right")
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, out_dir, name)


def plot_all(stats: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Every figure the statistics allow (Figure 7 needs per-repository counts); returns the written paths."""
    paths: list[Path] = []
    if stats.get("fig7_pairs_per_repo"):
        paths += plot_pairs_per_repo(stats, out_dir)
    paths += plot_ngram_overlap(stats, out_dir)
    paths += plot_length_violins(stats, out_dir)
    return paths


def _hf_tokenizer(name: str) -> Callable[[str], Sequence[int]]:
    """Token ids of a Hugging Face tokenizer, special tokens included (what a model's 512 limit counts)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    # Lengths beyond the model's limit are the point here; silence the warning about them.
    tok.model_max_length = 1 << 30

    def tokenize(text: str) -> Sequence[int]:
        return tok(text, add_special_tokens=True)["input_ids"]

    return tokenize


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m aoe.gis.stats PAIRS.jsonl [--out stats.json] [--plots DIR] [--tokenizer NAME]``."""
    parser = argparse.ArgumentParser(prog="python -m aoe.gis.stats", description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", help="pairs.jsonl (text1, text2, label[, split, repo] per line)")
    parser.add_argument("--out", help="write the statistics here as JSON (default: print them)")
    parser.add_argument("--plots", help="write Figures 7-9 (PDF and PNG) into this folder")
    parser.add_argument("--tokenizer", help="Hugging Face tokenizer name or folder for token lengths (default: whitespace)")
    args = parser.parse_args(argv)
    try:
        rows = load_pairs(args.pairs)
        if not rows:  # statistics of nothing would print means of 0.0
            raise DataError(f"{args.pairs}: no pairs (the file is empty)")
        tokenizer = _hf_tokenizer(args.tokenizer) if args.tokenizer else None
        stats = compute_stats(rows, tokenizer=tokenizer, tokenizer_name=args.tokenizer)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.out:
        from aoe.util.jsonio import write_json_atomic

        write_json_atomic(stats, args.out)
    else:
        json.dump(stats, sys.stdout, indent=2)
        print()
    if args.plots:
        for path in plot_all(stats, args.plots):
            print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
