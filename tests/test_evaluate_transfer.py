"""SentEval transfer tasks: protocol, SentEval's batches, and parity with SimCSE's SentEval.

The numbers our implementation must equal, and how they were obtained, are in
``tests/senteval_reference.py``. Two corpora: the real data mirror (tests skip without
it) and a small synthetic corpus in SentEval's layout written by
:func:`tests.senteval_reference.write_synthetic_senteval`, which lets every protocol run in "test"
mode within seconds and needs no mirror (fixtures ``mirror_data`` and ``synthetic``, tests/conftest.py;
the readers' own tests are tests/test_data_transfer.py). The suite checks every SentEval classifier
path on the synthetic corpus (every task in fasttest mode, four in test mode) and two tasks on the mirror in
fasttest mode, TREC and MRPC. Every task in both modes, on the mirror and the synthetic corpus, is
``bench/parity/transfer_parity.py``, whose result is committed in ``bench/parity/results/transfer_parity.json``
(test_the_bench_covers_every_mirror_task_the_suite_leaves_out reads it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from aoe.data.transfer import TRANSFER_TASKS, TransferData, read_transfer
from aoe.evaluate.classifier import MODES, ClassifierParams, classifier_fits, fit_split_classifier
from aoe.evaluate.transfer import evaluate_transfer
from tests.senteval_reference import SENTEVAL_MIRROR, SENTEVAL_SYNTHETIC, encoder, write_synthetic_senteval
from tests.workflow_utils import REPO

sys.path.insert(0, str(REPO / "bench" / "parity"))
from transfer_parity import mirror_sizes, protocol_sizes  # noqa: E402


def _check(result: dict, expected: dict) -> None:
    for key, value in expected.items():
        assert result[key] == value, (key, result[key], value)


# --------------------------------------------------------------------------
# Evaluator behaviour
# --------------------------------------------------------------------------


def test_modes_are_simcses():
    assert MODES["test"] == {"kfold": 10, "nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4}
    assert MODES["fasttest"] == {
        "kfold": 5, "nhid": 0, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2,
    }
    # SimCSE evaluation.py's params dict, as SentEval receives it.
    simcse = {"task_path": "data", "usepytorch": True, "kfold": 10,
              "classifier": {"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4}}
    assert ClassifierParams.from_mapping(simcse) == ClassifierParams.from_mode("test")
    with pytest.raises(KeyError, match="lr"):
        ClassifierParams.from_mapping({"classifier": {"nhid": 0, "lr": 0.1}})
    with pytest.raises(ValueError, match="unknown transfer mode"):
        ClassifierParams.from_mode("dev")


def test_each_sentence_is_encoded_once(synthetic, one_thread):
    calls: list[list[str]] = []
    result = evaluate_transfer(encoder(calls=calls), ["MRPC", "TREC"], mode="fasttest", data=synthetic)
    assert len(calls) == 1
    sent = calls[0]
    assert len(sent) == len(set(sent))
    expected = {s for t in ("MRPC", "TREC") for split in synthetic[t].splits.values()
                for s in split.sentences + (split.sentences2 or [])}
    assert set(sent) == expected
    assert list(result["tasks"]) == ["MRPC", "TREC"]
    assert result["avg"] == pytest.approx((result["tasks"]["MRPC"]["acc"] + result["tasks"]["TREC"]["acc"]) / 2)
    assert result["embedding"]["unique_sentences"] == len(sent) < result["embedding"]["sentences_in_tasks"]
    protocol = result["protocol"]
    assert (protocol["mode"], protocol["kfold"], protocol["optim"], protocol["seed"]) == ("fasttest", 5, "rmsprop", 1111)
    assert set(result["tasks"]["MRPC"]) == {"acc", "devacc", "f1", "ndev", "ntest"}
    assert (result["tasks"]["TREC"]["ndev"], result["tasks"]["TREC"]["ntest"]) == (300, 60)


def _progress_lines(err: str, task: str) -> list[str]:
    return [line for line in err.split("\n") if line.startswith(f"transfer {task}: ")]


def test_each_task_reports_its_fits_with_an_eta(synthetic, one_thread, monkeypatch, capsys):
    """A progress line per task (aoe.util.progress): the classifier fits done of the task's total, elapsed, ETA."""
    monkeypatch.setenv("AOE_PROGRESS_INTERVAL", "0")  # a line at every update (the default: at most one per 30 s)
    evaluate_transfer(encoder(), ["MRPC", "CR", "SST2"], mode="fasttest", data=synthetic)
    err = capsys.readouterr().err
    assert "\r" not in err  # stderr is not a terminal here: whole lines, no redraws
    params = ClassifierParams.from_mode("fasttest")
    # MRPC k-fold: 4 penalties x 5 folds + the refit; CR nested k-fold: 5 x (4 x 5 + 1); SST2 one fit per penalty
    totals = {"MRPC": 21, "CR": 105, "SST2": 4}
    assert {t: classifier_fits(k, params) for t, k in (("MRPC", "kfold"), ("CR", "inner_kfold"), ("SST2", "split"))} == totals
    for task, total in totals.items():
        lines = _progress_lines(err, task)
        assert lines[0].startswith(f"transfer {task}: 0/{total} fit (0%), elapsed 00:00, ETA ?")
        assert lines[-1].startswith(f"transfer {task}: {total}/{total} fit (100%)")
        done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
        assert done == sorted(done) and set(range(total + 1)) <= set(done)  # every fit, in order
        assert all(", ETA " in line and "reg=" in line for line in lines[1:])
        assert any("epoch=" in line for line in lines)  # within a fit: its epochs (PyTorch classifier)
    # task after task, each one's lines together
    order = [t for line in err.split("\n") for t in totals if line.startswith(f"transfer {t}: ")]
    assert order == sorted(order, key=list(totals).index)


