"""Run an evaluation suite on a model folder and write its JSON result with provenance."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from aoe.config.hparams import schema_default
from aoe.data.contracts import read_manifest, read_table
from aoe.data.io import DataError
from aoe.evaluate.sts import CAP_SEED, TASKS, capped_tables, evaluate_sts
from aoe.util.jsonio import write_json_atomic
from aoe.util.provenance import library_versions

# A direct call's encoding batch and truncation: the schema's defaults of evaluation.sts, written
# there only (every rule passes the config's values).
BATCH_SIZE = schema_default("evaluation", "sts", "batch_size")
MAX_LENGTH = schema_default("evaluation", "sts", "max_length")

__all__ = ["GOLDS", "gold_scores", "run_sts_evaluation", "run_indomain_evaluation", "run_retrieval_evaluation", "run_transfer_evaluation", "run_nli_probe", "cached_encoder"]


# The gold an in-domain score correlates with. angle-emb's AngleDataTokenizer stores int(label) (fcb6223
# angle_emb/angle.py:254, every version to 0.4.8, e.g. 1c5515b :558) and AnglE.evaluate correlates the
# predictions with those stored labels (fcb6223 :750 `y[::2, 0]`; 1c5515b :1555), from its first commit f2ad9f8
# (2023-10-20) to c51e05d (2024-07-26, "refactor evaluation"); from 0.4.9 evaluate takes the dataset's raw label
# column instead (582eb85 angle_emb/angle.py:1461-1475, CorrelationEvaluator). bench/parity/gold_parity.py runs the releases.
GOLDS = ("float", "int")
GOLD_SOURCES = {
    "float": "the gold score as annotated",
    "int": "int(score), truncated toward zero: angle-emb 0.1.1-0.4.8 AnglE.evaluate correlates with AngleDataTokenizer's "
           "int(label) (fcb6223 angle_emb/angle.py:254, 750)",
}


def gold_scores(scores: pd.Series, gold: str) -> np.ndarray:
    """The gold of ``gold`` (:data:`GOLDS`): the scores as given, or each truncated toward zero as Python's
    ``int()`` does (the official tokenizer's ``int(data['label'])``)."""
    values = scores.to_numpy(dtype=np.float64)
    if gold == "float":
        return values
    if gold == "int":
        return np.trunc(values)
    raise ValueError(f"gold must be one of {', '.join(GOLDS)}, got {gold!r}")


def gold_agreement(scores: pd.Series) -> float | None:
    """Spearman (not x100) of int(score) against the score: 1.0 where truncating loses no order (binary labels)."""
    from scipy.stats import spearmanr

    values = scores.to_numpy(dtype=np.float64)
    if np.array_equal(values, np.trunc(values)):
        return 1.0
    rho = float(spearmanr(values, np.trunc(values)).statistic)
    return None if np.isnan(rho) else rho


def run_sts_evaluation(
    model_dir: str | os.PathLike,
    tables: list[str],
    manifests: list[str],
    out: str | os.PathLike,
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int = MAX_LENGTH,
    cell: dict | None = None,
    device: str | None = None,
    tasks: list[str] | None = None,
    cache_root: str | os.PathLike | None = None,
    backend: str = "builtin",
    downstream: str | os.PathLike | None = None,
    max_pairs: int | None = None,
    uncapped_tasks: list[str] | None = None,
    eval_text: str = "raw",
    eval_pooling: str | None = None,
) -> dict:
    """Evaluate ``model_dir`` on the 7 STS test tables and write ``out`` (sts.json).

    ``eval_pooling``: an evaluation-only pooling (the cell's ``eval_pooling``, or a table's variant
    row), else the one the model was trained with. An official arithmetic that depends on the batch
    (:data:`aoe.model.pooling.BATCH_DEPENDENT_POOLINGS`) embeds in SentEval's batches at the official
    script's batch size (:func:`official_eval_batch_size`), without the cache.

    ``max_pairs`` evaluates a seeded random subset of each task's pairs (but those of
    ``uncapped_tasks``): a CPU budget for LLM backbones, recorded in the protocol; the
    paper's protocol is every pair (None).

    With ``cache_root``, the embeddings go through the model's on-disk cache
    (:mod:`aoe.evaluate.embcache`), where the STS figures of the same model find them.
    ``backend="senteval"`` runs SimCSE's SentEval itself on its data folder ``downstream``
    (:mod:`aoe.evaluate.senteval_backend`) through the same encoder.
    ``eval_text`` (backbones.<name>.eval_text) rewrites a prompted text first, as the official
    eval.py does (:func:`aoe.model.prompts.official_eval_text`).
    """
    start = time.perf_counter()
    eval_pooling, senteval_batch = _senteval_batch(eval_pooling)
    eval_pooling = scoring_pooling(model_dir, eval_pooling) or eval_pooling
    if backend == "senteval":
        return _run_senteval_suite("sts", model_dir, downstream, out, tasks, "test", pooling, batch_size, max_length, cell, device, start, prompt, eval_text,
                                   eval_pooling, senteval_batch)
    if backend != "builtin":
        raise ValueError(f"evaluation.backend must be builtin or senteval, got {backend!r}")
    by_dataset = {}
    for table, manifest in zip(tables, manifests, strict=True):
        meta = read_manifest(manifest, table)
        by_dataset[meta["dataset"]] = (read_table(table, manifest), meta)
    wanted = list(TASKS) if tasks is None else list(tasks)
    missing = [TASKS[t] for t in wanted if TASKS.get(t) not in by_dataset]
    if missing:
        raise KeyError(f"STS evaluation: no prepared test table for {missing}")
    task_tables = capped_tables({task: by_dataset[TASKS[task]][0] for task in wanted}, max_pairs, uncapped_tasks)
    from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS

    if eval_pooling in BATCH_DEPENDENT_POOLINGS:
        from aoe.evaluate.sts import evaluate_sts_in_senteval_batches
        from aoe.model.encoder import Encoder

        encoder, cache = Encoder(model_dir, pooling=pooling, device=device, prompt=prompt, eval_text=eval_text, eval_pooling=eval_pooling), None
        batch_size = senteval_batch or official_eval_batch_size(eval_pooling)
        result = evaluate_sts_in_senteval_batches(
            lambda batches: encoder.encode_batches(batches, max_length=max_length), task_tables, batch_size, tasks=wanted)
    else:
        encoder, encode, cache = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, device, prompt=prompt,
                                                eval_text=eval_text, eval_pooling=eval_pooling)
        result = evaluate_sts(encode, task_tables, tasks=wanted)
    result["protocol"] = {**result["protocol"], "batch_size": batch_size}  # PROTOCOL itself stays untouched
    if max_pairs is not None:
        result["protocol"]["subsample"] = {
            "max_pairs_per_task": int(max_pairs),
            "uncapped_tasks": sorted(set(uncapped_tasks or [])),
            "seed": CAP_SEED,
            "pairs": {t: int(len(df)) for t, df in task_tables.items()},
        }
    result["data"] = {d: {"table_sha256": m["table_sha256"], "rows": m["rows"]} for d, (_, m) in by_dataset.items()}
    return finish_result(result, model_dir, cell, encoder, cache, max_length, start, out)


