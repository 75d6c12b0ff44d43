"""Training with the official padded arithmetic (issue 51): the pooling-ablation cells train as angle-emb did.

angle-emb 0.1.1's AngleDataCollator pads a batch's texts (both texts of each pair, interleaved) to
the longest of them (fcb6223 angle_emb/angle.py:262, 314-334) and its Pooler averages over every
position of that batch (:370-371). A cell trained with ``avg_padded`` must see exactly that batch: the
loss of its first step is checked against the arithmetic written out here by hand, on a batch padded
by the tokenizer's own ``pad(padding='longest')``, as the official collator called it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from aoe.losses import get_objective
from aoe.model.tokens import build_token_cache, load_token_cache
from aoe.training.train import Collator, TrainConfig, epoch_batches, longest_of_slice, train
from tests.workflow_utils import write_tiny_model_apart

MAX_LENGTH = 16
WORDS = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()


@pytest.fixture(scope="module")
def data(minilm_dir, tmp_path_factory) -> dict:
    """A tiny BERT without dropout (a step's loss is then one number) and 24 scored pairs of 1-9 words."""
    root = tmp_path_factory.mktemp("padded_pooling")
    bb = write_tiny_model_apart(root / "bert", minilm_dir, "Bert", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    rng = np.random.default_rng(1)
    rows = [(" ".join(rng.choice(WORDS, size=rng.integers(1, 10))), " ".join(rng.choice(WORDS, size=rng.integers(1, 10))),
             float(rng.integers(0, 6))) for _ in range(24)]
    table = root / "train.parquet"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(table, index=False)
    build_token_cache(table, bb, MAX_LENGTH, root / "cache")
    return {"table": table, "cache": root / "cache", "backbone": bb, "root": root}


def _cfg(pooling: str, **kw) -> TrainConfig:
    return TrainConfig(objective="angle_arxiv", pooling=pooling, seed=0, learning_rate=1e-3, batch_size=8, max_steps=1, log_every=1,
                       max_length=MAX_LENGTH, score_range=(0.0, 5.0), **kw)


def _first_loss(data, pooling: str, **kw) -> tuple[float, dict]:
    out = data["root"] / f"run-{pooling}"
    train(data["cache"], data["table"], data["backbone"], out, _cfg(pooling, **kw), extra_record={"cell": {"seed": 0}})
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    return first["loss"], json.loads((out / "aoe_config.json").read_text())


def _by_hand(data, pool) -> tuple[float, torch.Tensor]:
    """The first batch's loss with ``pool(hidden, mask)``, the batch padded by the tokenizer as the official
    collator padded it; the labels and text ids from the engine's collator (the pooling is under test, not they)."""
    tok = AutoTokenizer.from_pretrained(data["backbone"])
    cache = load_token_cache(data["cache"], data["table"], data["backbone"], MAX_LENGTH)
    rows = cache[epoch_batches(len(cache), 8, seed=0, epoch=0)[0]]
    examples = [dict(zip(rows, vals)) for vals in zip(*rows.values())]
    # text1, text2 of each pair in turn: AngleDataCollator's order (angle.py:271-301)
    seqs = [e[f"input_ids_{j}"] for e in examples for j in (1, 2)]
    padded = tok.pad({"input_ids": seqs}, padding="longest", return_tensors="pt")
    objective = get_objective("angle_arxiv")
    batch = Collator(tok, _cfg("avg"), objective)(examples)
    assert torch.equal(batch["input_ids"].view(16, -1), padded["input_ids"])  # the engine pads as the official collator
    with torch.no_grad():
        hidden = AutoModel.from_pretrained(data["backbone"])(**padded).last_hidden_state
        pooled = pool(hidden, padded["attention_mask"]).view(8, 2, -1)
        loss, _ = objective(tuple(pooled.unbind(1)), batch["labels"], batch["text_ids"], None)
    return loss.item(), padded["attention_mask"]


def test_a_padded_pooling_trains_on_the_official_padded_batch(data):
    # fcb6223 angle.py:370-371: torch.mean(outputs, dim=1), padding included
    official, mask = _by_hand(data, lambda h, m: torch.mean(h, dim=1))
    masked, _ = _by_hand(data, lambda h, m: (h * m[..., None]).sum(1) / m.sum(1, keepdim=True))
    assert (mask == 0).any(), "the first batch has no padding: the two arithmetics would agree"
    assert abs(official - masked) > 1e-4
    loss, record = _first_loss(data, "avg_padded", length_buckets=1)
    assert loss == pytest.approx(official, rel=1e-5)
    assert record["pooling"] == "avg_padded" and record["train"]["length_buckets"] == 1
    # the masked pooling of the variant rows trains the other number, in length buckets or not
    assert _first_loss(data, "avg", length_buckets=4)[0] == pytest.approx(masked, rel=1e-5)


def test_the_fourth_aoe_pooling_trains_with_the_batch_wide_token_count(data):
    """AoE's cls_avg (config.yaml objectives.aoe_pool_cls_avg): 1c5515b get_pooling (angle_emb/angle.py:304-307)
    divides the masked token sum by the whole batch's token count, which turns each vector (the CLS half stays),
    so its loss differs from the masked cls_avg's; the engine's first loss is that arithmetic's."""
    official, mask = _by_hand(data, lambda h, m: (h[:, 0] + (h * m[:, :, None]).sum(1) / m.sum()) / 2.0)
    masked, _ = _by_hand(data, lambda h, m: (h[:, 0] + (h * m[..., None]).sum(1) / m.sum(1, keepdim=True)) / 2.0)
    assert abs(official - masked) > 1e-4
    loss, record = _first_loss(data, "cls_avg_batchsum", length_buckets=1)
    assert loss == pytest.approx(official, rel=1e-5)
    assert record["pooling"] == "cls_avg_batchsum"
    assert _first_loss(data, "cls_avg", length_buckets=4)[0] == pytest.approx(masked, rel=1e-5)


def test_a_model_trained_with_a_padded_pooling_embeds_with_it(data):
    """Its folder loads with its own pooling, and the in-domain evaluation batches as AnglE.evaluate did."""
    from aoe.evaluate.run import ANGLE_EVALUATE_PAIRS, angle_evaluate_embeddings, scoring_pooling
    from aoe.model.encoder import Encoder

    out = data["root"] / "run-max_padded"
    train(data["cache"], data["table"], data["backbone"], out, _cfg("max_padded", length_buckets=1), extra_record={"cell": {"seed": 0}})
    assert scoring_pooling(out, None) == "max_padded" and scoring_pooling(out, "cls") is None
    encoder = Encoder(out, device="cpu")  # compared with the hand-pooled CPU tensors below
    assert encoder.pooling == encoder.trained_pooling == "max_padded"
    texts = ["apple", "a river of stone under a heavy cloud"]
    tok = AutoTokenizer.from_pretrained(out)
    padded = tok(texts, padding="longest", return_tensors="pt")
    with torch.no_grad():
        by_hand = torch.max(AutoModel.from_pretrained(out)(**padded).last_hidden_state, dim=1).values  # angle.py:372-373
    np.testing.assert_allclose(encoder.encode_batches([texts]), by_hand.numpy(), rtol=1e-5, atol=1e-6)
    alone = encoder.encode_batches([texts[:1]])[0]
    assert not np.allclose(alone, by_hand[0].numpy(), atol=1e-4)  # its batch's padding changes the short text's vector

    seen = []

    def encode_batches(batches, max_length):
        seen.extend(batches)
        return np.arange(sum(map(len, batches)), dtype=np.float32)[:, None]

    pairs = pd.DataFrame({"sentence1": [f"a{i}" for i in range(70)], "sentence2": [f"b{i}" for i in range(70)]})
    first, second = angle_evaluate_embeddings(encode_batches, pairs, ANGLE_EVALUATE_PAIRS, MAX_LENGTH)
    assert [len(b) for b in seen] == [64, 64, 12] and seen[0][:4] == ["a0", "b0", "a1", "b1"] and seen[2][-1] == "b69"
    assert first[:, 0].tolist() == list(range(0, 140, 2)) and second[:, 0].tolist() == list(range(1, 140, 2))


def test_a_padded_pooling_refuses_length_buckets():
    with pytest.raises(ValueError, match=r"pooling 'avg_padded' reads the micro-batch's padding .* length_buckets must be 1, got 4 "
                                         r"\(objectives.<name>.length_buckets: 1\)"):
        _cfg("avg_padded", length_buckets=4)


def test_each_process_pads_its_slice_to_its_own_longest_text():
    """Several GPUs: each official collator padded its own per-device batch (padding='longest')."""
    # a micro-batch of 2 pairs padded to 6; the second process's pair is at most 3 tokens long
    mask = torch.tensor([[[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]], [[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]]])
    ids = mask * torch.arange(1, 7)
    slice_ids, slice_mask = longest_of_slice(ids[1:], mask[1:])
    assert slice_mask.tolist() == [[[1, 1, 1], [1, 1, 0]]] and slice_ids.tolist() == [[[1, 2, 3], [1, 2, 0]]]
    # left padding keeps the last positions
    left = mask.flip(-1)
    assert longest_of_slice(left[1:] * 7, left[1:])[1].tolist() == [[[1, 1, 1], [0, 1, 1]]]
    # the slice holding the longest text keeps every position
    assert torch.equal(longest_of_slice(ids[:1], mask[:1])[0], ids[:1])


def test_a_sentence_transformers_export_refuses_a_padded_pooling(data, tmp_path):
    from aoe.model.interop import write_sentence_transformers_files

    out = data["root"] / "run-max_padded"
    if not out.exists():
        train(data["cache"], data["table"], data["backbone"], out, _cfg("max_padded", length_buckets=1), extra_record={"cell": {"seed": 0}})
    with pytest.raises(ValueError, match="depends on the texts batched with it"):
        write_sentence_transformers_files(out)