def test_progress_lines_come_at_a_steady_rate_not_per_fit(synthetic, one_thread, monkeypatch, capsys):
    monkeypatch.delenv("AOE_PROGRESS_INTERVAL", raising=False)  # default: at most a line per 30 s, plus the first and last
    evaluate_transfer(encoder(), ["MRPC"], mode="fasttest", data=synthetic)
    lines = _progress_lines(capsys.readouterr().err, "MRPC")
    assert len(lines) == 2 and lines[0].startswith("transfer MRPC: 0/21") and lines[1].startswith("transfer MRPC: 21/21")


@pytest.mark.slow
def test_transfer_log_shows_per_task_progress(tmp_path):
    """The rule's log (stdout and stderr sent to it by aoe.util.joblog.start_log, as in
    workflow_scripts/evaluate_transfer.py): per-task progress lines with an ETA, one whole line each."""
    import os
    import subprocess
    import sys

    log = tmp_path / "logs" / "transfer.log"
    script = (
        "from aoe.util.joblog import start_log\n"
        f"start_log({str(log)!r})\n"
        "from aoe.data.transfer import read_transfer\n"
        "from aoe.evaluate.transfer import evaluate_transfer\n"
        "from tests.senteval_reference import encoder\n"
        "from tests.senteval_reference import write_synthetic_senteval\n"
        f"root = write_synthetic_senteval(__import__('pathlib').Path({str(tmp_path / 'downstream')!r}))\n"
        "data = {t: read_transfer(root, t, expected_rows=None, published=False) for t in ('TREC', 'MRPC')}\n"
        "r = evaluate_transfer(encoder(), ['TREC', 'MRPC'], mode='fasttest', data=data)\n"
        "print('avg', r['avg'])\n"
    )
    env = {**os.environ, "AOE_PROGRESS_INTERVAL": "0", "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=tmp_path, timeout=600)
    text = log.read_text()
    assert "\r" not in text
    for task in ("TREC", "MRPC"):
        lines = _progress_lines(text, task)
        assert lines[0] == f"transfer {task}: 0/21 fit (0%), elapsed 00:00, ETA ?, ?fit/s"
        assert lines[-1].startswith(f"transfer {task}: 21/21 fit (100%), elapsed ")
        assert len(lines) >= 22 and all(", ETA " in line for line in lines)
    assert text.rstrip().split("\n")[-1].startswith("avg ")  # the job's own output follows, on its own line


def test_bad_calls(synthetic):
    with pytest.raises(KeyError, match="unknown transfer task"):
        evaluate_transfer(encoder(), ["SST5"], data=synthetic)
    with pytest.raises(ValueError, match="data_root is needed"):
        evaluate_transfer(encoder(), ["MR"])
    with pytest.raises(ValueError, match=r"encode returned shape \(3,\)"):
        evaluate_transfer(lambda texts: np.zeros(3), ["TREC"], data=synthetic)


def test_fit_split_classifier_separable_and_leaves_global_rngs_alone(one_thread):
    import torch

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)) * 5
    def sample(n):
        y = rng.integers(0, 3, size=n)
        return (centres[y] + rng.normal(size=(n, 8))).astype(np.float32), y

    (xtr, ytr), (xdv, ydv), (xte, yte) = sample(300), sample(60), sample(90)
    np_state, torch_state = np.random.get_state()[1].copy(), torch.get_rng_state().clone()
    results = {}
    for backend in (True, False):
        params = {**MODES["fasttest"], "usepytorch": backend}
        results[backend] = fit_split_classifier(xtr, ytr, xdv, ydv, xte, yte, params, seed=1111)
        assert results[backend]["acc"] == 100.0 and results[backend]["devacc"] == 100.0
        assert (results[backend]["ndev"], results[backend]["ntest"]) == (60, 90)
    # SentEval reseeds the global generators; ours must not disturb the caller's.
    assert np.array_equal(np.random.get_state()[1], np_state)
    assert torch.equal(torch.get_rng_state(), torch_state)
    # Seeded: a second call gives the same result.
    assert fit_split_classifier(xtr, ytr, xdv, ydv, xte, yte, MODES["fasttest"], seed=1111) == results[True]


