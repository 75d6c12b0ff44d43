"""The official angle-emb pooling arithmetic on hand-made tensors, Encoder's eval_pooling and exact batches,
and SentEval's STS batch order.

bench/parity/pooler_parity.py checks the same replicas against the official code itself (its own venvs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from aoe.config.hparams import YAML_LOADER
from aoe.evaluate.senteval_batches import (
    OFFICIAL_BATCH_SIZES,
    SENTEVAL_SORTS,
    senteval_order,
    senteval_sts_batches,
    task_batches,
)
from aoe.model.encoder import Encoder, embed, embed_bucketed
from aoe.model.pooling import (
    BATCH_DEPENDENT_POOLINGS,
    EVAL_POOLINGS,
    OFFICIAL_POOLING_SOURCES,
    OFFICIAL_POOLINGS,
    POOLINGS,
    pool,
)
from tests.workflow_utils import REPO

# ---------------------------------------------------------------------------
# One right-padded batch (the official BERT setting): B = 3, T = 4, H = 2.
#   row 0: mask 1 1 1 0, padding holds junk (100)
#   row 1: mask 1 1 1 1, no padding
#   row 2: mask 1 1 0 0, every real value negative, padding holds (-7, 10)
# The batch has 3 + 4 + 2 = 9 real tokens.
HIDDEN = torch.tensor(
    [
        [[1.0, 2.0], [3.0, 4.0], [5.0, -6.0], [100.0, 100.0]],
        [[2.0, 0.0], [4.0, 2.0], [6.0, -2.0], [0.0, 4.0]],
        [[-1.0, -2.0], [-3.0, -0.5], [-7.0, 10.0], [-7.0, 10.0]],
    ],
    dtype=torch.float64,
)
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])  # int64, as tokenizers return it

EXPECTED = {
    # angle-emb 0.1.1 Pooler: every position counts, padding included
    # mean over 4 positions: (1+3+5+100)/4, (2+4-6+100)/4 | (2+4+6+0)/4, (0+2-2+4)/4 | (-1-3-7-7)/4, (-2-.5+10+10)/4
    "avg_padded": [[27.25, 25.0], [3.0, 1.0], [-4.5, 4.375]],
    # (cls + that mean) / 2
    "cls_avg_padded": [[14.125, 13.5], [2.5, 0.5], [-2.75, 1.1875]],
    # the padding's 100 and 10 win
    "max_padded": [[100.0, 100.0], [6.0, 4.0], [-1.0, 10.0]],
    # position 3 of every row, padding or not
    "last_position": [[100.0, 100.0], [0.0, 4.0], [-7.0, 10.0]],
    # angle-emb 0.4.x get_pooling: masked sums (9, 0 | 12, 4 | -4, -2.5) over the batch's 9 tokens
    "avg_batchsum": [[1.0, 0.0], [12 / 9, 4 / 9], [-4 / 9, -2.5 / 9]],
    # (cls + that) / 2: (1+1)/2, (2+0)/2 | (2+4/3)/2, (0+4/9)/2 | (-1-4/9)/2, (-2-2.5/9)/2
    "cls_avg_batchsum": [[1.0, 1.0], [5 / 3, 2 / 9], [-13 / 18, -41 / 36]],
    # padding zeroed: row 0's junk is gone, row 2's zeros beat its all-negative real values
    "max_zeroed": [[5.0, 4.0], [6.0, 4.0], [0.0, 0.0]],
    "cls_max_zeroed": [[3.0, 3.0], [4.0, 2.0], [-0.5, -1.0]],
}
# the masked poolings on the same batch, for contrast
MASKED = {
    "avg": [[3.0, 0.0], [3.0, 1.0], [-2.0, -1.25]],
    "cls_avg": [[2.0, 1.0], [2.5, 0.5], [-1.5, -1.625]],
    "max": [[5.0, 4.0], [6.0, 4.0], [-1.0, -0.5]],
    "last": [[5.0, -6.0], [0.0, 4.0], [-3.0, -0.5]],
}


def test_every_official_pooling_has_a_hand_computed_case_and_a_source():
    assert set(OFFICIAL_POOLINGS) == set(EXPECTED) == set(OFFICIAL_POOLING_SOURCES) == BATCH_DEPENDENT_POOLINGS
    assert set(EVAL_POOLINGS) == set(POOLINGS) | set(OFFICIAL_POOLINGS)
    # kept out of POOLINGS: never a trained model's pooling, never exported to sentence-transformers
    assert not set(POOLINGS) & set(OFFICIAL_POOLINGS)
    for name, src in OFFICIAL_POOLING_SOURCES.items():
        assert src.masked is None or src.masked in POOLINGS, name
        assert (src.release, src.commit) in {("0.1.1", "fcb6223"), ("0.4.6", "1c5515b")}
        assert src.describe().startswith(f"official arithmetic of {src.masked or src.strategy} (angle-emb {src.release} ")
    assert OFFICIAL_POOLING_SOURCES["cls_avg_padded"].describe() == (
        "official arithmetic of cls_avg (angle-emb 0.1.1 (fcb6223 angle_emb/angle.py Pooler.__call__, "
        "pooling_strategy='cls_avg')): the mean runs over every position, padding included"
    )
    assert OFFICIAL_POOLING_SOURCES["cls_max_zeroed"].strategy == "cls_max"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_official_pooling_by_hand(name):
    out = pool(name, HIDDEN, MASK)
    torch.testing.assert_close(out, torch.tensor(EXPECTED[name], dtype=torch.float64))
    masked = OFFICIAL_POOLING_SOURCES[name].masked
    if masked is not None:
        # the padded rows (0 and 2) are where the arithmetic differs; the test batch shows it
        assert not torch.allclose(out, pool(masked, HIDDEN, MASK)), name


def test_masked_poolings_unchanged_on_the_same_batch():
    for name, want in MASKED.items():
        torch.testing.assert_close(pool(name, HIDDEN, MASK), torch.tensor(want, dtype=torch.float64))


def test_zeroed_max_wins_over_all_negative_states_only_where_padded():
    hidden = -torch.arange(1, 9, dtype=torch.float32).reshape(1, 4, 2)  # -1 .. -8
    padded = torch.tensor([[1, 1, 0, 0]])
    torch.testing.assert_close(pool("max_zeroed", hidden, padded), torch.zeros(1, 2))
    torch.testing.assert_close(pool("max", hidden, padded), torch.tensor([[-1.0, -2.0]]))
    full = torch.ones(1, 4, dtype=torch.long)
    torch.testing.assert_close(pool("max_zeroed", hidden, full), torch.tensor([[-1.0, -2.0]]))


def test_batchsum_depends_on_the_neighbours():
    # the same row alone and beside a longer one: its average shrinks by its share of the batch's tokens
    row, other = HIDDEN[0:1], HIDDEN[1:2]
    alone = pool("avg_batchsum", row, MASK[0:1])
    together = pool("avg_batchsum", torch.cat([row, other]), torch.cat([MASK[0:1], MASK[1:2]]))[0:1]
    torch.testing.assert_close(alone, pool("avg", row, MASK[0:1]))
    torch.testing.assert_close(together, alone * 3 / 7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_variants_equal_masked_on_an_unpadded_batch(dtype):
    torch.manual_seed(0)
    hidden = torch.randn(3, 5, 4, dtype=dtype)
    full = torch.ones(3, 5, dtype=torch.long)
    for name, src in OFFICIAL_POOLING_SOURCES.items():
        got = pool(name, hidden, full)
        if src.masked is None:  # cls_max: (cls + max) / 2
            want = (pool("cls", hidden, full) + pool("max", hidden, full)) / 2
        elif name.endswith("_batchsum"):
            # the batch's token count is B x T: each row's mean over B; a batch of one is the masked pooling
            want = pool(src.masked, hidden, full)
            if name == "avg_batchsum":
                torch.testing.assert_close(got, want / 3)
            for r in range(3):
                torch.testing.assert_close(pool(name, hidden[r : r + 1], full[r : r + 1]), want[r : r + 1])
            continue
        else:
            want = pool(src.masked, hidden, full)
        torch.testing.assert_close(got, want, rtol=0, atol=0 if dtype == torch.float64 else 1e-6)


def test_unknown_pooling_names_the_official_ones():
    with pytest.raises(ValueError, match="unknown pooling 'mean'.*cls_avg_padded"):
        pool("mean", HIDDEN, MASK)


# ---------------------------------------------------------------------------
# Encoder: eval_pooling, exact batches

TEXTS = ["a short one", "a somewhat longer sentence than the first", "mid length text", "x"]


def _by_hand(model_dir, pooling: str, batch: list[str]) -> np.ndarray:
    """One batch padded to its longest (right), the transformer's top layer pooled with pool()."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    enc = tok(batch, padding="longest", truncation=True, max_length=128, return_tensors="pt")
    assert tok.padding_side == "right"
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    return pool(pooling, hidden, enc["attention_mask"]).numpy()