def run_indomain_evaluation(
    model_dir: str | os.PathLike,
    table: str | os.PathLike,
    manifest: str | os.PathLike,
    out: str | os.PathLike,
    evalset: str,
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int = MAX_LENGTH,
    cell: dict | None = None,
    device: str | None = None,
    cache_root: str | os.PathLike | None = None,
    gold: str = GOLDS[0],
) -> dict:
    """Spearman x100 of cosine similarity against the gold score on one pair table (in-domain STS).

    AoE Table 2 and AnglE Table 2 score every dataset this way, binary labels
    (GIS, MRPC, QQP, QNLI) included; each unique text is embedded once.

    ``gold`` names the headline's gold (:data:`GOLDS`, :func:`gold_scores`): the score as annotated
    (``float``) or ``int(score)`` (``int``), as angle-emb's AnglE.evaluate correlated. The file holds
    both correlations (``by_gold``), so a table row can read the other without a new evaluation.
    """
    if gold not in GOLDS:
        raise ValueError(f"in-domain evaluation: gold must be one of {', '.join(GOLDS)}, got {gold!r}")
    from aoe.evaluate.sts import cosine_rows, pair_embeddings, sts_scores, unique_texts

    start = time.perf_counter()
    meta = read_manifest(manifest, table)
    pairs = read_table(table, manifest)  # the manifest's table, and its contract: texts, gold scores, rows
    if "score" not in pairs.columns:  # a table of no catalogued dataset, whose contract leaves the score out
        raise DataError(f"{table}: in-domain evaluation needs a gold score column score; it has {', '.join(pairs.columns)}")
    if "subset" not in pairs.columns:
        pairs = pairs.assign(subset=meta["dataset"])
    official_batches = scoring_pooling(model_dir, None) is not None
    if official_batches:
        from aoe.model.encoder import Encoder

        # a padded pooling's embedding depends on its batch: AnglE.evaluate's, not each unique text once
        encoder, cache = Encoder(model_dir, pooling=pooling, device=device, prompt=prompt), None
        batch_size = ANGLE_EVALUATE_PAIRS
        sims = cosine_rows(*angle_evaluate_embeddings(encoder.encode_batches, pairs, batch_size, max_length))
        unique = unique_texts([pairs])
    else:
        encoder, encode, cache = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, device, prompt=prompt)
        unique = unique_texts([pairs])
        sims = cosine_rows(*pair_embeddings(encode(unique), unique, pairs))
    task = f"{meta['dataset']}/{meta['split']}"
    by_gold = {g: sts_scores(sims, pairs.assign(score=gold_scores(pairs["score"], g)), task) for g in GOLDS}
    scores = by_gold[gold]
    result = {
        "evalset": evalset,
        "dataset": meta["dataset"],
        "split": meta["split"],
        "spearman": scores["spearman"],
        "pearson": scores["pearson"],
        "n": scores["n"],
        "gold": gold,
        "by_gold": {g: {"spearman": s["spearman"], "pearson": s["pearson"]} for g, s in by_gold.items()},
        # how far truncating moves the gold itself: Spearman of int(score) against the score (1.0 for binary labels)
        "gold_int_vs_float_spearman": gold_agreement(pairs["score"]),
        "protocol": {"name": "indomain-spearman", "similarity": "cosine", "metric": "spearman x100", "batch_size": batch_size,
                     "gold": GOLD_SOURCES[gold],
                     **({"batches": "angle-emb 0.1.1 AnglE.evaluate: pairs in table order, texts interleaved"} if official_batches else {})},
        "data": {meta["dataset"]: {"table_sha256": meta["table_sha256"], "rows": meta["rows"], "split": meta["split"]}},
        "embedding": {"unique_sentences": int(len(unique)), "sentences_in_tasks": int(2 * len(pairs))},
    }
    return finish_result(result, model_dir, cell, encoder, cache, max_length, start, out)


