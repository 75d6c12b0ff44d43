"""Our STS protocol equals SimCSE's SentEval on the same embeddings.

The expected numbers were obtained by running SimCSE's fork of SentEval
(princeton-nlp/SimCSE at commit 49fa580, folder SentEval/, run beside the project,
never copied into it) on the data mirror with ``usepytorch=False`` and a batcher
that returns :func:`hash_embed` of ``' '.join(tokens)``, reading
``results[task]['all']['spearman']['all']`` for STS12-16 and
``results[task]['test']['spearman'].correlation`` for STS-B and SICK-R, exactly as
SimCSE's evaluation.py does; x100.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from aoe.data.sts import read_sts, resolve_downstream_root
from aoe.evaluate.sts import TASKS, evaluate_sts
from tests.workflow_utils import mirror_path

SENTEVAL_FLOAT64 = {
    "STS12": 30.895434826828193,
    "STS13": 44.36186855416564,
    "STS14": 44.04741898073514,
    "STS15": 58.57068472070036,
    "STS16": 50.00941846400428,
    "STSB": 40.5841630177489,
    "SICKR": 51.714273240393084,
}
# The same with the batcher returning float32, as SimCSE's (torch float32 pooler output) does.
SENTEVAL_FLOAT32 = {
    "STS12": 30.892215546424616,
    "STS13": 44.36186851473285,
    "STS14": 44.047403957009024,
    "STS15": 58.570651216956236,
    "STS16": 50.00941846400428,
    "STSB": 40.5841630177489,
    "SICKR": 51.71434875327184,
}


def hash_embed(sentence: str) -> np.ndarray:
    """Deterministic bag-of-tokens embedding: a fixed random vector per token, summed."""
    v = np.zeros(64)
    for tok in sentence.split():
        v += np.random.default_rng(zlib.crc32(tok.encode("utf8"))).standard_normal(64)
    return v


@pytest.mark.skipif(mirror_path() is None, reason="data mirror not found")
@pytest.mark.parametrize("dtype, expected", [(np.float64, SENTEVAL_FLOAT64), (np.float32, SENTEVAL_FLOAT32)])
def test_sts_protocol_equals_senteval(dtype, expected):
    root = resolve_downstream_root(str(mirror_path()))
    tables = {task: read_sts(root, dataset, "test") for task, dataset in TASKS.items()}
    result = evaluate_sts(lambda texts: np.stack([hash_embed(t) for t in texts]).astype(dtype), tables)
    for task, value in expected.items():
        assert result["tasks"][task]["spearman"] == pytest.approx(value, abs=1e-6), task
    assert result["avg"] == pytest.approx(np.mean(list(expected.values())), abs=1e-6)