def test_eval_pooling_overrides_the_recorded_pooling_on_purpose(trained_cls):
    with pytest.raises(ValueError, match="trained with pooling 'cls', asked for 'cls_avg'.*eval_pooling='cls_avg'"):
        Encoder(trained_cls, pooling="cls_avg", device="cpu")
    plain = Encoder(trained_cls, device="cpu")
    assert (plain.pooling, plain.trained_pooling) == ("cls", "cls")
    enc = Encoder(trained_cls, eval_pooling="cls_avg_padded", device="cpu")
    assert (enc.pooling, enc.trained_pooling) == ("cls_avg_padded", "cls")
    # the recorded pooling may still be named alongside
    assert Encoder(trained_cls, pooling="cls", eval_pooling="max_zeroed", device="cpu").pooling == "max_zeroed"
    with pytest.raises(ValueError, match="unknown eval_pooling 'mean'"):
        Encoder(trained_cls, eval_pooling="mean", device="cpu")

    batches = [TEXTS[:2], TEXTS[2:]]
    got = enc.encode_batches(batches)
    assert got.shape == (4, 32) and got.dtype == np.float32
    want = np.concatenate([_by_hand(trained_cls, "cls_avg_padded", b) for b in batches])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    # what the override changes: not the recorded cls
    assert not np.allclose(got, plain.encode_batches(batches), atol=1e-3)