# pairs per AnglE.evaluate batch of angle-emb 0.1.1's STS-B script: --batch_size, default 32
# (fcb6223 train_angle.py:41, passed to model.evaluate at :260)
ANGLE_EVALUATE_PAIRS = 32


def angle_evaluate_embeddings(encode_batches, pairs: pd.DataFrame, batch_size: int, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(sentence1, sentence2) embeddings of ``pairs`` as 0.1.1's ``AnglE.evaluate`` formed its batches
    (fcb6223 angle_emb/angle.py:736-760): ``batch_size`` pairs in table order, their texts interleaved
    (text1, text2 of each pair: AngleDataCollator, :271-301) and padded together to the longest
    (padding='longest', :262, :314-324). ``encode_batches``: :meth:`aoe.model.encoder.Encoder.encode_batches`."""
    s1, s2 = pairs["sentence1"].tolist(), pairs["sentence2"].tolist()
    batches = [[t for i in range(start, min(start + batch_size, len(s1))) for t in (s1[i], s2[i])]
               for start in range(0, len(s1), batch_size)]
    emb = encode_batches(batches, max_length=max_length)
    return emb[0::2], emb[1::2]


def scoring_pooling(model_dir, eval_pooling: str | None) -> str | None:
    """The batch-dependent pooling an evaluation must batch as the official one did, or None: ``eval_pooling``
    if given, else the model's trained pooling when it is an official padded one (the pooling-ablation cells:
    config.yaml objectives.angle_pool_*), whose embeddings length-sorted batches would change."""
    from aoe.model.folder import aoe_record
    from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS

    if eval_pooling is not None:
        return eval_pooling if eval_pooling in BATCH_DEPENDENT_POOLINGS else None
    record = aoe_record(Path(model_dir))
    trained = record.get("pooling") if record else None
    return trained if trained in BATCH_DEPENDENT_POOLINGS else None


def _senteval_batch(eval_pooling: str | None) -> tuple[str | None, int | None]:
    """(pooling, SentEval batch size) of an eval_pooling that may name its batch (``cls_avg_padded-bs32``:
    :func:`aoe.model.pooling_names.split_senteval_batch`); (eval_pooling, None) otherwise: the official script's size."""
    from aoe.model.pooling_names import split_senteval_batch

    return split_senteval_batch(eval_pooling) if eval_pooling else (eval_pooling, None)


