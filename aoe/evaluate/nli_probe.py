"""NLI probe (AoE Table 5): how much entailment information one pooled pair embedding carries.

Each (premise, hypothesis) is encoded as a single text ``premise [SEP] hypothesis`` (the
tokenizer adds ``[CLS]`` and the final ``[SEP]``), and SentEval's logistic regression
(:func:`aoe.evaluate.classifier.fit_split_classifier`: penalty chosen on dev, accuracy on
test) predicts the 3-way label from the frozen embedding. SNLI = test accuracy;
MultiNLI = mean of the dev-matched and dev-mismatched accuracies.

Two split protocols (``evaluation.nli_probe.protocol``):

* ``paper``: the classifier trains on the SNLI (resp. MultiNLI) rows of the NLI training
  data, is selected on SNLI dev (resp. a seeded 10,000-row hold-out of MultiNLI train,
  since MultiNLI's public dev sets are its test sets here), and is tested on SNLI test
  and on MultiNLI dev matched / mismatched;
* ``heldout`` (CPU presets, where only SNLI dev/test and MultiNLI dev are mirrored and
  SNLI dev trains the encoder): every probe set is one of SNLI test, MultiNLI dev
  matched, MultiNLI dev mismatched, cut by a seeded hash of the pair id into 60% train,
  20% dev, 20% test. No probe row is in the encoder's training data.
"""

from __future__ import annotations

import hashlib
import time
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

__all__ = ["PROBE_SETS", "heldout_split", "probe_texts", "nli_probe", "probe_sets", "probe_inputs"]

# probe result name -> the test table's (dataset, split)
PROBE_SETS = {"SNLI": ("snli", "test"), "MNLI-m": ("mnli", "dev_matched"), "MNLI-mm": ("mnli", "dev_mismatched")}
HELDOUT_SHARES = (0.6, 0.2, 0.2)


