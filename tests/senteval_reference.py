"""SimCSE's SentEval on the transfer tasks: the numbers our implementation must equal, and the embedding behind them.

Used by ``tests/test_transfer.py`` (the synthetic corpus in both modes, the real mirror in
fasttest mode) and ``bench/transfer_parity.py`` (the real mirror in test mode: minutes).

Expected numbers were obtained on 2026-11-22 by running SimCSE's fork of SentEval
(princeton-nlp/SimCSE at commit 49fa580, folder SentEval/, extracted to /tmp beside
the project and never copied into it) on this machine's CPU, with the repository's
virtual environment (torch 2.13.0+cpu, scikit-learn 1.9.1, numpy 2.4.6), one torch
thread, and SimCSE's ``evaluation.py`` settings for ``--mode fasttest`` / ``--mode
test``. SentEval needs CUDA and Python < 3.11, so it ran under runtime shims only:
``inspect.getargspec = inspect.getfullargspec``; ``Tensor.cuda`` / ``Module.cuda``
as identities; in ``senteval.tools.classifier``, ``torch.device('cuda')`` mapped
to the CPU and ``isinstance(x, torch.cuda.FloatTensor)`` answered as "x is a
float32 tensor" (its meaning on a GPU run). Its batcher returned
:func:`hash_embed` (dim 32) of ``' '.join(tokens)``, cast to float32 as SimCSE's
batcher returns (float64 where a test says so). SentEval's ``acc``/``devacc``
(and MRPC's ``f1``) are recorded as it returned them (x100, rounded to 2
decimals by SentEval), and our implementation must equal them exactly.

Two corpora (tests/test_transfer.py): the real data mirror (tests skip without it) and a small synthetic
corpus in SentEval's layout written by :func:`write_synthetic_senteval`, which
lets every protocol run in "test" mode within seconds and needs no mirror.
"""

from __future__ import annotations

import hashlib

import numpy as np

DIM = 32


def hash_embed(sentence: str, dim: int = DIM) -> np.ndarray:
    """Deterministic bag-of-tokens embedding: a fixed pseudo-random vector per token, summed.

    Each token's vector is SHAKE-256 of its UTF-8 bytes read as little-endian
    uint32, scaled to [-0.5, 0.5): identical on every platform and NumPy version.
    """
    v = np.zeros(dim)
    for tok in sentence.split():
        v += np.frombuffer(hashlib.shake_256(tok.encode("utf-8")).digest(4 * dim), dtype="<u4") / 2.0**32 - 0.5
    return v


def encoder(dtype=np.float32, calls: list | None = None):
    """An ``encode`` function over :func:`hash_embed`; records its inputs in ``calls`` if given."""

    def encode(texts: list[str]) -> np.ndarray:
        if calls is not None:
            calls.append(list(texts))
        return np.stack([hash_embed(t) for t in texts]).astype(dtype)

    return encode


# --------------------------------------------------------------------------
# Expected numbers (see the module docstring for how they were obtained)
# --------------------------------------------------------------------------

# SentEval on the synthetic corpus: {(mode, classifier): {task: {key: value}}}.
# "sklearn" is usepytorch=False (then only kfold differs between the modes).
# The same numbers came out with a float64 batcher.
SENTEVAL_SYNTHETIC = {
    ("fasttest", "pytorch"): {
        "MR": {"devacc": 73.3, "acc": 65.0},
        "CR": {"devacc": 83.69, "acc": 79.24},
        "SUBJ": {"devacc": 70.21, "acc": 57.5},
        "MPQA": {"devacc": 80.4, "acc": 80.0},
        "SST2": {"devacc": 86.67, "acc": 77.5},
        "TREC": {"devacc": 49.0, "acc": 55.0},
        "MRPC": {"devacc": 93.5, "acc": 88.75, "f1": 89.89},
    },
    ("test", "pytorch"): {
        "MR": {"devacc": 67.24, "acc": 62.5},
        "CR": {"devacc": 74.26, "acc": 61.97},
        "SUBJ": {"devacc": 67.19, "acc": 60.83},
        "MPQA": {"devacc": 71.04, "acc": 49.17},
        "SST2": {"devacc": 81.67, "acc": 71.25},
        "TREC": {"devacc": 45.67, "acc": 26.67},
        "MRPC": {"devacc": 91.0, "acc": 87.5, "f1": 88.37},
    },
    ("fasttest", "sklearn"): {
        "MR": {"devacc": 70.15, "acc": 64.17},
        "CR": {"devacc": 81.06, "acc": 80.15},
        "SUBJ": {"devacc": 66.86, "acc": 60.83},
        "MPQA": {"devacc": 79.36, "acc": 79.17},
        "SST2": {"devacc": 81.67, "acc": 78.75},
        "TREC": {"devacc": 49.0, "acc": 53.33},
        "MRPC": {"devacc": 91.5, "acc": 88.75, "f1": 90.32},
    },
    ("test", "sklearn"): {
        "MR": {"devacc": 69.54, "acc": 67.5},
        "CR": {"devacc": 82.04, "acc": 73.94},
        "SUBJ": {"devacc": 65.3, "acc": 64.17},
        "MPQA": {"devacc": 82.22, "acc": 80.83},
        "SST2": {"devacc": 81.67, "acc": 78.75},
        "TREC": {"devacc": 49.0, "acc": 53.33},
        "MRPC": {"devacc": 92.5, "acc": 88.75, "f1": 90.32},
    },
}

# SentEval on the real data mirror (PyTorch classifier, float32 batcher).
SENTEVAL_MIRROR = {
    "fasttest": {
        "MR": {"devacc": 55.31, "acc": 55.06},
        "CR": {"devacc": 65.14, "acc": 63.52},
        "SUBJ": {"devacc": 67.71, "acc": 66.41},
        "MPQA": {"devacc": 68.59, "acc": 68.34},
        "SST2": {"devacc": 53.9, "acc": 53.16},
        "TREC": {"devacc": 46.33, "acc": 46.6},
        "MRPC": {"devacc": 69.28, "acc": 68.23, "f1": 80.06},
    },
    "test": {
        "CR": {"devacc": 65.11, "acc": 64.42},
        "SST2": {"devacc": 55.16, "acc": 55.96},
        "TREC": {"devacc": 47.03, "acc": 42.6},
        "MRPC": {"devacc": 69.7, "acc": 69.45, "f1": 79.37},
    },
}