def official_eval_batch_size(pooling: str, mode: str = "test") -> int:
    """The SentEval batch size of the official evaluation script of a batch-dependent pooling's release in
    SentEval ``mode`` (test: 0.1.1's fcb6223 eval.py 16, 0.4.6's 1c5515b examples/NLI/eval_nli.py 2;
    fasttest: 32 for both; :data:`aoe.evaluate.senteval_batches.OFFICIAL_MODE_BATCH_SIZES`)."""
    from aoe.evaluate.senteval_batches import official_batch_size
    from aoe.model.pooling import OFFICIAL_POOLING_SOURCES

    return official_batch_size(OFFICIAL_POOLING_SOURCES[pooling].release, mode)


def cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, device=None, prompt=None, eval_text="raw", eval_pooling=None):
    """(encoder, encode function, cache or None): the model's encode, through its embedding cache when asked.

    ``prompt`` is an LLM backbone's template for a model evaluated as downloaded; a
    trained model's folder records its own (the two must agree). ``eval_text``: how a
    prompted text is rewritten before the prompt (:class:`aoe.model.encoder.Encoder`).
    """
    from aoe.model.encoder import Encoder
    from aoe.model.folder import is_adapter_dir

    encoder = Encoder(model_dir, pooling=pooling, device=device, prompt=prompt, eval_text=eval_text, eval_pooling=eval_pooling)

    def encode(texts):
        return encoder.encode(texts, batch_size=batch_size, max_length=max_length, progress=True)

    if cache_root is None:
        return encoder, encode, None
    from aoe.evaluate.embcache import EmbeddingCache, model_key

    settings = {"pooling": encoder.pooling, "max_length": max_length}
    if encoder.prompt is not None:  # absent rather than null: earlier caches keep their keys
        settings["prompt"] = encoder.prompt
    if encoder.eval_text != "raw":  # the cache is keyed on the table's texts, not on what the model read
        settings["eval_text"] = encoder.eval_text
    if is_adapter_dir(model_dir):
        # an adapter folder holds no base weights: key on the base's identity too
        base = (Path(model_dir) / json.loads((Path(model_dir) / "aoe_config.json").read_text())["base_model"]).resolve()
        settings["base_model"] = model_key(base)[0]
    key, record = model_key(model_dir, **settings)
    cache = EmbeddingCache(cache_root, key, record, encode)
    return encoder, cache.encode, cache