def heldout_split(table: pd.DataFrame, seed: int = 1111) -> dict[str, pd.DataFrame]:
    """60/20/20 train/dev/test by a seeded hash of ``pair_id``: stable under row order and file changes."""
    def bucket(pair_id: str) -> float:
        h = hashlib.sha256(f"{seed}:{pair_id}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64

    u = table["pair_id"].map(bucket)
    a, b = HELDOUT_SHARES[0], HELDOUT_SHARES[0] + HELDOUT_SHARES[1]
    return {
        "train": table[u < a].reset_index(drop=True),
        "dev": table[(u >= a) & (u < b)].reset_index(drop=True),
        "test": table[u >= b].reset_index(drop=True),
    }


def probe_texts(table: pd.DataFrame, sep: str) -> list[str]:
    """``premise [SEP] hypothesis`` per row of an nli3 table (sentence1, sentence2, score)."""
    return [f"{p} {sep} {h}" for p, h in zip(table["sentence1"], table["sentence2"])]


def nli_probe(
    encode: Callable[[list[str]], np.ndarray],
    sets: Mapping[str, Mapping[str, pd.DataFrame]],
    sep: str,
    mode: str = "test",
    seed: int = 1111,
) -> dict:
    """Probe accuracy per set; ``sets`` maps a PROBE_SETS name to its train/dev/test nli3 tables.

    Every distinct probe text is embedded once, in one call. Each set reports its
    classifier fits on stderr with an ETA (:mod:`aoe.util.progress`; a fit on AllNLI's
    SNLI rows takes minutes, and reports its epochs in between).
    """
    from aoe.evaluate.classifier import ClassifierParams, classifier_fits, fit_split_classifier
    from aoe.util.progress import progress

    clf_params = ClassifierParams.from_mode(mode)  # SimCSE's classifier settings, as for the transfer tasks
    texts = {name: {part: probe_texts(df, sep) for part, df in parts.items()} for name, parts in sets.items()}
    unique = list(dict.fromkeys(t for parts in texts.values() for part in parts.values() for t in part))
    start = time.perf_counter()
    emb = np.asarray(encode(unique))
    encode_seconds = time.perf_counter() - start
    row = {t: i for i, t in enumerate(unique)}
    results = {}
    for name, parts in sets.items():
        feats = {part: emb[[row[t] for t in texts[name][part]]] for part in ("train", "dev", "test")}
        # a writable copy: pandas hands out read-only views, which torch warns about
        labels = {part: np.array(parts[part]["score"], dtype=np.int64) for part in ("train", "dev", "test")}
        with progress(total=classifier_fits("split", clf_params), desc=f"nli probe {name}", unit="fit") as bar:
            res = fit_split_classifier(
                feats["train"], labels["train"], feats["dev"], labels["dev"], feats["test"], labels["test"],
                clf_params, seed=seed, n_classes=3, bar=bar,
            )
        results[name] = {**res, "ntrain": int(len(labels["train"]))}
    summary = {}
    if "SNLI" in results:
        summary["SNLI"] = results["SNLI"]["acc"]
    if "MNLI-m" in results and "MNLI-mm" in results:
        summary["MultiNLI"] = (results["MNLI-m"]["acc"] + results["MNLI-mm"]["acc"]) / 2
    return {
        "sets": results,
        "summary": summary,
        "protocol": {"name": "nli-probe", "text": f"premise {sep} hypothesis", "classifier_mode": mode, "seed": seed},
        "embedding": {"unique_texts": len(unique), "encode_seconds": encode_seconds},
    }


def probe_sets(
    protocol: str, tables: Mapping[str, pd.DataFrame], seed: int = 1111, mnli_dev_rows: int = 10000, max_rows: int | None = None,
    names: Iterable[str] | None = None,
) -> dict:
    """Train/dev/test tables per probe set, from nli3 tables keyed ``dataset/split`` (see the module docstring).

    ``max_rows`` (held-out protocol only) keeps a seeded subset of each source table, for quick CPU runs; ``names``
    (held-out protocol only): the probe sets to build, of :data:`PROBE_SETS` (default all), each from its own table.
    """
    if protocol == "heldout":
        def source(ds: str, split: str) -> pd.DataFrame:
            t = tables[f"{ds}/{split}"]
            return t.sample(n=max_rows, random_state=seed).sort_index() if max_rows and len(t) > max_rows else t

        chosen = list(PROBE_SETS) if names is None else list(names)
        unknown = [n for n in chosen if n not in PROBE_SETS]
        if unknown or not chosen:
            raise ValueError(f"NLI probe sets {unknown or chosen}: choose among {', '.join(PROBE_SETS)}")
        return {name: heldout_split(source(*PROBE_SETS[name]), seed) for name in chosen}
    if names is not None:
        raise ValueError("NLI probe: the paper protocol probes all three sets (its MultiNLI train is shared); names is for heldout")
    if protocol != "paper":
        raise ValueError(f"unknown NLI probe protocol {protocol!r}; valid: paper, heldout")
    train = tables["allnli/train"]
    source = train["pair_id"].str.split(":", n=1).str[0]
    snli_train = train[source == "SNLI"].reset_index(drop=True)
    mnli = train[source == "MultiNLI"]
    if snli_train.empty or mnli.empty:
        raise ValueError(f"allnli/train: expected SNLI and MultiNLI rows, found sources {sorted(source.unique())}")
    mnli_dev = mnli.sample(n=min(mnli_dev_rows, len(mnli) // 10), random_state=seed)
    mnli_train = mnli.drop(mnli_dev.index).reset_index(drop=True)
    mnli_dev = mnli_dev.reset_index(drop=True)
    return {
        "SNLI": {"train": snli_train, "dev": tables["snli/dev"], "test": tables["snli/test"]},
        "MNLI-m": {"train": mnli_train, "dev": mnli_dev, "test": tables["mnli/dev_matched"]},
        "MNLI-mm": {"train": mnli_train, "dev": mnli_dev, "test": tables["mnli/dev_mismatched"]},
    }


def probe_inputs(protocol: str) -> list[str]:
    """The ``dataset/split`` nli3 tables a protocol reads."""
    tests = [f"{ds}/{split}" for ds, split in PROBE_SETS.values()]
    return tests if protocol == "heldout" else ["allnli/train", "snli/dev", *tests]
