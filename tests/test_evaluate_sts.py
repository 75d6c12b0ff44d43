"""The STS protocol: cosine, SentEval's 'all' aggregation, one encoding per unique sentence."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cosine as scipy_cosine_distance
from scipy.stats import spearmanr
from sklearn.metrics.pairwise import cosine_similarity

from aoe.data.io import sha256_file
from aoe.evaluate.sts import PROTOCOL, TASKS, cosine_rows, evaluate_sts, sts_scores

DIM = 24


def bag_of_chars(text: str) -> np.ndarray:
    """A deterministic embedding: character counts hashed into DIM buckets (no Python hash randomisation)."""
    v = np.zeros(DIM, dtype=np.float32)
    for ch in text:
        v[(ord(ch) * 31) % DIM] += 1.0
    return v


class CountingEncoder:
    """encode(list[str]) -> (N, DIM); remembers every text it was asked to embed."""

    def __init__(self):
        self.calls = 0
        self.seen: Counter[str] = Counter()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.seen.update(texts)
        return np.stack([bag_of_chars(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)


def reference_sims(table: pd.DataFrame) -> np.ndarray:
    """Cosine of each pair, computed text by text with scipy."""
    return np.array(
        [1.0 - scipy_cosine_distance(bag_of_chars(a), bag_of_chars(b)) for a, b in zip(table.sentence1, table.sentence2)]
    )


# ---------------------------------------------------------------------------
# cosine_rows


def test_cosine_rows_matches_sklearn_and_scipy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 5)).astype(np.float32)
    b = rng.normal(size=(6, 5)).astype(np.float32)
    got = cosine_rows(a, b)
    assert got.shape == (6,)
    np.testing.assert_allclose(got, np.diag(cosine_similarity(a, b)), atol=1e-6)
    np.testing.assert_allclose(got, [1 - scipy_cosine_distance(x, y) for x, y in zip(a, b)], atol=1e-6)
    # float64 input stays exact to float64 precision
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(cosine_rows(a64, b64), np.diag(cosine_similarity(a64, b64)), rtol=1e-12)


def test_cosine_rows_by_hand_and_zero_vectors():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [3.0, 4.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0], [1.0, 1.0], [-3.0, -4.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [0.0, 1.0, 0.0, -1.0])
    assert np.isfinite(cosine_rows(np.zeros((1, 3)), np.zeros((1, 3)))).all()


# ---------------------------------------------------------------------------
# evaluate_sts on synthetic tables

WORDS = "apple river stone cloud quick lazy bright small green heavy old new".split()


def _sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=rng.integers(2, 6)))


def _table(rng: np.random.Generator, n: int, subsets: list[str], shared: list[str]) -> pd.DataFrame:
    rows = []
    for i in range(n):
        s1 = shared[i % len(shared)] if i % 3 == 0 else _sentence(rng)  # some sentences recur across tasks
        rows.append((s1, _sentence(rng), float(rng.uniform(0, 5)), subsets[i % len(subsets)]))
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "score", "subset"])


def _sts12_with_subsets_disagreeing(rng: np.random.Generator) -> pd.DataFrame:
    """Two subsets, each ranked perfectly by the encoder, whose gold scales are offset.

    Within a subset the gold score is the (bag-of-chars) cosine itself, so each
    subset's Spearman is 100. The subset holding the globally lowest cosine gets
    +10 on all its gold scores: that pair then has a higher gold than every pair
    of the other subset but a lower cosine, so the Spearman over the concatenation
    ('all') is below 100 and differs from the mean of the subsets.
    """
    parts = []
    for subset in ("MSRpar", "MSRvid"):
        df = pd.DataFrame([(_sentence(rng), _sentence(rng)) for _ in range(12)], columns=["sentence1", "sentence2"])
        df["score"] = reference_sims(df)
        df["subset"] = subset
        parts.append(df)
    lowest = min(range(2), key=lambda k: parts[k]["score"].min())
    parts[lowest]["score"] += 10.0
    return pd.concat(parts, ignore_index=True)


@pytest.fixture
def tables() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(1)
    shared = [_sentence(rng) for _ in range(4)]
    out = {"STS12": _sts12_with_subsets_disagreeing(rng)}
    out["STS13"] = _table(rng, 15, ["FNWN", "headlines", "OnWN"], shared)
    out["STS14"] = _table(rng, 18, ["deft-forum", "images"], shared)
    out["STS15"] = _table(rng, 14, ["belief", "answers-forums"], shared)
    out["STS16"] = _table(rng, 16, ["plagiarism", "headlines"], shared)
    out["STSB"] = _table(rng, 20, ["stsb"], shared)
    out["SICKR"] = _table(rng, 17, ["sickr"], shared)
    return out


def test_all_tasks_match_scipy_on_the_concatenation(tables):
    enc = CountingEncoder()
    result = evaluate_sts(enc, tables)
    assert set(result["tasks"]) == set(TASKS)
    for task, table in tables.items():
        sims = reference_sims(table)
        expected = 100 * spearmanr(sims, table["score"]).statistic
        got = result["tasks"][task]
        assert got["spearman"] == pytest.approx(expected, abs=1e-9), task
        assert got["n"] == len(table)
        assert {k: v["n"] for k, v in got["subsets"].items()} == table["subset"].value_counts().to_dict()
        for subset, idx in table.groupby("subset").groups.items():
            sub = table.loc[idx]
            assert got["subsets"][subset]["spearman"] == pytest.approx(
                100 * spearmanr(reference_sims(sub), sub["score"]).statistic, abs=1e-9
            )
    assert result["avg"] == pytest.approx(np.mean([result["tasks"][t]["spearman"] for t in TASKS]), abs=1e-12)


def test_sts12_is_all_not_mean_of_subsets(tables):
    result = evaluate_sts(CountingEncoder(), tables)
    sts12 = result["tasks"]["STS12"]
    assert sts12["subsets"]["MSRpar"]["spearman"] == pytest.approx(100.0)
    assert sts12["subsets"]["MSRvid"]["spearman"] == pytest.approx(100.0)
    mean_of_subsets = np.mean([s["spearman"] for s in sts12["subsets"].values()])
    assert sts12["spearman"] < mean_of_subsets - 1.0


def test_stsb_uses_its_own_table(tables):
    base = evaluate_sts(CountingEncoder(), tables)
    # reversing STSB's gold scores flips its sign and changes only STSB
    flipped = dict(tables)
    flipped["STSB"] = tables["STSB"].assign(score=5.0 - tables["STSB"]["score"])
    result = evaluate_sts(CountingEncoder(), flipped)
    assert result["tasks"]["STSB"]["spearman"] == pytest.approx(-base["tasks"]["STSB"]["spearman"])
    for task in TASKS:
        if task != "STSB":
            assert result["tasks"][task]["spearman"] == pytest.approx(base["tasks"][task]["spearman"])


def test_each_unique_sentence_encoded_once(tables):
    enc = CountingEncoder()
    result = evaluate_sts(enc, tables)
    every = [s for t in tables.values() for col in ("sentence1", "sentence2") for s in t[col]]
    assert enc.calls == 1
    assert set(enc.seen) == set(every)
    assert max(enc.seen.values()) == 1
    assert len(set(every)) < len(every)  # the fixture really has repeats
    emb = result["embedding"]
    assert emb["unique_sentences"] == len(set(every))
    assert emb["sentences_in_tasks"] == len(every)
    assert emb["dedup_saved_share"] == pytest.approx(1 - len(set(every)) / len(every))


def test_missing_task_raises_naming_it(tables):
    del tables["SICKR"]
    enc = CountingEncoder()
    with pytest.raises(KeyError, match="SICKR"):
        evaluate_sts(enc, tables)
    assert enc.calls == 0


def test_extra_tables_are_not_averaged(tables):
    base = evaluate_sts(CountingEncoder(), tables)
    extra = dict(tables, OTHER=tables["STSB"].assign(score=5.0 - tables["STSB"]["score"]))
    assert evaluate_sts(CountingEncoder(), extra)["avg"] == pytest.approx(base["avg"])


def test_sts_scores_pearson_and_subsets_by_hand():
    table = pd.DataFrame({"score": [1.0, 2.0, 3.0, 4.0], "subset": ["a", "a", "b", "b"]})
    sims = np.array([0.1, 0.2, 0.4, 0.3])
    result = sts_scores(sims, table)
    # ranks of sims 1 2 4 3 vs gold 1 2 3 4: rho = 1 - 6 * (0 + 0 + 1 + 1) / (4 * 15) = 0.8
    assert result["spearman"] == pytest.approx(80.0)
    assert result["subsets"] == {"a": {"spearman": pytest.approx(100.0), "n": 2}, "b": {"spearman": pytest.approx(-100.0), "n": 2}}
    assert result["n"] == 4


# ---------------------------------------------------------------------------
# real data

# SemEval-2016 STS test: scored pairs per subset (1,186 in all).
STS16_SUBSETS = {
    "answer-answer": 254,
    "headlines": 249,
    "plagiarism": 230,
    "postediting": 244,
    "question-question": 209,
}


def test_real_sts16_counts(mirror):
    from aoe.data.sts import read_sts

    downstream = mirror / "senteval" / "downstream"
    if not (downstream / "STS" / "STS16-en-test").is_dir():
        pytest.skip(f"no STS16 in the mirror at {downstream}")
    table = read_sts(downstream, "sts16", "test")
    sims = cosine_rows(
        np.stack([bag_of_chars(s) for s in table.sentence1]), np.stack([bag_of_chars(s) for s in table.sentence2])
    )
    result = sts_scores(sims, table)
    assert result["n"] == 1186
    assert {k: v["n"] for k, v in result["subsets"].items()} == STS16_SUBSETS
    assert list(result["subsets"]) == list(STS16_SUBSETS)  # SentEval's order
    assert result["spearman"] == pytest.approx(100 * spearmanr(sims, table["score"]).statistic)


# ---------------------------------------------------------------------------
# run_sts_evaluation: the rule's entry point, on the tiny BERT


def _written(tables: dict[str, pd.DataFrame], root) -> tuple[list[str], list[str]]:
    """The task tables as prepare_sts writes them: (parquet paths, manifest paths), in TASKS order."""
    import json

    table_paths, manifests = [], []
    for task, dataset in TASKS.items():
        # not under the data set's own name, whose contract (aoe.data.contracts) these synthetic scores break
        # (SICK-R's below 1, an offset subset's above 5): the evaluation finds the data set in the manifest
        path = root / f"synthetic_{dataset}" / "test.parquet"
        path.parent.mkdir()
        tables[task].to_parquet(path, index=False)
        manifest = path.with_name("test.manifest.json")
        manifest.write_text(json.dumps({"dataset": dataset, "table_sha256": sha256_file(path), "rows": len(tables[task])}))
        table_paths.append(str(path))
        manifests.append(str(manifest))
    return table_paths, manifests


def test_run_sts_evaluation_writes_the_result(tables, tiny_bert, tmp_path):
    import json

    from aoe.evaluate.run import run_sts_evaluation
    from aoe.model.encoder import Encoder

    table_paths, manifests = _written(tables, tmp_path)
    out = tmp_path / "eval" / "sts.json"
    cell = {"backbone": "tiny", "objective": "pretrained", "trainset": "none", "seed": "0"}
    result = run_sts_evaluation(
        tiny_bert, table_paths[::-1], manifests[::-1], out, pooling="cls", batch_size=4, max_length=32, cell=cell, device="cpu"
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["model"]["cell"] == cell and result["model"]["trained"] is False
    assert result["model"]["aoe_config_sha256"] is None  # a backbone as downloaded has no recipe
    assert result["protocol"]["pooling"] == "cls" and result["protocol"]["max_length"] == 32
    stsb_table = next(t for t in table_paths if "_stsb" in t)
    assert result["data"]["stsb"] == {"table_sha256": sha256_file(stsb_table), "rows": len(tables["STSB"])}
    # the STSB number from an independent encoding of its table (manifests given in another order)
    enc = Encoder(tiny_bert, pooling="cls", device="cpu")
    t = tables["STSB"]
    sims = cosine_rows(enc.encode(list(t.sentence1), max_length=32), enc.encode(list(t.sentence2), max_length=32))
    assert result["tasks"]["STSB"]["spearman"] == pytest.approx(100 * spearmanr(sims, t["score"]).statistic, abs=1e-6)
    assert sorted(p.name for p in out.parent.iterdir()) == ["sts.json"]

    # through the embedding cache: the first run embeds, a later job reads the same set back
    cached = [
        run_sts_evaluation(tiny_bert, table_paths, manifests, tmp_path / f"c{i}.json", pooling="cls", batch_size=4,
                           max_length=32, device="cpu", cache_root=tmp_path / "emb")
        for i in range(2)
    ]
    assert [c["embedding"]["cache"]["hit"] for c in cached] == [False, True]
    assert cached[0]["tasks"] == cached[1]["tasks"] == result["tasks"]
    assert result["protocol"]["batch_size"] == 4 and "batch_size" not in PROTOCOL

    with pytest.raises(KeyError, match="sickr"):
        run_sts_evaluation(tiny_bert, table_paths[:-1], manifests[:-1], tmp_path / "x.json", pooling="cls", device="cpu")

    # a CPU budget: a seeded subset of every task but the uncapped ones, recorded in the protocol
    capped = run_sts_evaluation(
        tiny_bert, table_paths, manifests, tmp_path / "capped.json", pooling="cls", batch_size=4, max_length=32,
        device="cpu", max_pairs=5, uncapped_tasks=["STSB"],
    )
    sub = capped["protocol"]["subsample"]
    assert sub["max_pairs_per_task"] == 5 and sub["uncapped_tasks"] == ["STSB"]
    assert sub["pairs"]["STSB"] == len(tables["STSB"]) and all(
        n == min(5, len(tables[t])) for t, n in sub["pairs"].items() if t != "STSB"
    )
    assert capped["tasks"]["STSB"] == result["tasks"]["STSB"]
    assert capped["tasks"]["STS12"]["n"] == min(5, len(tables["STS12"]))


def test_cap_pairs_is_seeded_and_keeps_order():
    from aoe.evaluate.sts import cap_pairs

    t = pd.DataFrame({"sentence1": list("abcdefghij"), "sentence2": list("klmnopqrst"), "score": range(10)})
    a, b = cap_pairs(t, 4), cap_pairs(t, 4)
    assert len(a) == 4 and a.equals(b) and list(a.index) == sorted(a.index)
    assert cap_pairs(t, 20) is t


def test_a_batch_dependent_eval_pooling_embeds_in_sentevals_batches(tables, tiny_bert, tmp_path):
    """An official pooling over padded batches (0.1.1's cls_avg) is scored as the official eval.py
    scored it: each pair's texts embedded in SentEval's batch of 16 (AnglE's copy: STS12-16 by gold
    score, STS-B and SICK-R in file order), not deduplicated or cached; the result says which pooling
    replaced the trained one."""
    from aoe.evaluate.run import run_sts_evaluation
    from aoe.evaluate.senteval_batches import task_batches
    from aoe.model.encoder import Encoder

    table_paths, manifests = _written(tables, tmp_path)
    result = run_sts_evaluation(tiny_bert, table_paths, manifests, tmp_path / "sts.pool.json", pooling="cls", max_length=32,
                                device="cpu", cache_root=tmp_path / "emb", eval_pooling="cls_avg_padded")
    assert result["protocol"]["pooling"] == "cls_avg_padded" and result["protocol"]["trained_pooling"] == "cls"
    assert result["protocol"]["batch_size"] == 16 and result["protocol"]["batches"]["senteval_copy"] == "angle"
    assert "cache" not in result.get("embedding", {}) and not (tmp_path / "emb").exists()
    # by hand: STS13's pairs in SentEval's batches (per subset, by gold score), the padded mean of each batch
    enc = Encoder(tiny_bert, pooling="cls", device="cpu", eval_pooling="cls_avg_padded")
    t = tables["STS13"].reset_index(drop=True)
    batches = task_batches(t, "sts13", 16).batches
    u, v = (np.empty((len(t), enc.hidden_size), dtype=np.float32) for _ in range(2))
    for batch in batches:
        u[batch] = enc.encode_batches([[t.sentence1[i] for i in batch]], max_length=32)
        v[batch] = enc.encode_batches([[t.sentence2[i] for i in batch]], max_length=32)
    assert result["tasks"]["STS13"]["spearman"] == pytest.approx(100 * spearmanr(cosine_rows(u, v), t["score"]).statistic, abs=1e-6)
    # the masked cls_avg of the same model differs: padding is in the official mean
    masked = run_sts_evaluation(tiny_bert, table_paths, manifests, tmp_path / "sts.masked.json", pooling="cls", max_length=32,
                                device="cpu", eval_pooling="cls_avg")
    assert masked["protocol"]["pooling"] == "cls_avg" and masked["tasks"]["STS13"] != result["tasks"]["STS13"]
    # a row may name another SentEval batch size (issue 69: which evaluation made the released AnglE-BERT's numbers)
    four = run_sts_evaluation(tiny_bert, table_paths, manifests, tmp_path / "sts.bs4.json", pooling="cls", max_length=32,
                              device="cpu", tasks=["STS13"], eval_pooling="cls_avg_padded-bs4")
    assert (four["protocol"]["pooling"], four["protocol"]["batch_size"]) == ("cls_avg_padded", 4)
    assert len(task_batches(t, "sts13", 4).batches) > len(batches)  # other batches than the 16 above
    for batch in task_batches(t, "sts13", 4).batches:
        u[batch] = enc.encode_batches([[t.sentence1[i] for i in batch]], max_length=32)
        v[batch] = enc.encode_batches([[t.sentence2[i] for i in batch]], max_length=32)
    assert four["tasks"]["STS13"]["spearman"] == pytest.approx(100 * spearmanr(cosine_rows(u, v), t["score"]).statistic, abs=1e-6)


def test_a_released_checkpoint_takes_an_evaluation_only_pooling_as_a_trained_model_does(tables, tiny_bert, tmp_path):
    """Table released's AnglE-BERT row: the downloaded checkpoint (laid out by rule fetch_released, its own pooling
    cls_avg in aoe_config.json) scored by rule evaluate_sts_eval_pooling as that rule calls it (no pooling
    param for a released cell, the row's eval_pooling): 0.1.1's padded cls_avg in SentEval's batches of 16;
    its sts.json keeps the masked cls_avg."""
    from aoe.evaluate.run import run_sts_evaluation
    from aoe.model.released import materialize_released

    ckpt = tmp_path / "released" / "angle-bert-base-nli-v1"
    materialize_released("angle-bert-base-nli-v1", {"path": str(tiny_bert), "backbone": "bert-base-uncased", "pooling": "cls_avg"}, ckpt)
    table_paths, manifests = _written(tables, tmp_path)
    cell = {"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-base-nli-v1", "seed": "0"}
    pooled = run_sts_evaluation(ckpt, table_paths, manifests, tmp_path / "sts.pool-cls_avg_padded.json", max_length=32, device="cpu",
                                cell={**cell, "eval_pooling": "cls_avg_padded"}, eval_pooling="cls_avg_padded")
    own = run_sts_evaluation(ckpt, table_paths, manifests, tmp_path / "sts.json", max_length=32, device="cpu", cell=cell)
    assert (pooled["protocol"]["pooling"], pooled["protocol"]["trained_pooling"], pooled["protocol"]["batch_size"]) == ("cls_avg_padded", "cls_avg", 16)
    assert own["protocol"]["pooling"] == "cls_avg" and own["tasks"]["STS13"] != pooled["tasks"]["STS13"]
    assert pooled["model"]["cell"]["eval_pooling"] == "cls_avg_padded"  # what the table builder selects the row's values by
    # one hop from a result to the recipe it scored: the sha256 of the folder's aoe_config.json
    digest = hashlib.sha256((ckpt / "aoe_config.json").read_bytes()).hexdigest()
    assert pooled["model"]["aoe_config_sha256"] == own["model"]["aoe_config_sha256"] == digest
