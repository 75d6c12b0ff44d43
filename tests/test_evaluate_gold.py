"""The in-domain scoring gold (issue 61): int(score) as angle-emb's AnglE.evaluate correlated, or the score as annotated.

The official package itself ran in bench/parity/gold_parity.py (angle-emb 0.1.1, 0.4.6 and 0.6.1 from PyPI, each in its own
venv, on STS-B test); its committed JSON keeps 0.1.1's gold and prediction vectors, which the pipeline's code scores
again here, with no venv and no model.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aoe.evaluate.run import GOLDS, gold_agreement, gold_scores
from aoe.evaluate.sts import sts_scores
from tests.workflow_utils import REPO

PARITY = REPO / "bench" / "parity" / "results" / "gold_parity.json"


def test_int_gold_truncates_toward_zero_as_python_int():
    scores = pd.Series([0.0, 0.4, 1.0, 2.6, 3.99, 5.0, -0.5, -1.5])
    assert gold_scores(scores, "int").tolist() == [float(int(x)) for x in scores]
    assert gold_scores(scores, "float").tolist() == scores.tolist()
    with pytest.raises(ValueError, match="gold must be one of float, int"):
        gold_scores(scores, "round")
    assert GOLDS == ("float", "int")


def test_gold_agreement_is_one_for_labels_truncation_cannot_change():
    assert gold_agreement(pd.Series([0.0, 1.0, 1.0, 0.0])) == 1.0
    assert 0.9 < gold_agreement(pd.Series(np.linspace(0, 5, 101))) < 1.0


def test_our_int_gold_spearman_is_angle_emb_011s_evaluate():
    """0.1.1's AnglE.evaluate on STS-B test: its gold vector is our int gold element by element, and our scoring of
    its own predictions is its number; the same predictions against the float gold score otherwise."""
    record = json.loads(PARITY.read_text())
    r = record["releases"]["0.1.1"]
    v = r["vectors"]
    table = pd.DataFrame({"score": v["scores"], "subset": "stsb"})
    assert len(table) == record["data"]["pairs"] == 1379
    assert np.array_equal(gold_scores(table["score"], "int"), np.asarray(v["official_gold"]))
    ours = sts_scores(np.asarray(v["official_pred"]), table.assign(score=gold_scores(table["score"], "int")))["spearman"]
    assert ours == pytest.approx(r["official_spearman_x100"], abs=1e-9)
    against_float = sts_scores(np.asarray(v["official_pred"]), table)["spearman"]
    assert against_float == pytest.approx(r["official_against_other_gold_x100"], abs=1e-9)
    assert abs(against_float - ours) > 0.5  # the gold, not rounding: points apart on the same predictions
    assert gold_agreement(table["score"]) == pytest.approx(record["data"]["gold_int_vs_float_spearman"], abs=1e-12)


def test_every_release_scored_the_gold_its_evaluate_reads():
    """0.1.1 and 0.4.6 (the papers' releases) correlate with int(score); 0.6.1 (0.4.9 on) with the raw labels."""
    record = json.loads(PARITY.read_text())
    assert record["pass"] is True
    assert {v: r["gold"] for v, r in record["releases"].items()} == {"0.1.1": "int", "0.4.6": "int", "0.6.1": "float"}
    for version, r in record["releases"].items():
        assert r["versions"]["angle_emb"] == version and r["gold_vector_equal"], version
        assert r["abs_diff_same_vectors"] <= record["tolerances"]["same_vectors_x100"], version
        assert r["abs_diff_own_embeddings"] <= record["tolerances"]["own_embeddings_x100"], version