def test_backbone_takes_an_eval_pooling_but_not_as_its_own_pooling(tiny_bert):
    with pytest.raises(ValueError, match="unknown pooling 'cls_avg_padded'.*pass it as eval_pooling"):
        Encoder(tiny_bert, pooling="cls_avg_padded", device="cpu")
    enc = Encoder(tiny_bert, eval_pooling="avg_batchsum", device="cpu")
    assert (enc.pooling, enc.trained_pooling) == ("avg_batchsum", None)
    enc = Encoder(tiny_bert, pooling="avg", eval_pooling="avg_batchsum", device="cpu")
    assert (enc.pooling, enc.trained_pooling) == ("avg_batchsum", "avg")


@pytest.mark.parametrize("pooling", ["cls_avg", "max"])
def test_encode_batches_with_masked_pooling_equals_encode(tiny_bert, pooling):
    enc = Encoder(tiny_bert, pooling=pooling, device="cpu")
    order = [3, 1, 0, 2]
    got = enc.encode_batches([[TEXTS[i] for i in order[:3]], [TEXTS[order[3]]]])
    np.testing.assert_allclose(got, enc.encode(TEXTS)[order], rtol=0, atol=1e-5)


def test_batch_dependent_pooling_follows_the_batch_it_is_given(tiny_bert):
    padded = Encoder(tiny_bert, eval_pooling="cls_avg_padded", device="cpu")
    masked = Encoder(tiny_bert, pooling="cls_avg", device="cpu")
    short, long_ = TEXTS[0], TEXTS[1]
    alone, beside = padded.encode_batches([[short]]), padded.encode_batches([[short, long_]])[:1]
    assert np.abs(alone - beside).max() > 1e-3  # the long neighbour pads the short text
    np.testing.assert_allclose(masked.encode_batches([[short]]), masked.encode_batches([[short, long_]])[:1], atol=1e-5)
    np.testing.assert_allclose(alone, masked.encode_batches([[short]]), atol=1e-6)  # no padding: the same
    assert padded.encode_batches([]).shape == (0, 32)
    with pytest.raises(ValueError, match="empty"):
        padded.encode_batches([[short], []])