def _run_senteval_suite(suite, model_dir, downstream, out, tasks, mode, pooling, batch_size, max_length, cell, device, start, prompt=None, eval_text="raw",
                        eval_pooling=None, senteval_batch=None):
    """sts.json or transfer.json from SimCSE's SentEval itself, through the same encoder (no cache).

    ``eval_pooling``: as the builtin protocol's. A batch-dependent one embeds each batcher call of SentEval as
    one pass, SentEval batching at the official script's size: the transfer loaders are AnglE's copy's
    (:mod:`aoe.evaluate.senteval_batches`), SimCSE's STS12-16 loader orders the pairs otherwise, so not on STS.
    """
    from aoe.evaluate import senteval_backend as se
    from aoe.model.encoder import Encoder
    from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS

    if downstream is None:
        raise ValueError("evaluation.backend senteval reads SentEval's own data folder: no downstream folder given")
    if suite == "sts":
        from aoe.evaluate.sts import TASKS as SUITE_TASKS
    else:
        from aoe.evaluate.transfer import TASKS as SUITE_TASKS
    wanted = [t for t in SUITE_TASKS if tasks is None or t in tasks]
    encoder = Encoder(model_dir, pooling=pooling, device=device, prompt=prompt, eval_text=eval_text, eval_pooling=eval_pooling)
    if eval_pooling in BATCH_DEPENDENT_POOLINGS:
        if suite == "sts":
            raise ValueError(f"eval_pooling {eval_pooling!r} depends on the batch, and SimCSE's SentEval (evaluation.backend "
                             "senteval) orders STS12-16 otherwise than the official copy: use evaluation.backend builtin")
        senteval_batch = senteval_batch or official_eval_batch_size(eval_pooling, mode)

        def encode(texts):
            return encoder.encode_batches([texts], max_length=max_length)  # SentEval's batch, one pass
    else:
        senteval_batch = None

        def encode(texts):
            return encoder.encode(texts, batch_size=batch_size, max_length=max_length)
    raw = se.run_senteval(encode, wanted, downstream, mode, batch_size=senteval_batch)
    result = se.sts_from_senteval(raw, wanted) if suite == "sts" else se.transfer_from_senteval(raw, wanted)
    result["protocol"] = {
        "name": f"senteval-{suite}",
        "backend": "senteval",
        "package": se.SIMCSE_SENTEVAL,
        "mode": mode,
        "params": se.senteval_params(Path(downstream).parent, mode, batch_size=senteval_batch),
        "batch_size": senteval_batch or batch_size,
    }
    result["data"] = {"root": str(downstream)}
    return finish_result(result, model_dir, cell, encoder, None, max_length, start, out)


def _model_record(model_dir, cell) -> dict:
    from aoe.data.io import sha256_file

    recorded = Path(model_dir) / "aoe_config.json"
    backbone = Path(model_dir) / "backbone.json"
    released = Path(model_dir) / "released.json"  # a published checkpoint: its commit and files (aoe.model.released)
    out = {
        "path": str(model_dir),
        "cell": cell,
        "trained": recorded.is_file() and not released.is_file(),
        # the recipe this result scored, one hop from the result: results/recipe.json's cell has the same file's values
        "aoe_config_sha256": sha256_file(recorded) if recorded.is_file() else None,
        "backbone": json.loads(backbone.read_text()) if backbone.is_file() else None,
    }
    if released.is_file():
        out["released"] = json.loads(released.read_text())
    return out