# --------------------------------------------------------------------------
# Batch-dependent evaluation poolings: SentEval's transfer batches
# --------------------------------------------------------------------------


def _sentevals_batcher_calls(data: TransferData, batch_size: int) -> list[list[str]]:
    """The texts of each batcher call SentEval's loaders make, in call order, written as their run() methods are
    (SeanLee97/AnglE fcb6223 SentEval/senteval/: binary.py:40-48, sst.py:61-73, trec.py:50-73, mrpc.py:57-76;
    the same files in SimCSE's copy), on the word lists SentEval's loadFile makes (``line.split()``)."""
    calls: list[list[str]] = []

    def batcher(batch: list[list[str]]) -> None:
        calls.append([" ".join(words) for words in batch])  # SimCSE's / AnglE's batcher: ' '.join(s)

    split = data.splits
    if data.task in ("MR", "CR", "SUBJ", "MPQA"):  # BinaryClassifierEval.run
        samples, labels = [s.split() for s in split["all"].sentences], split["all"].labels
        sorted_corpus = sorted(zip(samples, labels), key=lambda z: (len(z[0]), z[1]))
        sorted_samples = [x for (x, y) in sorted_corpus]
        for ii in range(0, len(samples), batch_size):
            batcher(sorted_samples[ii:ii + batch_size])
    elif data.task == "SST2":  # SSTEval.run: for key in sst_data (train, dev, test)
        for key in ("train", "dev", "test"):
            sorted_data = sorted(zip([s.split() for s in split[key].sentences], split[key].labels), key=lambda z: (len(z[0]), z[1]))
            X, y = map(list, zip(*sorted_data))
            for ii in range(0, len(y), batch_size):
                batcher(X[ii:ii + batch_size])
    elif data.task == "TREC":  # TRECEval.run: train, then test
        for key in ("train", "test"):
            corpus = sorted(zip([s.split() for s in split[key].sentences], split[key].labels), key=lambda z: (len(z[0]), z[1]))
            samples = [x for (x, y) in corpus]
            for ii in range(0, len(samples), batch_size):
                batcher(samples[ii:ii + batch_size])
    else:  # MRPCEval.run: for key in mrpc_data (train, test); all 'A' batches, then all 'B' batches
        for key in ("train", "test"):
            sorted_corpus = sorted(zip([s.split() for s in split[key].sentences], [s.split() for s in split[key].sentences2],
                                       split[key].labels), key=lambda z: (len(z[0]), len(z[1]), z[2]))
            text_data = {"A": [x for (x, y, z) in sorted_corpus], "B": [y for (x, y, z) in sorted_corpus]}
            for txt_type in ("A", "B"):
                for ii in range(0, len(sorted_corpus), batch_size):
                    batcher(text_data[txt_type][ii:ii + batch_size])
    return calls


