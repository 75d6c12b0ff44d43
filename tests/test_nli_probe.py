"""NLI probe: split protocols and the classifier on embeddings that carry (or do not carry) the label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aoe.evaluate.nli_probe import heldout_split, nli_probe, probe_sets


def _nli3(n: int, prefix: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sentence1": [f"{prefix} premise {i}" for i in range(n)],
            "sentence2": [f"{prefix} hypothesis {i}" for i in range(n)],
            "score": [float(i % 3) for i in range(n)],
            "pair_id": [f"{prefix}:{i}" for i in range(n)],
        }
    )


def test_heldout_split_is_a_seeded_partition():
    table = _nli3(3000, "SNLI")
    parts = heldout_split(table, seed=1)
    ids = [set(p["pair_id"]) for p in parts.values()]
    assert sum(map(len, ids)) == 3000 and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert abs(len(parts["train"]) / 3000 - 0.6) < 0.05 and abs(len(parts["test"]) / 3000 - 0.2) < 0.05
    # independent of row order, dependent on the seed
    again = heldout_split(table.sample(frac=1, random_state=0), seed=1)
    assert set(again["test"]["pair_id"]) == ids[2]
    assert set(heldout_split(table, seed=2)["test"]["pair_id"]) != ids[2]
    small = probe_sets("heldout", {"snli/test": table, "mnli/dev_matched": table, "mnli/dev_mismatched": table}, max_rows=300)
    assert sum(len(p) for p in small["SNLI"].values()) == 300


def test_paper_protocol_trains_on_the_nli_training_rows():
    train = pd.concat([_nli3(600, "SNLI"), _nli3(900, "MultiNLI")], ignore_index=True)
    tables = {"allnli/train": train, "snli/dev": _nli3(30, "sd"), "snli/test": _nli3(30, "st"),
              "mnli/dev_matched": _nli3(30, "mm"), "mnli/dev_mismatched": _nli3(30, "mmm")}
    sets = probe_sets("paper", tables, seed=0)
    assert len(sets["SNLI"]["train"]) == 600 and sets["SNLI"]["test"] is tables["snli/test"]
    mnli = sets["MNLI-m"]
    assert len(mnli["dev"]) == 90 and len(mnli["train"]) == 810  # a tenth held out for model selection
    assert not set(mnli["dev"]["pair_id"]) & set(mnli["train"]["pair_id"])
    with pytest.raises(ValueError, match="unknown NLI probe protocol"):
        probe_sets("other", tables)


def test_probe_reads_the_label_from_the_embedding_only_when_it_is_there(capsys):
    rng = np.random.default_rng(0)
    sets = {name: heldout_split(_nli3(600, name)) for name in ("SNLI", "MNLI-m", "MNLI-mm")}
    label_of = {f"{p} [SEP] {h}": int(s) for parts in sets.values() for df in parts.values()
                for p, h, s in zip(df["sentence1"], df["sentence2"], df["score"])}
    seen = []

    def informative(texts):
        seen.append(len(texts))
        return np.stack([np.eye(3)[label_of[t]] * 3 + rng.normal(0, 0.3, 3) for t in texts])

    out = nli_probe(informative, sets, sep="[SEP]", mode="fasttest")
    assert seen == [1800]  # every text once, in one call
    assert out["sets"]["SNLI"]["acc"] > 95 and out["summary"]["MultiNLI"] > 95
    err = capsys.readouterr().err  # a progress line per set, counted in classifier fits (one per penalty), with an ETA
    for name in ("SNLI", "MNLI-m", "MNLI-mm"):
        assert f"nli probe {name}: 0/4 fit (0%), elapsed 00:00, ETA ?" in err and f"nli probe {name}: 4/4 fit (100%)" in err
    noise = nli_probe(lambda t: rng.normal(size=(len(t), 3)), sets, sep="[SEP]", mode="fasttest")
    assert noise["summary"]["SNLI"] < 50  # chance is 33%


def test_a_heldout_probe_of_some_sets_builds_those_only():
    """names: the held-out protocol's probe sets to build, each from its own table (the real-model cell probes SNLI
    alone); an unknown name, none, or names under the paper protocol are refused, naming the sets."""
    table = _nli3(300, "SNLI")
    sets = probe_sets("heldout", {"snli/test": table}, names=["SNLI"])
    assert list(sets) == ["SNLI"] and sum(len(s) for s in sets["SNLI"].values()) == 300
    with pytest.raises(ValueError, match="choose among SNLI, MNLI-m, MNLI-mm"):
        probe_sets("heldout", {"snli/test": table}, names=["snli"])
    with pytest.raises(ValueError, match="choose among"):
        probe_sets("heldout", {"snli/test": table}, names=[])
    with pytest.raises(ValueError, match="names is for heldout"):
        probe_sets("paper", {"snli/test": table}, names=["SNLI"])