def finish_result(result: dict, model_dir, cell, encoder, cache, max_length: int, start: float, out) -> dict:
    """Add what every result records (model, embedding settings, versions, device, job, time) and write it."""
    result["protocol"] = {
        **result["protocol"], "pooling": encoder.pooling, "prompt": encoder.prompt, "eval_text": encoder.eval_text, "max_length": max_length,
    }
    if encoder.trained_pooling not in (None, encoder.pooling):  # an evaluation-only pooling: say what it replaced
        result["protocol"]["trained_pooling"] = encoder.trained_pooling
    if cache is not None:
        result.setdefault("embedding", {})["cache"] = {"dir": str(cache.dir), "hit": cache.hit}
    result["model"] = _model_record(model_dir, cell)
    result["versions"] = library_versions()
    result["device"] = str(encoder.device)
    result["slurm_job_id"] = os.environ.get("SLURM_JOB_ID")
    result["wall_seconds"] = time.perf_counter() - start
    write_json_atomic(result, out)
    return result


def run_retrieval_evaluation(
    model_dir: str | os.PathLike,
    table: str | os.PathLike,
    manifest: str | os.PathLike,
    out: str | os.PathLike,
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int = MAX_LENGTH,
    cell: dict | None = None,
    cache_root: str | os.PathLike | None = None,
    device: str | None = None,
) -> dict:
    """Flickr30k strict accuracy of ``model_dir`` (aoe.evaluate.retrieval), written to ``out``."""
    from aoe.evaluate.retrieval import flickr_strict_accuracy

    start = time.perf_counter()
    meta = read_manifest(manifest, table)
    captions = read_table(table, manifest)  # before the model loads: a changed table costs seconds, not an embedding
    encoder, encode, cache = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, device, prompt=prompt)
    result = flickr_strict_accuracy(encode, captions)
    result["data"] = {"dataset": meta["dataset"], "split": meta["split"], "tables": meta["tables"]}
    return finish_result(result, model_dir, cell, encoder, cache, max_length, start, out)


