"""SimCSE's SentEval on the transfer tasks: the numbers our implementation must equal, and the embedding behind them.

Used by ``tests/test_evaluate_transfer.py`` (the synthetic corpus in both modes, the real mirror in
fasttest mode) and ``bench/parity/transfer_parity.py`` (the real mirror in test mode: minutes); the
synthetic corpus and the mirror's sizes also by the readers' tests (``tests/test_data_transfer.py``).

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

Two corpora: the real data mirror (tests skip without it) and a small synthetic
corpus in SentEval's layout written by :func:`write_synthetic_senteval`, which
lets every protocol run in "test" mode within seconds and needs no mirror.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

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

# The transfer tasks' published sizes on the mirror: split -> samples.
MIRROR_SIZES = {
    "MR": {"all": 10662},
    "CR": {"all": 3775},
    "SUBJ": {"all": 10000},
    "MPQA": {"all": 10606},
    "SST2": {"train": 67349, "dev": 872, "test": 1821},
    "TREC": {"train": 5452, "test": 500},
    "MRPC": {"train": 4076, "test": 1725},
}


# --------------------------------------------------------------------------
# Synthetic corpus in SentEval's layout
# --------------------------------------------------------------------------

_COMMON = [f"w{i}" for i in range(60)]


def _sentence(rng: random.Random, cls: int, n_classes: int) -> list[str]:
    """1-12 tokens; a quarter are cue words of the class, a few of another class (label noise)."""
    words = []
    for _ in range(1 + int(rng.random() * 12)):
        r = rng.random()
        if r < 0.25:
            words.append(f"k{cls}x{int(rng.random() * 8)}")
        elif r < 0.30:
            words.append(f"k{int(rng.random() * n_classes)}x{int(rng.random() * 8)}")
        else:
            words.append(_COMMON[int(rng.random() * len(_COMMON))])
    return words


def write_synthetic_senteval(root: Path) -> Path:
    """Write a small deterministic corpus in SentEval's ``downstream`` layout under ``root``.

    Only ``random.Random.random`` is used, whose sequence Python guarantees, so
    the corpus is the same everywhere. It carries the quirks the readers must
    reproduce: latin-1 and UTF-8 text, blank lines (kept as empty samples), runs
    of spaces and tabs inside sentences, a NEL byte (``\\x85``) that
    ``str.splitlines`` treats as a line break, CRLF line endings, TREC fine
    labels, the MRPC header with its BOM, and many samples of equal length (so
    SentEval's stable sort matters). Returns ``root``.
    """
    rng = random.Random(20261123)

    def write(rel: str, text: str, encoding: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode(encoding))

    def lines(n: int, cls: int, n_classes: int = 2) -> list[str]:
        return [" ".join(_sentence(rng, cls, n_classes)) for _ in range(n)]

    sizes = {"MR": (60, 60), "CR": (70, 45), "SUBJ": (60, 60), "MPQA": (40, 80)}
    files = {"MR": ("MR/rt-polarity.pos", "MR/rt-polarity.neg"), "CR": ("CR/custrev.pos", "CR/custrev.neg"),
             "SUBJ": ("SUBJ/subj.objective", "SUBJ/subj.subjective"), "MPQA": ("MPQA/mpqa.pos", "MPQA/mpqa.neg")}
    for task, (n_pos, n_neg) in sizes.items():
        for rel, cls, n in zip(files[task], (1, 0), (n_pos, n_neg)):
            rows = lines(n, cls)
            if task == "MR" and cls == 1:
                rows[3] = "caf\u00e9  au\tlait " + rows[3]  # latin-1 text, a double space and a tab
            if task == "CR":
                rows[5] = ""  # blank line: an empty sample in SentEval
                if cls == 1:
                    rows[7] = rows[7] + " \x85 " + rows[8]  # NEL: str.splitlines makes two samples of it
            write(rel, "\n".join(rows) + "\n", "latin-1")

    for split, n in (("train", 240), ("dev", 60), ("test", 80)):
        rows = []
        for _ in range(n):
            label = int(rng.random() * 2)
            rows.append(f"{' '.join(_sentence(rng, label, 2))} \t{label}")
        rows[2] = f"na\u00efve {rows[2]}"  # UTF-8 text
        write(f"SST/binary/sentiment-{split}", "\n".join(rows) + "\n", "utf-8")

    coarse = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
    for rel, n, newline in (("TREC/train_5500.label", 300, "\n"), ("TREC/TREC_10.label", 60, "\r\n")):
        rows = []
        for _ in range(n):
            label = int(rng.random() * 6)
            rows.append(f"{coarse[label]}:fine{int(rng.random() * 3)} {' '.join(_sentence(rng, label, 6))}")
        rows[1] = rows[1] + " r\u00e9sum\u00e9"
        write(rel, newline.join(rows) + newline, "latin-1")

    for rel, n in (("MRPC/msr_paraphrase_train.txt", 200), ("MRPC/msr_paraphrase_test.txt", 80)):
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            label = 1 if rng.random() < 0.6 else 0
            first = _sentence(rng, 0, 1)
            if label:  # a paraphrase: the same words with about a fifth replaced
                second = [w if rng.random() < 0.8 else _COMMON[int(rng.random() * 60)] for w in first]
            else:
                second = _sentence(rng, 0, 1)
            rows.append(f"{label}\t{1000 + i}\t{5000 + i}\t{' '.join(first)}\t{' '.join(second)}")
        write(rel, "\n".join(rows) + "\n", "utf-8")
    return root