@pytest.mark.parametrize("batch_size", [2, 16, 32])
def test_transfer_batches_are_sentevals_batcher_calls(synthetic, batch_size):
    """transfer_batches gives the batcher calls SentEval's own loaders make, in their order, at the official
    batch sizes (1c5515b eval_nli.py --mode test: 2; fcb6223 eval.py: 16; fasttest: 32); one (split, side)'s
    calls together are the order the classifiers see (_sentevals_order)."""
    from aoe.evaluate.senteval_batches import transfer_batches
    from aoe.evaluate.transfer import _sentevals_order

    for task in TRANSFER_TASKS:
        data = synthetic[task]
        calls = transfer_batches(data, batch_size)
        ours = [[getattr(data.splits[c.split], c.side)[i] for i in c.rows] for c in calls]
        assert ours == _sentevals_batcher_calls(data, batch_size), task
        for name, split in data.splits.items():
            for side in ("sentences",) + (("sentences2",) if split.sentences2 is not None else ()):
                group = [c.rows for c in calls if (c.split, c.side) == (name, side)]
                assert all(len(rows) == batch_size for rows in group[:-1]) and 0 < len(group[-1]) <= batch_size
                assert [i for rows in group for i in rows] == list(_sentevals_order(split)), (task, name, side)
    # SentEval's call order: split by split (SST2: train, dev, test); MRPC's sentence-1 calls of a split, then its sentence-2 calls
    def groups(task):
        out = []
        for c in transfer_batches(synthetic[task], 16):
            if not out or out[-1] != (c.split, c.side):
                out.append((c.split, c.side))
        return out

    assert groups("MRPC") == [("train", "sentences"), ("train", "sentences2"), ("test", "sentences"), ("test", "sentences2")]
    assert groups("SST2") == [("train", "sentences"), ("dev", "sentences"), ("test", "sentences")]
    assert groups("CR") == [("all", "sentences")]
    with pytest.raises(ValueError, match="batch_size must be positive"):
        transfer_batches(synthetic["TREC"], 0)


def test_official_batch_sizes_per_mode():
    """The SentEval batch_size of the official evaluation scripts, the same params for the STS and transfer tasks."""
    from aoe.evaluate.run import official_eval_batch_size
    from aoe.evaluate.senteval_batches import OFFICIAL_BATCH_SIZES, OFFICIAL_MODE_BATCH_SIZES, official_batch_size

    assert {r: official_batch_size(r) for r in OFFICIAL_BATCH_SIZES} == {r: b for r, (_, b) in OFFICIAL_BATCH_SIZES.items()}
    assert [official_batch_size(r, "fasttest") for r in ("0.1.1", "0.4.6")] == [32, 32]
    assert [official_eval_batch_size(p, m) for p in ("cls_avg_padded", "cls_avg_batchsum") for m in ("test", "fasttest")] == [16, 32, 2, 32]
    assert OFFICIAL_MODE_BATCH_SIZES["0.1.1"]["test"][0] == "fcb6223 eval.py:114"
    with pytest.raises(ValueError, match="no official SentEval batch size for release '0.1.1' in mode 'dev'"):
        official_batch_size("0.1.1", "dev")


def test_senteval_batches_give_the_deduplicated_numbers_for_a_batch_independent_encoder(synthetic, one_thread, monkeypatch, capsys):
    """evaluate_transfer_in_senteval_batches embeds exactly SentEval's batcher calls, in order and without
    deduplication; with an encoder that ignores its batch the classifiers see the same features as
    evaluate_transfer's, so the numbers are equal. The embedding reports its progress too."""
    from aoe.evaluate.transfer import evaluate_transfer_in_senteval_batches

    monkeypatch.setenv("AOE_PROGRESS_INTERVAL", "0")
    calls: list[list[str]] = []

    def encode_batches(batches):
        calls.extend(batches)
        return np.concatenate([encoder()(b) for b in batches])

    batched = evaluate_transfer_in_senteval_batches(encode_batches, 16, ["TREC", "MRPC"], mode="fasttest", data=synthetic)
    assert calls == _sentevals_batcher_calls(synthetic["TREC"], 16) + _sentevals_batcher_calls(synthetic["MRPC"], 16)
    assert batched["tasks"] == evaluate_transfer(encoder(), ["TREC", "MRPC"], mode="fasttest", data=synthetic)["tasks"]
    assert batched["protocol"]["batches"]["batch_size"] == 16 and batched["protocol"]["mode"] == "fasttest"
    n = sum(len(s) * (2 if s.sentences2 is not None else 1) for t in ("TREC", "MRPC") for s in synthetic[t].splits.values())
    assert batched["embedding"]["sentences_in_tasks"] == n == sum(map(len, calls))
    err = capsys.readouterr().err
    assert _progress_lines(err, "TREC embed") and _progress_lines(err, "MRPC")
    with pytest.raises(ValueError, match=r"encode_batches returned shape \(3,\)"):
        evaluate_transfer_in_senteval_batches(lambda batches: np.zeros(3), 16, ["TREC"], data=synthetic)