def run_transfer_evaluation(
    model_dir: str | os.PathLike,
    downstream: str | os.PathLike,
    out: str | os.PathLike,
    tasks: list[str] | None = None,
    mode: str = "test",
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int = MAX_LENGTH,
    cell: dict | None = None,
    cache_root: str | os.PathLike | None = None,
    device: str | None = None,
    backend: str = "builtin",
    eval_text: str = "raw",
    eval_pooling: str | None = None,
    max_rows: int | None = None,
) -> dict:
    """SentEval transfer tasks (aoe.evaluate.transfer) on ``model_dir``, written to ``out`` (transfer.json).

    ``max_rows`` keeps a seeded subset of each task's splits (:func:`aoe.evaluate.transfer.cap_transfer`):
    a CPU budget, recorded in the protocol; the paper's protocol reads every sample (None).

    ``eval_text``: as :func:`run_sts_evaluation` (the official eval.py rewrites the transfer tasks' texts too).
    ``eval_pooling``: as :func:`run_sts_evaluation`; a batch-dependent one embeds each text in SentEval's
    transfer batch (:func:`aoe.evaluate.transfer.evaluate_transfer_in_senteval_batches`) at the official
    script's batch size of ``mode`` (:func:`official_eval_batch_size`), without the cache.
    """
    from aoe.data.io import sha256_file
    from aoe.data.transfer import read_transfer, resolve_transfer_root
    from aoe.evaluate.transfer import TASKS as TRANSFER_TASKS
    from aoe.evaluate.transfer import cap_transfer, evaluate_transfer

    start = time.perf_counter()
    if backend == "senteval" and max_rows is not None:
        raise ValueError("evaluation.transfer.max_rows: SimCSE's SentEval (evaluation.backend senteval) reads every sample; "
                         "set max_rows null or evaluation.backend builtin")
    eval_pooling, senteval_batch = _senteval_batch(eval_pooling)
    eval_pooling = scoring_pooling(model_dir, eval_pooling) or eval_pooling
    if backend == "senteval":
        return _run_senteval_suite("transfer", model_dir, downstream, out, tasks, mode, pooling, batch_size, max_length, cell, device, start, prompt,
                                   eval_text, eval_pooling, senteval_batch)
    if backend != "builtin":
        raise ValueError(f"evaluation.backend must be builtin or senteval, got {backend!r}")
    root = resolve_transfer_root(downstream)
    wanted = list(TRANSFER_TASKS) if tasks is None else list(tasks)
    data = {t: read_transfer(root, t) for t in wanted}
    if max_rows is not None:
        data = {t: cap_transfer(d, max_rows, CAP_SEED) for t, d in data.items()}
    from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS

    if eval_pooling in BATCH_DEPENDENT_POOLINGS:
        from aoe.evaluate.transfer import evaluate_transfer_in_senteval_batches
        from aoe.model.encoder import Encoder

        encoder, cache = Encoder(model_dir, pooling=pooling, device=device, prompt=prompt, eval_text=eval_text, eval_pooling=eval_pooling), None
        result = evaluate_transfer_in_senteval_batches(lambda batches: encoder.encode_batches(batches, max_length=max_length),
                                                       senteval_batch or official_eval_batch_size(eval_pooling, mode), wanted, mode=mode, data=data)
    else:
        encoder, encode, cache = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, device, prompt=prompt,
                                                eval_text=eval_text, eval_pooling=eval_pooling)
        result = evaluate_transfer(encode, wanted, mode=mode, data=data)
    if max_rows is not None:
        result["protocol"]["subsample"] = {
            "max_rows_per_split": int(max_rows),
            "seed": CAP_SEED,
            "rows": {t: {name: len(split) for name, split in data[t].splits.items()} for t in wanted},
        }
    # tasks left out on purpose are explicit nulls, and then so is the average of all seven
    for t in TRANSFER_TASKS:
        result["tasks"].setdefault(t, None)
    if len(wanted) != len(TRANSFER_TASKS):
        result["avg_requested"], result["avg"] = result["avg"], None
    result["data"] = {
        "root": str(root),
        "files": {rel: sha256_file(root / rel) for t in wanted for rel in data[t].files},
    }
    return finish_result(result, model_dir, cell, encoder, cache, max_length, start, out)


def run_nli_probe(
    model_dir: str | os.PathLike,
    tables: list[str],
    out: str | os.PathLike,
    protocol: str = "heldout",
    mode: str = "test",
    max_rows: int | None = None,
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int = MAX_LENGTH,
    cell: dict | None = None,
    cache_root: str | os.PathLike | None = None,
    device: str | None = None,
    names: list[str] | None = None,
) -> dict:
    """NLI probe (aoe.evaluate.nli_probe) of ``model_dir`` on nli3 ``tables`` (results/data/{ds}/{split}.nli3.parquet);
    ``names``: the held-out protocol's probe sets to run (default all three, :func:`aoe.evaluate.nli_probe.probe_sets`)."""
    from aoe.data.io import sha256_file
    from aoe.evaluate.nli_probe import nli_probe, probe_sets

    start = time.perf_counter()
    by_name = {f"{Path(t).parent.name}/{Path(t).name.split('.')[0]}": read_table(t, manifest=True) for t in tables}
    sets = probe_sets(protocol, by_name, max_rows=max_rows, names=names)
    encoder, encode, cache = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, device, prompt=prompt)
    result = nli_probe(encode, sets, sep=encoder.tokenizer.sep_token, mode=mode)
    result["protocol"]["split_protocol"] = protocol
    result["protocol"]["max_rows"] = max_rows
    result["data"] = {str(t): sha256_file(t) for t in tables}
    return finish_result(result, model_dir, cell, encoder, cache, max_length, start, out)
