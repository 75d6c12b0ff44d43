"""MTEB through the mteb package: the encoder wrapper, local (hub-free) tasks, averaging, provenance.

The check against the SentEval protocol runs MiniLM-L6 on STS-B test through mteb
(local task) and through aoe.evaluate.sts: the same embeddings and the same cosine,
so the same Spearman.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# find_spec, not importorskip: importing mteb at collection cost every xdist worker ~3 CPU-s, the one that never
# runs this file too (aoe.evaluate.mteb_eval imports it where it uses it)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mteb") is None, reason="mteb not installed")

from aoe.evaluate.mteb_eval import (  # noqa: E402
    AOE_PROMPT,
    CATEGORIES,
    AoEMtebEncoder,
    benchmark_tasks,
    run_mteb_evaluation,
    summarize,
)
from aoe.data.io import sha256_file  # noqa: E402
from aoe.evaluate.mteb_local import MtebEvalError, local_task, local_task_inputs  # noqa: E402
from aoe.model.prompts import apply_prompt  # noqa: E402


def _batches(texts, size=3):
    """What mteb hands to encode: an iterable of {"text": [...]} batches (a DataLoader in mteb)."""
    return [{"text": texts[i : i + size]} for i in range(0, len(texts), size)]


def _meta():
    from aoe.evaluate.mteb_local import _task_classes

    return _task_classes()["STSBenchmarkLocal"].metadata


def _write_table(folder: Path, df: pd.DataFrame, dataset: str = "stsb") -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    table, manifest = folder / "test.parquet", folder / "test.manifest.json"
    df.to_parquet(table)
    manifest.write_text(json.dumps({"dataset": dataset, "split": "test", "rows": len(df), "table_sha256": sha256_file(table)}))
    return table, manifest


def _synthetic_sts(n: int = 40, seed: int = 0, low: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    words = "apple river stone cloud quick lazy bright small green heavy old new dog cat runs sleeps".split()
    sent = lambda: " ".join(rng.choice(words, size=rng.integers(2, 8)))  # noqa: E731
    return pd.DataFrame(
        {
            "sentence1": [sent() for _ in range(n)],
            "sentence2": [sent() for _ in range(n)],
            "score": rng.uniform(low, 5, size=n),  # low: SICK's scale starts at 1
            "split": "test",
            "subset": "stsb",
        }
    )


def _bag_of_chars(texts, dim=24):
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for ch in text:
            out[i, (ord(ch) * 31) % dim] += 1.0
    return out


# ---------------------------------------------------------------------------
# averaging


def test_summarize_category_and_overall_means():
    scores = {"A": 80.0, "B": 60.0, "C": 50.0, "D": 70.0, "E": 40.0}
    types = {"A": "STS", "B": "STS", "C": "Classification", "D": "Retrieval", "E": "Retrieval"}
    s = summarize(scores, types)
    assert s["categories"] == {"classification": 50.0, "retrieval": 55.0, "sts": 70.0}
    # overall = mean over tasks (leaderboard), not over categories (58.33)
    assert s["avg"] == pytest.approx(60.0)
    assert s["n_missing"] == 0 and s["n_tasks"] == 5


def test_summarize_missing_task_nulls_its_category_and_the_average():
    scores = {"A": 80.0, "B": None, "C": 50.0, "D": float("nan")}
    types = {"A": "STS", "B": "STS", "C": "Classification", "D": "Clustering"}
    s = summarize(scores, types)
    assert s["categories"] == {"classification": 50.0, "clustering": None, "sts": None}
    assert s["avg"] is None
    assert s["n_missing"] == 2


def test_summarize_unknown_type_names_the_task():
    with pytest.raises(MtebEvalError, match="X"):
        summarize({"X": 1.0}, {"X": "BitextMining"})


@pytest.mark.slow
def test_benchmark_resolves_56_tasks_covered_by_the_categories():
    tasks = benchmark_tasks("MTEB(eng, v1)")  # task metadata ship with mteb: no hub needed
    assert len(tasks) == 56
    types = {t.metadata.name: t.metadata.type for t in tasks}
    s = summarize({n: None for n in types}, types)
    assert s["tasks_per_category"] == {
        "classification": 12,
        "clustering": 11,
        "pair_classification": 3,
        "reranking": 4,
        "retrieval": 15,
        "sts": 10,
        "summarization": 1,
    }
    assert set(CATEGORIES.values()) == set(s["categories"])


@pytest.mark.slow
def test_unknown_benchmark_and_local_task_are_clear_errors():
    with pytest.raises(MtebEvalError, match="NoSuchBench"):
        benchmark_tasks("NoSuchBench")
    with pytest.raises(MtebEvalError, match="STSBLocal"):
        local_task_inputs(["STSBLocal"])
    assert local_task_inputs(["STSBenchmarkLocal", "TRECLocal", "SICKRLocal"]) == {"sts": ["stsb", "sickr"], "transfer": ["TREC"]}


# ---------------------------------------------------------------------------
# the wrapper


def test_prompt_template_and_query_instruction(tiny_bert):
    from mteb.types import PromptType

    wrapper = AoEMtebEncoder(tiny_bert, pooling="cls", device="cpu", prompt=AOE_PROMPT, query_instruction="Q: ")
    seen = []
    inner = wrapper._encode
    wrapper._encode = lambda texts: seen.extend(texts) or inner(texts)
    texts = ["a dog {runs}", "a cat", "a dog {runs}"]
    emb_q = wrapper.encode(_batches(texts), task_metadata=_meta(), hf_split="test", hf_subset="default", prompt_type=PromptType.query)
    # the instruction is prefixed here; the encoder wraps the prompt around it (aoe.model.tokens.tokenize_texts)
    assert seen == ["Q: a dog {runs}", "Q: a cat"]
    assert wrapper.encoder.prompt == AOE_PROMPT
    assert emb_q.shape == (3, 32) and emb_q.dtype == np.float32
    np.testing.assert_array_equal(emb_q[0], emb_q[2])  # duplicates embedded once, rows repeated
    seen.clear()
    emb_d = wrapper.encode(_batches(texts), task_metadata=_meta(), hf_split="test", hf_subset="default", prompt_type=PromptType.document)
    assert seen == ["a dog {runs}", "a cat"]
    assert not np.allclose(emb_q, emb_d)
    seen.clear()
    wrapper.encode(_batches(texts), task_metadata=_meta(), hf_split="test", hf_subset="default")  # STS: no prompt type
    assert seen == ["a dog {runs}", "a cat"]
    meta = wrapper.mteb_model_meta
    assert meta.embed_dim == 32 and meta.use_instructions is True and str(meta.similarity_fn_name.value) == "cosine"


def test_prompt_must_have_placeholder_and_agree_with_training(tiny_bert, tmp_path):
    with pytest.raises(MtebEvalError, match="placeholder"):
        AoEMtebEncoder(tiny_bert, pooling="cls", device="cpu", prompt="no slot")
    model = tmp_path / "model"
    shutil.copytree(tiny_bert, model)
    (model / "aoe_config.json").write_text(json.dumps({"pooling": "cls", "prompt": "P {text}"}))
    assert AoEMtebEncoder(model, device="cpu").prompt == "P {text}"  # recorded by training
    with pytest.raises(MtebEvalError, match="trained with prompt"):
        AoEMtebEncoder(model, device="cpu", prompt=AOE_PROMPT)
    assert apply_prompt("x", None) == "x"


def test_llm_last_token_pooling_with_prompt(tiny_llama):
    import torch

    wrapper = AoEMtebEncoder(tiny_llama, pooling="last", device="cpu", prompt=AOE_PROMPT)
    texts = ["a", "a much longer sentence about a dog that runs in the park", "two words"]
    got = wrapper.encode(_batches(texts, 8), task_metadata=_meta(), hf_split="test", hf_subset="default")
    tok, model = wrapper.encoder.tokenizer, wrapper.encoder.model
    assert tok.padding_side == "right"
    with torch.inference_mode():
        for i, text in enumerate(texts):
            # each text alone (no padding): its last token's hidden state
            ids = tok(apply_prompt(text, AOE_PROMPT), return_tensors="pt")
            h = model(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]).last_hidden_state[0, -1]
            np.testing.assert_allclose(got[i], h.numpy(), atol=1e-5, err_msg=text)
            bare = tok(text, return_tensors="pt")
            h_bare = model(input_ids=bare["input_ids"], attention_mask=bare["attention_mask"]).last_hidden_state[0, -1]
            assert not np.allclose(got[i], h_bare.numpy(), atol=1e-3)  # the prompt was applied


def test_pad_token_fallback(tiny_llama):
    from transformers import AutoTokenizer

    from aoe.model.tokens import ensure_pad_token

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    tok.pad_token = None
    ensure_pad_token(tok)
    assert tok.pad_token == "[UNK]"  # UNK first, as the official angle-emb pads LLaMA with id 0 (<unk>)
    tok.pad_token, tok.unk_token, tok.eos_token = None, None, "[SEP]"
    ensure_pad_token(tok)
    assert tok.pad_token == "[SEP]"


# ---------------------------------------------------------------------------
# local tasks through mteb


def test_mteb_sts_scoring_equals_ours_on_the_same_embeddings(tiny_bert, tmp_path):
    """No mirror needed: mteb's STS score on a local task = aoe.evaluate.sts's cosine Spearman of the embeddings it got.

    A random tiny BERT gives near-parallel embeddings (cosines ~0.999), where float32
    rounding of sklearn's cosine (1 - |a/|a| - b/|b||^2 / 2) reorders pairs, so the
    wrapper's encoder is swapped for a bag-of-characters one with well spread cosines;
    the MiniLM test below compares whole runs on a real model.
    """
    import mteb

    from aoe.evaluate.sts import cosine_rows, sts_scores

    df = _synthetic_sts()
    table, manifest = _write_table(tmp_path / "stsb", df)
    task = local_task("STSBenchmarkLocal", tables={"stsb": (table, manifest)})
    wrapper = AoEMtebEncoder(tiny_bert, pooling="cls", device="cpu")
    wrapper._encode = _bag_of_chars
    calls = []
    encode = wrapper.encode
    wrapper.encode = lambda *a, **k: calls.append(encode(*a, **k)) or calls[-1]
    res = mteb.evaluate(wrapper, [task], cache=None, encode_kwargs={"batch_size": 16}, show_progress_bar=False)
    assert len(calls) == 2  # sentence1 column, then sentence2
    ours = sts_scores(cosine_rows(calls[0], calls[1]), df, "STSB")
    got = res.task_results[0].scores["test"][0]
    assert 100 * got["cosine_spearman"] == pytest.approx(ours["spearman"], abs=1e-4)
    assert 100 * got["cosine_pearson"] == pytest.approx(ours["pearson"], abs=1e-4)


def test_result_json_records_protocol_data_and_provenance(tiny_bert, tmp_path):
    table, manifest = _write_table(tmp_path / "stsb", _synthetic_sts())
    out = tmp_path / "mteb.json"
    r = run_mteb_evaluation(
        tiny_bert, out, local_tasks=["STSBenchmarkLocal"], tables=[str(table)], manifests=[str(manifest)], pooling="cls", device="cpu"
    )
    on_disk = json.loads(out.read_text())
    assert on_disk["avg"] == on_disk["categories"]["sts"] == r["tasks"]["STSBenchmarkLocal"]["main_score"]
    assert on_disk["tasks"]["STSBenchmarkLocal"]["main_score"] == pytest.approx(
        100 * on_disk["tasks"]["STSBenchmarkLocal"]["scores"]["test"][0]["cosine_spearman"]
    )
    assert on_disk["protocol"]["mteb_version"] and on_disk["protocol"]["tasks"] == ["STSBenchmarkLocal"]
    assert on_disk["protocol"]["benchmark"] is None and on_disk["protocol"]["query_instruction"] is None
    assert on_disk["protocol"]["pooling"] == "cls" and on_disk["protocol"]["max_length"] == 512
    assert on_disk["data"]["STSBenchmarkLocal"]["files"] == {str(table): sha256_file(table)}
    assert on_disk["versions"]["torch"] and on_disk["wall_seconds"] > 0 and on_disk["model"]["path"] == str(tiny_bert)
    assert on_disk["errors"] is None


def test_mteb_result_files_load_with_mtebs_loader_and_a_rerun_skips_finished_tasks(tiny_bert, tmp_path, monkeypatch, capsys):
    """mteb's own files (mteb.ResultCache's layout) read back by mteb's loader; a rerun through the result cache
    evaluates only the task whose data changed (counted by the encoder's calls, per task)."""
    import mteb
    from mteb import TaskResult

    from aoe.evaluate.mteb_eval import _wrapper_class

    calls: list[str] = []
    cls = _wrapper_class()
    encode = cls.encode

    def spy(self, inputs, *, task_metadata, **kw):
        calls.append(task_metadata.name)
        return encode(self, inputs, task_metadata=task_metadata, **kw)

    monkeypatch.setattr(cls, "encode", spy)
    stsb = _write_table(tmp_path / "stsb", _synthetic_sts(seed=1))
    sick = _write_table(tmp_path / "sickr", _synthetic_sts(seed=2, low=1.0), dataset="sickr")
    cell = {"backbone": "tiny", "objective": "aoe", "trainset": "stsb", "seed": "42"}
    kw = dict(local_tasks=["STSBenchmarkLocal", "SICKRLocal"], pooling="cls", device="cpu", cell=cell, result_cache=tmp_path / "cache")

    def run(name, tables):
        return run_mteb_evaluation(
            tiny_bert, tmp_path / f"{name}.json", tables=[str(t) for t, _ in tables], manifests=[str(m) for _, m in tables],
            results_dir=tmp_path / name, **kw,
        )

    first = run("first", [stsb, sick])
    assert sorted(calls) == ["SICKRLocal"] * 2 + ["STSBenchmarkLocal"] * 2  # sentence1 and sentence2 of each
    assert "mteb: 2/2 task (100%)" in capsys.readouterr().err  # a progress line per task, with its ETA
    rec = first["mteb_results"]
    assert rec["model_name"] == "aoe-repro/tiny-aoe-stsb-seed42" and rec["reused"] == []
    folder = Path(rec["folder"])
    assert folder == tmp_path / "first" / "results" / "aoe-repro__tiny-aoe-stsb-seed42" / rec["revision"]
    assert {p.name for p in folder.iterdir()} >= {"STSBenchmarkLocal.json", "SICKRLocal.json", "model_meta.json"}

    # mteb's loader reads them: model name, revision, model meta, and each task's result
    loaded = mteb.ResultCache(tmp_path / "first").load_results(include_remote=False)
    (model,) = loaded.model_results
    assert (model.model_name, model.model_revision) == (rec["model_name"], rec["revision"])
    assert model.model_meta.embed_dim == 32 and model.model_meta.name == rec["model_name"]
    results = {r.task_name: r for r in model.task_results}
    assert set(results) == {"STSBenchmarkLocal", "SICKRLocal"}
    for name, r in results.items():
        assert r.mteb_version == mteb.__version__ and r.dataset_revision.startswith("local-")
        assert r.evaluation_time > 0 and list(r.scores) == ["test"]
        # mteb writes scores rounded to 6 decimals (TaskResult.to_disk)
        assert 100 * r.get_score() == pytest.approx(first["tasks"][name]["main_score"], abs=1e-4)
        assert TaskResult.from_disk(folder / f"{name}.json").get_score() == r.get_score()
    # the local task's dataset revision names its data (the table's checksum in its manifest)
    assert results["STSBenchmarkLocal"].dataset_revision == local_task("STSBenchmarkLocal", tables={"stsb": stsb}).metadata.revision

    # a rerun: STS-B read back from mteb's result cache (not encoded); SICK-R's data changed, so evaluated again
    calls.clear()
    sick2 = _write_table(tmp_path / "sickr2", _synthetic_sts(seed=3, low=1.0), dataset="sickr")
    assert local_task("SICKRLocal", tables={"sickr": sick2}).metadata.revision != results["SICKRLocal"].dataset_revision
    second = run("second", [stsb, sick2])
    assert calls == ["SICKRLocal"] * 2
    assert second["mteb_results"]["reused"] == ["STSBenchmarkLocal"]
    # read back from mteb's file: its 6 decimals
    assert second["tasks"]["STSBenchmarkLocal"]["main_score"] == pytest.approx(first["tasks"]["STSBenchmarkLocal"]["main_score"], abs=1e-4)
    assert second["tasks"]["SICKRLocal"]["main_score"] != first["tasks"]["SICKRLocal"]["main_score"]
    # the second output folder holds both tasks' files too, the reused one included
    again = mteb.ResultCache(tmp_path / "second").load_results(include_remote=False)
    assert {r.task_name for r in again.model_results[0].task_results} == {"STSBenchmarkLocal", "SICKRLocal"}


def test_failed_task_is_an_error_naming_it(tiny_bert, tmp_path):
    table, manifest = _write_table(tmp_path / "stsb", _synthetic_sts().drop(columns=["score"]))
    out = tmp_path / "mteb.json"
    with pytest.raises(MtebEvalError, match="STSBenchmarkLocal"):
        run_mteb_evaluation(
            tiny_bert, out, local_tasks=["STSBenchmarkLocal"], tables=[str(table)], manifests=[str(manifest)], pooling="cls", device="cpu"
        )
    assert not out.exists()
    failed = json.loads(Path(str(out) + ".failed.json").read_text())
    assert failed["tasks"]["STSBenchmarkLocal"]["main_score"] is None and failed["avg"] is None
    assert "score" in failed["errors"]["STSBenchmarkLocal"]


def test_manifest_of_another_dataset_is_rejected(tmp_path):
    table, manifest = _write_table(tmp_path / "sickr", _synthetic_sts(), dataset="sickr")
    with pytest.raises(MtebEvalError, match="no prepared table"):
        local_task("STSBenchmarkLocal", tables={"sickr": (table, manifest)})


@pytest.mark.slow
def test_trec_classification_and_cache_reuse(tiny_bert, mirror, tmp_path):
    """TRECLocal (mteb logistic regression on SentEval's TREC) with the embedding cache: a rerun embeds nothing."""
    downstream = mirror / "senteval" / "downstream"
    kw = dict(local_tasks=["TRECLocal", "STSBenchmarkLocal"], downstream=downstream, pooling="cls", device="cpu", cache_root=tmp_path / "emb")
    first = run_mteb_evaluation(tiny_bert, tmp_path / "a.json", **kw)
    trec = first["tasks"]["TRECLocal"]
    assert trec["category"] == "classification" and 0 < trec["main_score"] <= 100
    assert len(trec["scores"]["test"][0]["scores_per_experiment"]) == 10
    assert set(first["data"]["TRECLocal"]["files"]) == {str(downstream / "TREC/train_5500.label"), str(downstream / "TREC/TREC_10.label")}
    assert first["avg"] == pytest.approx((trec["main_score"] + first["tasks"]["STSBenchmarkLocal"]["main_score"]) / 2)
    second = run_mteb_evaluation(tiny_bert, tmp_path / "b.json", **kw)
    assert second["embedding"]["cache"]["hit"] is True
    assert second["tasks"]["TRECLocal"]["main_score"] == trec["main_score"]


@pytest.mark.parametrize("damage", ["cut", "empty"])
def test_a_result_cache_file_cut_short_is_evaluated_again(tiny_bert, tmp_path, capsys, damage):
    """mteb writes a task's result in place (open("w"), json.dump): a job killed in that write left the JSON cut
    short or empty, and every rerun failed in mteb's JSONDecodeError (issue 53's second sweep, K6/K7)."""
    table, manifest = _write_table(tmp_path / "stsb", _synthetic_sts())
    kw = dict(local_tasks=["STSBenchmarkLocal"], tables=[str(table)], manifests=[str(manifest)], pooling="cls", device="cpu",
              result_cache=tmp_path / "cache")
    first = run_mteb_evaluation(tiny_bert, tmp_path / "first.json", **kw)
    (held,) = (tmp_path / "cache").rglob("STSBenchmarkLocal.json")
    data = held.read_bytes()
    held.write_bytes(data[: len(data) // 2] if damage == "cut" else b"")
    capsys.readouterr()
    again = run_mteb_evaluation(tiny_bert, tmp_path / "again.json", **kw)
    assert f"MTEB result cache file {held} cannot be read (JSONDecodeError" in capsys.readouterr().err
    assert again["mteb_results"]["reused"] == []
    assert again["tasks"]["STSBenchmarkLocal"]["main_score"] == pytest.approx(first["tasks"]["STSBenchmarkLocal"]["main_score"], abs=1e-4)
    assert json.loads(held.read_text())["task_name"] == "STSBenchmarkLocal"  # rewritten whole