def test_a_batch_dependent_pooling_differs_on_padded_batches_and_cls_does_not(synthetic, trained_cls):
    """0.1.1's padded cls_avg (the official eval.py's) in SentEval's transfer batches: a text padded in its batch
    embeds otherwise than under the masked cls_avg, the longest of its batch alike; CLS is the same in any batch."""
    from aoe.evaluate.senteval_batches import transfer_batches
    from aoe.evaluate.transfer import _sentevals_order, embed_in_senteval_batches
    from aoe.model.encoder import Encoder

    data = synthetic["TREC"]
    padded = Encoder(trained_cls, device="cpu", eval_pooling="cls_avg_padded")
    masked = Encoder(trained_cls, device="cpu", eval_pooling="cls_avg")
    cls = Encoder(trained_cls, device="cpu")
    assert cls.pooling == "cls"
    got, n = embed_in_senteval_batches(lambda b: padded.encode_batches(b, max_length=32), data, 16)
    assert n == len(data.splits["train"]) + len(data.splits["test"])
    train = data.splits["train"]
    order = _sentevals_order(train)
    ordered = [train.sentences[i] for i in order]
    want_masked = masked.encode(ordered, batch_size=16, max_length=32)
    u = got["train"][0]
    # which texts of a batch are padded: fewer tokens than the batch's longest
    lengths = np.array([len(padded.tokenizer(t, truncation=True, max_length=32)["input_ids"]) for t in ordered])
    pad = np.concatenate([lengths[i : i + 16] < lengths[i : i + 16].max() for i in range(0, len(ordered), 16)])
    assert pad.any() and (~pad).any()
    assert not any(np.allclose(a, b, atol=1e-4) for a, b in zip(u[pad], want_masked[pad]))
    np.testing.assert_allclose(u[~pad], want_masked[~pad], atol=1e-5)
    # CLS: SentEval's batches or any others, one embedding per text
    cls_got, _ = embed_in_senteval_batches(lambda b: cls.encode_batches(b, max_length=32), data, 16)
    np.testing.assert_allclose(cls_got["train"][0], cls.encode(ordered, batch_size=64, max_length=32), atol=1e-5)
    assert [c.rows for c in transfer_batches(data, 16)][0] == list(order[:16])


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_senteval(tmp_path_factory.mktemp("senteval_root") / "downstream")


def _unpublished_reader(monkeypatch):
    """run_transfer_evaluation reads the synthetic corpus (its sizes are not SentEval's published ones)."""
    import aoe.data.transfer as transfer_data

    read = transfer_data.read_transfer
    monkeypatch.setattr(transfer_data, "read_transfer", lambda root, task: read(root, task, expected_rows=None, published=False))


