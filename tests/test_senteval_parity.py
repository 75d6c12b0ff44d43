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

from aoe.data.mirror import resolve_downstream_root
from aoe.data.sts import read_sts
from aoe.evaluate.sts import TASKS, evaluate_sts
from tests.workflow_utils import MIRROR, needs_mirror

SENTEVAL_FLOAT64 = {
    "STS12": 33.165043467257476,
    "STS13": 44.25272373837016,
    "STS14": 44.2550676855367,
    "STS15": 59.842296451421895,
    "STS16": 48.6503403524715,
    "STSB": 42.08741732526403,
    "SICKR": 49.24460968870626,
}
# The same with the batcher returning float32, as SimCSE's (torch float32 pooler output) does.
SENTEVAL_FLOAT32 = {
    "STS12": 33.16157372938294,
    "STS13": 44.252723777705924,
    "STS14": 44.2550676855367,
    "STS15": 59.84229992803034,
    "STS16": 48.65033956507063,
    "STSB": 42.08741732526403,
    "SICKR": 49.24445619616775,
}


def hash_embed(sentence: str) -> np.ndarray:
    """Deterministic bag-of-tokens embedding: a fixed random integer vector per token, summed.

    Integer components keep every dot product exact whatever order a CPU's SIMD kernel sums
    in, and sqrt and division are correctly rounded, so the cosines, and with them the rank
    ties Spearman sees (identical sentences score exactly 1), are the same bits on every
    machine. Real-valued components made the reference numbers CPU-specific: a last-bit
    change between kernels broke ties and moved STS12 by 4e-4.
    """
    v = np.zeros(64)
    for tok in sentence.split():
        v += np.random.default_rng(zlib.crc32(tok.encode("utf8"))).integers(-8, 9, 64)
    return v


@pytest.mark.slow
@needs_mirror
@pytest.mark.parametrize("dtype, expected", [(np.float64, SENTEVAL_FLOAT64), (np.float32, SENTEVAL_FLOAT32)])
def test_sts_protocol_equals_senteval(dtype, expected):
    root = resolve_downstream_root(str(MIRROR))
    tables = {task: read_sts(root, dataset, "test") for task, dataset in TASKS.items()}
    result = evaluate_sts(lambda texts: np.stack([hash_embed(t) for t in texts]).astype(dtype), tables)
    for task, value in expected.items():
        assert result["tasks"][task]["spearman"] == pytest.approx(value, abs=1e-6), task
    assert result["avg"] == pytest.approx(np.mean(list(expected.values())), abs=1e-6)