def test_bucketing_keeps_a_batch_dependent_pooling_on_the_whole_batch(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    enc = tok(TEXTS, padding="longest", return_tensors="pt")
    with torch.no_grad():
        for name in ("cls_avg_padded", "avg_batchsum"):
            whole = embed(model, name, enc["input_ids"], enc["attention_mask"])
            torch.testing.assert_close(embed_bucketed(model, name, enc["input_ids"], enc["attention_mask"], 3), whole)


# ---------------------------------------------------------------------------
# SentEval's STS batches

S1 = ["b b b", "a", "c c", "d d", "e"]
S2 = ["x", "y y", "z", "w w w", "v"]
SCORES = [2.0, 4.0, 1.0, 1.0, 0.5]


def test_senteval_orders():
    assert senteval_order(S1, S2, SCORES, "file") == [0, 1, 2, 3, 4]
    # (len s1, len s2, score): lengths 3,1,2,2,1 / 1,2,1,3,1 -> e(1,1), a(1,2), c(2,1), d(2,3), b(3,1)
    assert senteval_order(S1, S2, SCORES, "length_score") == [4, 1, 2, 3, 0]
    # by score, ties in file order (sorted is stable): 0.5, 1.0 (row 2), 1.0 (row 3), 2.0, 4.0
    assert senteval_order(S1, S2, SCORES, "score") == [4, 2, 3, 0, 1]
    with pytest.raises(ValueError, match="unknown SentEval sort"):
        senteval_order(S1, S2, SCORES, "length")
    with pytest.raises(ValueError, match="differ in length"):
        senteval_order(S1, S2[:-1], SCORES, "file")


def test_length_ties_fall_back_to_score_then_file_order():
    s1, s2 = ["a b", "c d", "e f", "g h"], ["x", "y", "z", "w"]
    assert senteval_order(s1, s2, [3.0, 1.0, 3.0, 2.0], "length_score") == [1, 3, 0, 2]


def test_senteval_batches_are_consecutive_chunks():
    b = senteval_sts_batches(S1, S2, SCORES, 2, "score")
    assert b.order == [4, 2, 3, 0, 1]
    assert b.batches == [[4, 2], [3, 0], [1]]
    assert senteval_sts_batches(S1, S2, SCORES, 16).batches == [[0, 1, 2, 3, 4]]
    with pytest.raises(ValueError, match="batch_size"):
        senteval_sts_batches(S1, S2, SCORES, 0)


def test_task_batches_sort_within_each_subset():
    table = pd.DataFrame(
        {
            "sentence1": S1 + ["q", "r r"],
            "sentence2": S2 + ["s", "t"],
            "score": SCORES + [0.0, 5.0],
            "subset": ["A"] * 5 + ["B"] * 2,
        }
    )
    got = task_batches(table, "sts12", 2, copy="angle")
    assert got.order == [4, 2, 3, 0, 1, 5, 6]
    assert got.batches == [[4, 2], [3, 0], [1], [5, 6]]  # no batch spans two subsets
    assert task_batches(table, "sts12", 2, copy="simcse").order == [4, 1, 2, 3, 0, 5, 6]
    stsb = table.assign(subset="stsb")
    assert task_batches(stsb, "stsb", 3).batches == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="unknown SentEval copy/task"):
        task_batches(table, "sts17", 2)


def test_official_settings():
    assert {c: SENTEVAL_SORTS[c]["stsb"] for c in SENTEVAL_SORTS} == {"simcse": "file", "angle": "file"}
    assert OFFICIAL_BATCH_SIZES["0.1.1"][1] == 16 and OFFICIAL_BATCH_SIZES["0.4.6"][1] == 2


def test_the_import_light_pooling_names_are_the_models():
    """The workflow plans with aoe.model.pooling_names (no torch at planning); the schema's enums list the same."""
    import yaml

    from aoe.model.pooling import OFFICIAL_POOLINGS, POOLINGS
    from aoe.model.pooling_names import EVAL_POOLING_NAMES, OFFICIAL_POOLING_NAMES, TRAIN_POOLINGS

    assert tuple(POOLINGS) == TRAIN_POOLINGS and tuple(OFFICIAL_POOLINGS) == OFFICIAL_POOLING_NAMES
    schema = yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)
    train = schema["$defs"]["train"]["properties"]
    assert [p for p in train["eval_pooling"]["enum"] if p] == list(EVAL_POOLING_NAMES)
    row = schema["properties"]["tables"]["additionalProperties"]["properties"]["rows"]["items"]["properties"]
    # a row's: a pooling, or an official one in SentEval batches of a named size (issue 69), the wildcard's pattern
    from aoe.model.pooling_names import BATCHED_EVAL_POOLING_RE

    names, batched = row["eval_pooling"]["anyOf"]
    assert names["enum"] == list(EVAL_POOLING_NAMES) and batched["pattern"] == f"^{BATCHED_EVAL_POOLING_RE}$"