@pytest.mark.slow
def test_run_transfer_evaluation_under_an_evaluation_only_pooling(synthetic_root, trained_cls, tmp_path, one_thread, monkeypatch):
    """Rule evaluate_transfer(_eval_pooling) as it calls the run: a batch-dependent eval_pooling embeds in SentEval's
    batches at the official batch size of the mode (fasttest: 32), uncached, and says which pooling it replaced;
    a masked one goes through the cache under its own key; without one the trained pooling."""
    from aoe.evaluate.run import run_transfer_evaluation
    from aoe.evaluate.transfer import evaluate_transfer_in_senteval_batches
    from aoe.model.encoder import Encoder

    _unpublished_reader(monkeypatch)
    kwargs = dict(tasks=["TREC", "MRPC"], mode="fasttest", max_length=32, device="cpu", batch_size=8)
    cell = {"backbone": "tiny", "objective": "aoe", "trainset": "nli", "seed": "42"}
    pooled = run_transfer_evaluation(trained_cls, synthetic_root, tmp_path / "transfer.pool-cls_avg_padded.json",
                                     cell={**cell, "eval_pooling": "cls_avg_padded"}, cache_root=tmp_path / "emb",
                                     eval_pooling="cls_avg_padded", **kwargs)
    protocol = pooled["protocol"]
    assert (protocol["pooling"], protocol["trained_pooling"], protocol["batches"]["batch_size"]) == ("cls_avg_padded", "cls", 32)
    assert "cache" not in pooled["embedding"] and not (tmp_path / "emb").exists()
    assert pooled["model"]["cell"]["eval_pooling"] == "cls_avg_padded"  # what the table builder selects the row's values by
    assert json.loads((tmp_path / "transfer.pool-cls_avg_padded.json").read_text())["tasks"] == pooled["tasks"]
    # by hand: each SentEval batch of 32 embedded on its own
    enc = Encoder(trained_cls, device="cpu", eval_pooling="cls_avg_padded")
    data = {t: read_transfer(synthetic_root, t, expected_rows=None, published=False) for t in ("TREC", "MRPC")}
    by_hand = evaluate_transfer_in_senteval_batches(
        lambda batches: np.concatenate([enc.encode_batches([b], max_length=32) for b in batches]), 32, ["TREC", "MRPC"],
        mode="fasttest", data=data)
    assert {t: pooled["tasks"][t] for t in ("TREC", "MRPC")} == by_hand["tasks"]
    # a masked eval_pooling: deduplicated and cached like the trained one, under its own cache key
    masked = run_transfer_evaluation(trained_cls, synthetic_root, tmp_path / "masked.json", cache_root=tmp_path / "emb",
                                     eval_pooling="cls_avg", **kwargs)
    own = run_transfer_evaluation(trained_cls, synthetic_root, tmp_path / "own.json", cache_root=tmp_path / "emb", **kwargs)
    assert (masked["protocol"]["pooling"], masked["protocol"]["trained_pooling"]) == ("cls_avg", "cls")
    assert own["protocol"]["pooling"] == "cls" and "trained_pooling" not in own["protocol"] and "batches" not in own["protocol"]
    assert masked["embedding"]["cache"]["hit"] is False and own["embedding"]["cache"]["hit"] is False
    assert masked["embedding"]["cache"]["dir"] != own["embedding"]["cache"]["dir"]


def test_cap_transfer_keeps_a_seeded_subset_of_each_split_in_file_order(synthetic):
    from aoe.evaluate.transfer import cap_transfer

    mrpc = synthetic["MRPC"]
    capped = cap_transfer(mrpc, 30)
    assert capped is not mrpc and capped.task == "MRPC" and capped.files == mrpc.files
    for name, split in mrpc.splits.items():
        kept = capped.splits[name]
        assert len(kept) == min(30, len(split))
        # the pairs stay pairs, with their labels, in the order of the file
        rows = [(a, b, y) for a, b, y in zip(split.sentences, split.sentences2, split.labels)]
        at = [rows.index(r) for r in zip(kept.sentences, kept.sentences2, kept.labels)]
        assert at == sorted(at)
    assert cap_transfer(mrpc, 30) == capped  # the same rows for every model
    assert cap_transfer(mrpc, 30, seed=1) != capped
    assert cap_transfer(mrpc, 10**6).splits == mrpc.splits  # a split that small stays whole
    with pytest.raises(ValueError, match="at least 1"):
        cap_transfer(mrpc, 0)


