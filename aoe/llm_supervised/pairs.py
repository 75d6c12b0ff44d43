"""The texts to label, and the prepared pair tables built from them.

Both tables have the columns of every prepared table (``sentence1, sentence2, score,
split, subset``; aoe.data.sts.COLUMNS) and a ``{split}.manifest.json`` beside them:

* ``stsb_llm``: (text, similar sentence) score 1, subset ``similar``; (text, dissimilar
  sentence) score 0, subset ``dissimilar`` (AnglE §4.5: positive and negative pairs);
* ``stsb_self``: (text, text) score 1, subset ``identical``: SimCSE's unsupervised
  setting, where the two dropout masks of one text are its positive pair and the other
  texts of the batch its negatives (``simcse_sup`` on pairs; aoe.losses.baselines).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from aoe.data.contracts import check_table, read_table
from aoe.data.io import DataError, sha256_file, write_parquet_atomic
from aoe.data.sts import COLUMNS
from aoe.llm_supervised import KINDS, LLM_DATASET, SELF_DATASET, SPLIT
from aoe.llm_supervised.prompts import MALFORMED, normalise, parse_completion
from aoe.util.fsutil import atomic_file
from aoe.util.jsonio import write_json_atomic

__all__ = ["sample_texts", "write_texts", "read_texts", "label_generations", "build_llm_pairs", "build_self_pairs"]


def sample_texts(table: str | os.PathLike, column: str = "sentence1", n: int | None = None, seed: int = 0) -> tuple[list[str], dict]:
    """The unique non-empty texts of ``column`` (stripped, first occurrence order), or a seeded sample of ``n``.

    The sample keeps the table's order, so a larger ``n`` with the same seed is not a
    superset in general, but the same (table, n, seed) always gives the same texts.
    """
    table = Path(table)
    df = read_table(table)
    if column not in df.columns:
        raise DataError(f"{table}: no column {column!r} (has {list(df.columns)})")
    stripped = df[column].astype(str).str.strip()
    texts = list(dict.fromkeys(t for t in stripped if t))
    unique = len(texts)
    if n is not None and n < unique:
        keep = np.sort(np.random.default_rng(seed).choice(unique, size=n, replace=False))
        texts = [texts[i] for i in keep]
    info = {
        "table": str(table),
        "table_sha256": sha256_file(table),
        "column": column,
        "rows": len(df),
        "unique_texts": unique,
        "n_requested": n,
        "seed": seed,
        "texts": len(texts),
    }
    return texts, info


def write_texts(texts: list[str], info: dict, out: str | os.PathLike, manifest: str | os.PathLike) -> None:
    write_parquet_atomic(pd.DataFrame({"text": pd.Series(texts, dtype="str")}), out)
    write_json_atomic({**info, "sha256": sha256_file(out)}, manifest)


def read_texts(path: str | os.PathLike) -> list[str]:
    return pd.read_parquet(path)["text"].astype(str).tolist()


def _table(rows: list[tuple[str, str, float, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sentence1": pd.Series([r[0] for r in rows], dtype="str"),
            "sentence2": pd.Series([r[1] for r in rows], dtype="str"),
            "score": pd.Series([r[2] for r in rows], dtype="float64"),
            "split": pd.Series([SPLIT] * len(rows), dtype="str"),
            "subset": pd.Series([r[3] for r in rows], dtype="str"),
        },
        columns=list(COLUMNS),
    )


def label_generations(records: list[dict], size: int) -> tuple[pd.DataFrame, list[dict], dict]:
    """Parse every completion; return (pair table, records with each sentence's status, counts).

    ``records`` come from :func:`aoe.llm_supervised.generate.generate_all`. A sentence
    written for a text as similar and as dissimilar alike is dropped from both
    (``conflict``): it cannot be a positive and a negative of the same text.
    """
    by_text: dict[str, dict[str, dict]] = {}
    for rec in records:
        if rec["kind"] not in KINDS:
            raise ValueError(f"generation record of unknown kind {rec['kind']!r}")
        by_text.setdefault(rec["text"], {})[rec["kind"]] = rec
    annotated, rows = [], []
    counts: dict = {kind: {"completions": 0, "finish": Counter(), "status": Counter()} for kind in KINDS}
    for text, kinds in by_text.items():
        missing = [k for k in KINDS if k not in kinds]
        if missing:
            raise ValueError(f"text {text!r}: no {missing} generation")
        parsed = {
            kind: list(parse_completion(rec["completion"], text, size, stopped_by_length=rec["finish"] == "length").items)
            for kind, rec in kinds.items()
        }
        ok_keys = {kind: {normalise(s) for s, st in items if st == "ok"} for kind, items in parsed.items()}
        both = set.intersection(*ok_keys.values())
        for kind, items in parsed.items():
            items = [(s, "conflict" if st == "ok" and normalise(s) in both else st) for s, st in items]
            rec = kinds[kind]
            counts[kind]["completions"] += 1
            counts[kind]["finish"][rec["finish"]] += 1
            counts[kind]["status"].update(st for _, st in items)
            annotated.append({**rec, "sentences": [{"sentence": s, "status": st} for s, st in items]})
            rows.extend((text, s, KINDS[kind], kind) for s, st in items if st == "ok")
    df = _table(rows)
    summary = {
        kind: {
            "completions": c["completions"],
            "finish": dict(sorted(c["finish"].items())),
            "kept": c["status"].get("ok", 0),
            "dropped": {r: c["status"].get(r, 0) for r in MALFORMED},
        }
        for kind, c in counts.items()
    }
    summary["dropped_total"] = {r: sum(summary[k]["dropped"][r] for k in KINDS) for r in MALFORMED}
    summary["texts"] = len(by_text)
    kept_kinds: dict[str, set] = {}
    for text, _, _, kind in rows:
        kept_kinds.setdefault(text, set()).add(kind)
    summary["texts_with_both"] = sum(1 for kinds in kept_kinds.values() if len(kinds) == len(KINDS))
    return df, annotated, summary


def _write_table(df: pd.DataFrame, dataset: str, table: str | os.PathLike, manifest_path: str | os.PathLike, extra: dict) -> dict:
    if df.empty:
        raise DataError(f"{dataset}/{SPLIT}: no pairs left to write ({json.dumps(extra.get('counts', {}))})")
    check_table(df, table, written=True)
    write_parquet_atomic(df, table)
    manifest = {
        "dataset": dataset,
        "split": SPLIT,
        "rows": len(df),
        "rows_per_subset": {k: int(v) for k, v in df["subset"].value_counts(sort=False).items()},
        **extra,
        "table_sha256": sha256_file(table),
    }
    write_json_atomic(manifest, manifest_path)
    return manifest


def build_llm_pairs(
    generations: str | os.PathLike,
    generation_summary: str | os.PathLike,
    texts_manifest: str | os.PathLike,
    table: str | os.PathLike,
    manifest: str | os.PathLike,
    annotated_out: str | os.PathLike,
    dataset: str = LLM_DATASET,
) -> dict:
    """``dataset`` (a generator's table, ``stsb_llm`` by default): the labelled pairs, their manifest,
    and every completion with its sentences' status."""
    records = [json.loads(line) for line in Path(generations).read_text(encoding="utf-8").splitlines() if line.strip()]
    gen = json.loads(Path(generation_summary).read_text())
    df, annotated, counts = label_generations(records, gen["size"])
    with atomic_file(annotated_out) as fh:
        fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in annotated))
    extra = {
        "origin": {
            "kind": "llm_generated",
            "paper": "AnglE (arXiv 2309.12871) §4.5, Figure 5, Table 4",
            "generator": gen["generator"],
            "identity": gen["identity"],
        },
        "source": json.loads(Path(texts_manifest).read_text()),
        "prompts": gen["prompts"],
        "size": gen["size"],
        "generation": {k: v for k, v in gen.items() if k not in ("generator", "identity", "prompts", "size")},
        "counts": counts,
        "generations": {"path": str(annotated_out), "sha256": sha256_file(annotated_out), "raw": str(generations)},
    }
    return _write_table(df, dataset, table, manifest, extra)


def build_self_pairs(texts_path: str | os.PathLike, texts_manifest: str | os.PathLike, table: str | os.PathLike, manifest: str | os.PathLike) -> dict:
    """``stsb_self``: each text paired with itself, score 1 (unsupervised SimCSE on the same texts)."""
    texts = read_texts(texts_path)
    df = _table([(t, t, 1.0, "identical") for t in texts])
    extra = {
        "origin": {"kind": "self_pairs", "note": "each text with itself; dropout noise makes the two views differ in training"},
        "source": json.loads(Path(texts_manifest).read_text()),
    }
    return _write_table(df, SELF_DATASET, table, manifest, extra)