def test_run_transfer_evaluation_records_its_cap(synthetic_root, trained_cls, tmp_path, one_thread, monkeypatch):
    """evaluation.transfer.max_rows: each split capped, the rows scored written in transfer.json's protocol;
    SimCSE's SentEval reads every sample, so the senteval backend refuses a cap."""
    from aoe.evaluate.run import run_transfer_evaluation

    _unpublished_reader(monkeypatch)
    out = run_transfer_evaluation(trained_cls, synthetic_root, tmp_path / "t.json", tasks=["TREC"], mode="fasttest",
                                  max_length=32, device="cpu", batch_size=8, max_rows=40)
    full = read_transfer(synthetic_root, "TREC", expected_rows=None, published=False)
    assert out["protocol"]["subsample"] == {"max_rows_per_split": 40, "seed": 0,
                                            "rows": {"TREC": {name: min(40, len(split)) for name, split in full.splits.items()}}}
    assert out["tasks"]["TREC"]["ntest"] == min(40, len(full.splits["test"]))
    with pytest.raises(ValueError, match="SimCSE's SentEval .* reads every sample"):
        run_transfer_evaluation(trained_cls, synthetic_root, tmp_path / "s.json", tasks=["TREC"], backend="senteval", max_rows=40)


def test_the_senteval_backend_batches_a_batch_dependent_pooling_as_the_official_script(trained_cls, tmp_path, monkeypatch):
    """evaluation.backend senteval: SentEval's own batcher calls, at the official batch size, each one forward pass;
    on STS (SimCSE's copy orders STS12-16 otherwise than AnglE's) a clear error instead of other batches."""
    from aoe.evaluate import senteval_backend as se
    from aoe.evaluate.run import run_sts_evaluation, run_transfer_evaluation
    from aoe.model.encoder import Encoder

    seen = {}

    def fake_run_senteval(encode, tasks, downstream, mode="test", batch_size=None):
        seen["batch_size"], seen["emb"] = batch_size, encode(["a b c", "a", "a b"])
        return {t: {"devacc": 50.0, "acc": 50.0, "ndev": 3, "ntest": 3} for t in tasks}

    monkeypatch.setattr(se, "run_senteval", fake_run_senteval)
    out = run_transfer_evaluation(trained_cls, tmp_path, tmp_path / "t.json", tasks=["TREC"], mode="test", max_length=32,
                                  device="cpu", backend="senteval", eval_pooling="cls_avg_padded")
    assert seen["batch_size"] == 16 and out["protocol"]["params"]["batch_size"] == 16 and out["protocol"]["pooling"] == "cls_avg_padded"
    one_pass = Encoder(trained_cls, device="cpu", eval_pooling="cls_avg_padded").encode_batches([["a b c", "a", "a b"]], max_length=32)
    np.testing.assert_allclose(seen["emb"], one_pass, atol=1e-6)
    run_transfer_evaluation(trained_cls, tmp_path, tmp_path / "m.json", tasks=["TREC"], mode="test", max_length=32,
                            device="cpu", backend="senteval", eval_pooling="cls_avg")
    assert seen["batch_size"] is None  # a masked pooling: SentEval's default batches, as SimCSE's evaluation.py
    with pytest.raises(ValueError, match="orders STS12-16 otherwise than the official copy: use evaluation.backend builtin"):
        run_sts_evaluation(trained_cls, [], [], tmp_path / "s.json", device="cpu", backend="senteval", downstream=tmp_path,
                           eval_pooling="cls_avg_padded")


# --------------------------------------------------------------------------
# Parity with SentEval
# --------------------------------------------------------------------------


# The four cross-validated binary tasks share one code path (the nested k-fold): in "test" mode (10 x 41 fits each,
# 14-16 CPU-s a task with the PyTorch classifier in CI) CR alone runs here, with scikit-learn's classifier (2.6 CPU-s);
# the rest of test mode's nested k-fold is bench/parity/transfer_parity.py's (every synthetic case, against the same
# numbers): MR, SUBJ and MPQA with both classifiers, and CR with PyTorch's, whose parts each fail here on their own
# (the nested k-fold with PyTorch's grid is fasttest CR's, PyTorch's test-mode settings and grid test-mode TREC's).
# Fasttest keeps all seven tasks (under 1 CPU-s each), test mode SST2 (the dev split), TREC (six classes) and MRPC
# (pair features) beside CR.
_SLOW_SYNTHETIC = {("test", "CR"), ("test", "TREC")}
_BENCH_ONLY_SYNTHETIC = {("test", backend, task) for backend in ("pytorch", "sklearn") for task in ("MR", "SUBJ", "MPQA")}
_BENCH_ONLY_SYNTHETIC.add(("test", "pytorch", "CR"))


@pytest.mark.parametrize(
    "mode, backend, task",
    [
        pytest.param(mode, backend, task, marks=[pytest.mark.slow] if (mode, task) in _SLOW_SYNTHETIC else [])
        for (mode, backend), tasks in SENTEVAL_SYNTHETIC.items()
        for task in tasks
        if (mode, backend, task) not in _BENCH_ONLY_SYNTHETIC
    ],
)
def test_synthetic_parity_with_senteval(synthetic, one_thread, mode, backend, task):
    result = evaluate_transfer(encoder(), [task], mode=mode, usepytorch=backend == "pytorch", data=synthetic)
    _check(result["tasks"][task], SENTEVAL_SYNTHETIC[(mode, backend)][task])
    # the sizes the task's protocol classifies: SST2's dev and test (the mirror's SST2 case checked (872, 1821)
    # before it moved to bench/parity/transfer_parity.py), TREC's and MRPC's train and test, the others' one split
    assert (result["tasks"][task]["ndev"], result["tasks"][task]["ntest"]) == protocol_sizes(synthetic[task])


# On the real mirror (fasttest), the two tasks with given train/test splits (as the issue that sized this file asked:
# one or two real tasks show the parity can fail; CI at 78dfe2b on the 2-core AMD EPYC: alone TREC 5.8 CPU-s, MRPC
# 5.2): TREC the k-fold over six classes, MRPC the k-fold on pair features, with F1. The nested k-fold of the four
# binary single-sentence tasks (CR 11-14 CPU-s in CI, MR 44, SUBJ 37, MPQA 46) and SST2's dev-split path (25) are
# checked on the synthetic corpus in both modes and with both classifiers (above), as SST2's was before.
# bench/parity/transfer_parity.py runs what is left here against the same SentEval numbers and sizes: the mirror's
# seven tasks in fasttest mode and four in test mode, and every synthetic case (committed:
# bench/parity/results/transfer_parity.json, all equal; test_the_bench_covers_every_mirror_task_the_suite_leaves_out).
MIRROR_TASKS = ("TREC", "MRPC")


@pytest.mark.slow
@pytest.mark.parametrize("task", MIRROR_TASKS)
def test_mirror_parity_with_senteval(mirror_data, one_thread, task):
    result = evaluate_transfer(encoder(), [task], mode="fasttest", data=mirror_data)
    _check(result["tasks"][task], SENTEVAL_MIRROR["fasttest"][task])
    # the sizes each protocol classifies, from the published split sizes: CR cross-validates all of it, TREC and
    # MRPC cross-validate train and score test
    assert (result["tasks"][task]["ndev"], result["tasks"][task]["ntest"]) == {
        "TREC": (5452, 500), "MRPC": (4076, 1725),
    }[task]


def test_the_bench_covers_every_mirror_task_the_suite_leaves_out():
    """bench/parity/transfer_parity.py's committed result holds the parity this file no longer runs: every mirror task
    of each mode with a SentEval reference, and every synthetic case, each equal to SentEval and sized as its
    protocol says; a reference added to tests/senteval_reference.py without a bench run fails here."""
    record = json.loads((REPO / "bench" / "parity" / "results" / "transfer_parity.json").read_text())
    ran = {(r["corpus"], r["mode"], r["classifier"], r["task"]): r for r in record["results"]}
    wanted = {("mirror", mode, "pytorch", task): expected for mode, tasks in SENTEVAL_MIRROR.items() for task, expected in tasks.items()}
    wanted |= {("synthetic", mode, backend, task): expected for (mode, backend), tasks in SENTEVAL_SYNTHETIC.items()
               for task, expected in tasks.items()}
    assert set(wanted) <= set(ran), sorted(set(wanted) - set(ran))
    for key, expected in wanted.items():
        r = ran[key]
        assert r["equal"] and r["senteval"] == expected and all(r["ours"][k] == v for k, v in expected.items()), key
        assert (r["ours"]["ndev"], r["ours"]["ntest"]) == (r["sizes"]["ndev"], r["sizes"]["ntest"]), key
        if key[0] == "mirror":
            assert (r["sizes"]["ndev"], r["sizes"]["ntest"]) == mirror_sizes(key[3]), key
    assert record["all_equal"] and record["torch_threads"] == 1
