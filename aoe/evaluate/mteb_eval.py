"""MTEB through the ``mteb`` package (AoE §5: the English MTEB, ``MTEB(eng, v1)``, 56 datasets).

Three parts, all evaluation logic being mteb's own (never re-implemented here):

* :class:`AoEMtebEncoder` - mteb 2.x's encoder protocol on top of
  :func:`aoe.evaluate.run.cached_encoder`: the same model loading, pooling,
  truncation and on-disk embedding cache as the SentEval STS evaluation. Serves
  encoder models (``cls``/``avg``/... pooling) and LLMs (``last`` pooling with a
  prompt template such as AoE's ``Summarize sentence "{text}" in one word:"``).
  A ``query_instruction`` is prefixed to queries only (``prompt_type`` query:
  retrieval and reranking queries), for models trained with one.
* Local tasks (:data:`LOCAL_TASKS`, defined in :mod:`aoe.evaluate.mteb_local`): mteb
  task classes whose data come from the data mirror or the pipeline's prepared tables,
  never the hub (CI, CPU presets): the 7 STS test sets (``STSBenchmarkLocal``,
  ``SICKRLocal``, ``STS12Local`` ...) and SentEval's TREC as a classification task (``TRECLocal``).
* :func:`summarize` / :func:`run_mteb_evaluation` - per task main score x100,
  per category average, overall average (the MTEB leaderboard's mean over all
  tasks); a missing task is an explicit null and then so are its category's
  average and the overall average, never a smaller average.
* mteb's own result files: each task's ``mteb.TaskResult`` (mteb version, dataset
  revision, evaluation time, per-split scores, main score) and the model's
  ``model_meta.json``, written by ``mteb.ResultCache.save_to_cache`` as mteb lays
  them out, ``<folder>/results/<model name>/<revision>/<Task>.json`` (the MTEB
  results repository's layout: submit them as they are), and read back by
  ``mteb.ResultCache(<folder>).load_results()``. The evaluation runs through an
  ``mteb.ResultCache`` (``result_cache``): a rerun skips the tasks whose results it
  holds (mteb's ``overwrite_strategy="only-missing"``) and resumes a task from its
  finished subsets.

``mteb`` is imported lazily: the Snakefile imports :func:`local_task_inputs` (from
:mod:`aoe.evaluate.mteb_local`, re-exported here) without needing mteb in its environment.
"""

from __future__ import annotations

import json
import os
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from aoe.evaluate.mteb_local import (
    LOCAL_TASKS,
    TREC_N_EXPERIMENTS,
    TREC_SAMPLES_PER_LABEL,
    MtebEvalError,
    local_task,
)
from aoe.util.jsonio import finite_or_none, json_safe, write_json_atomic

__all__ = [
    "AOE_PROMPT",
    "CATEGORIES",
    "AoEMtebEncoder",
    "MTEB_RESULTS_SUBDIR",
    "model_name",
    "benchmark_tasks",
    "run_mteb_evaluation",
    "summarize",
]

# AoE §4 "Implementation Details" (aoe-acl2024.txt l.182) / the official angle-emb --query_prompt for LLaMA backbones.
AOE_PROMPT = 'Summarize sentence "{text}" in one word:"'

# mteb task type -> category of the MTEB(eng, v1) leaderboard.
CATEGORIES: dict[str, str] = {
    "Classification": "classification",
    "Clustering": "clustering",
    "PairClassification": "pair_classification",
    "Reranking": "reranking",
    "Retrieval": "retrieval",
    "STS": "sts",
    "Summarization": "summarization",
}


# mteb.ResultCache(folder) keeps its files under folder/results/<model>/<revision>/ (the results repository's layout)
MTEB_RESULTS_SUBDIR = "results"


def benchmark_tasks(benchmark: str | None = None, tasks: list[str] | None = None) -> list:
    """mteb task objects of ``benchmark`` (e.g. "MTEB(eng, v1)"), or of the named ``tasks``.

    Resolving uses the task metadata shipped in the mteb package (no hub access);
    the data are downloaded when a task runs.
    """
    import mteb

    if tasks:
        try:
            return list(mteb.get_tasks(tasks=list(tasks)))
        except Exception as exc:  # mteb raises KeyError/ValueError for unknown names
            raise MtebEvalError(f"mteb cannot resolve task(s) {list(tasks)}: {exc}") from exc
    if not benchmark:
        raise MtebEvalError("MTEB evaluation: give a benchmark, tasks or local_tasks")
    try:
        return list(mteb.get_benchmark(benchmark).tasks)
    except Exception as exc:
        raise MtebEvalError(f"mteb has no benchmark {benchmark!r}: {exc}") from exc


# ---------------------------------------------------------------------------
# The encoder wrapper.


def _resolve_prompt(model_dir: Path, prompt: str | None) -> str | None:
    """The prompt template: the one recorded by training (aoe_config.json "prompt") or the argument."""
    recorded = model_dir / "aoe_config.json"
    if recorded.is_file():
        trained = json.loads(recorded.read_text()).get("prompt")
        if trained is not None:
            if prompt is not None and prompt != trained:
                raise MtebEvalError(f"{model_dir} was trained with prompt {trained!r}, asked for {prompt!r}")
            prompt = trained
    if prompt is not None and "{text}" not in prompt:
        raise MtebEvalError(f"prompt template {prompt!r} has no {{text}} placeholder")
    return prompt


@lru_cache(maxsize=None)
def _wrapper_class() -> type:
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.types import PromptType

    class AoEMtebEncoderImpl(AbsEncoder):
        __doc__ = AoEMtebEncoder.__doc__

        def __init__(
            self,
            model_dir,
            pooling: str | None = None,
            batch_size: int = 64,
            max_length: int = 512,
            cache_root=None,
            device: str | None = None,
            prompt: str | None = None,
            query_instruction: str | None = None,
            name: str | None = None,
        ):
            from aoe.evaluate.run import cached_encoder

            self.model_dir = Path(model_dir)
            self.prompt = _resolve_prompt(self.model_dir, prompt)
            self.query_instruction = query_instruction or None
            self.batch_size = batch_size
            self.max_length = max_length
            # the Encoder wraps every text in the prompt, exactly as training's token cache did
            self.encoder, self._encode, self.cache = cached_encoder(
                self.model_dir, pooling, batch_size, max_length, cache_root, device, prompt=self.prompt
            )
            self.model = self.encoder.model
            self.texts_embedded = 0  # distinct texts handed to the encoder (after deduplication)
            self.mteb_model_meta = _model_meta(self, name)

        def format(self, text: str, prompt_type=None) -> str:
            """The text handed to the encoder: instruction prefixed to queries only (the encoder adds the prompt around it)."""
            if self.query_instruction and prompt_type == PromptType.query:
                return self.query_instruction + text
            return text

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
            texts = [self.format(t, prompt_type) for batch in inputs for t in batch["text"]]
            unique = list(dict.fromkeys(texts))  # the cache takes distinct texts; one embedding per text
            emb = np.asarray(self._encode(unique), dtype=np.float32) if unique else np.zeros((0, self.model.config.hidden_size), np.float32)
            self.texts_embedded += len(unique)
            row = {t: i for i, t in enumerate(unique)}
            return emb[[row[t] for t in texts]]

    return AoEMtebEncoderImpl


def model_name(model_dir: str | os.PathLike, cell: Mapping[str, str] | None = None) -> str:
    """The model's name in mteb's files ("organization/model"): ``aoe-repro/<backbone>-<objective>-<trainset>-seed<seed>``
    for a grid cell, else ``aoe-repro/<folder name>``."""
    if cell and all(cell.get(k) for k in ("backbone", "objective", "trainset", "seed")):
        return f"aoe-repro/{cell['backbone']}-{cell['objective']}-{cell['trainset']}-seed{cell['seed']}"
    return f"aoe-repro/{Path(model_dir).name}"


def _model_meta(wrapper, name: str | None):
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    from aoe.evaluate.embcache import model_key

    key, _ = model_key(
        wrapper.model_dir,
        pooling=wrapper.encoder.pooling,
        max_length=wrapper.max_length,
        prompt=wrapper.prompt,
        query_instruction=wrapper.query_instruction,
    )
    cfg = wrapper.model.config
    return ModelMeta.create_empty(
        overwrites={
            "name": name or model_name(wrapper.model_dir),
            "revision": key,  # model files + embedding settings
            "embed_dim": int(cfg.hidden_size),
            "max_tokens": float(wrapper.max_length),
            "n_parameters": int(sum(p.numel() for p in wrapper.model.parameters())),
            "similarity_fn_name": ScoringFunction.COSINE,
            "use_instructions": bool(wrapper.query_instruction),
            "framework": ["PyTorch"],
            "open_weights": True,
            "languages": ["eng-Latn"],
        }
    )


class AoEMtebEncoder:
    """mteb encoder protocol over our :class:`aoe.model.encoder.Encoder` and embedding cache.

    ``AoEMtebEncoder(model_dir, pooling=None, batch_size=64, max_length=512,
    cache_root=None, device=None, prompt=None, query_instruction=None, name=None)``
    returns an instance of a subclass of mteb's ``AbsEncoder`` (built lazily), whose
    ``encode(inputs, *, task_metadata, hf_split, hf_subset, prompt_type)`` takes mteb's
    DataLoader of ``{"text": [...]}`` batches, formats each text (``query_instruction``
    prefixed when ``prompt_type`` is query, then the ``prompt`` template's ``{text}``
    replaced), embeds the distinct texts once through ``cached_encoder`` and returns
    one float32 row per input. The prompt comes from the model's aoe_config.json
    ("prompt") or the argument; they must agree.
    """

    def __new__(cls, *args, **kwargs):
        return _wrapper_class()(*args, **kwargs)


# ---------------------------------------------------------------------------
# Results.


def summarize(task_scores: Mapping[str, float | None], task_types: Mapping[str, str]) -> dict:
    """Category averages and the overall average of main scores (x100).

    ``task_scores``: task -> main score, or None for a task that did not run;
    ``task_types``: task -> mteb task type (every task of ``task_scores``).
    A category's average is the mean of its tasks' scores, null if any is missing;
    the overall average is the mean over all tasks (the MTEB leaderboard's
    convention, not a mean of categories), null if any task is missing.
    """
    unknown = {t: task_types.get(t) for t in task_scores if task_types.get(t) not in CATEGORIES}
    if unknown:
        raise MtebEvalError(f"task type(s) with no MTEB category: {unknown}; known types: {sorted(CATEGORIES)}")
    by_cat: dict[str, list[float | None]] = {}
    for task, score in task_scores.items():
        by_cat.setdefault(CATEGORIES[task_types[task]], []).append(finite_or_none(score))

    def mean(values):
        return float(np.mean(values)) if values and all(v is not None for v in values) else None

    categories = {c: mean(v) for c, v in sorted(by_cat.items())}
    return {
        "categories": categories,
        "avg": mean([finite_or_none(s) for s in task_scores.values()]),
        "n_tasks": len(task_scores),
        "n_missing": sum(finite_or_none(s) is None for s in task_scores.values()),
        "tasks_per_category": {c: len(v) for c, v in sorted(by_cat.items())},
    }


def _task_data_record(task) -> dict:
    files = getattr(task, "files", None)
    if files is not None:
        return {"source": "local", "files": dict(files)}
    ds = dict(task.metadata.dataset)
    return {"source": "huggingface", "path": ds.get("path"), "revision": ds.get("revision")}


def _held_result(cache, task_name: str, meta):
    """The task's result in mteb's result cache, or None; a file that cannot be read is removed (with a warning).

    mteb writes a result in place (``open("w")``, then ``json.dump``): a job killed in that write, or a
    disk that filled, leaves the JSON cut short or empty, on which every rerun failed in mteb's own
    JSONDecodeError. The cache only saves time: the task is evaluated again and its file rewritten.
    """
    try:
        return cache.load_task_result(task_name, meta)
    except Exception as e:  # JSONDecodeError, pydantic's ValidationError, a KeyError of an older layout
        path = cache.get_task_result_path(task_name=task_name, model_name=meta)
        print(f"MTEB result cache file {path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
              f"evaluating {task_name} again", file=sys.stderr, flush=True)
        path.unlink(missing_ok=True)
        return None


def run_mteb_evaluation(
    model_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    benchmark: str | None = "MTEB(eng, v1)",
    tasks: list[str] | None = None,
    local_tasks: list[str] | None = None,
    tables: list[str] | None = None,
    manifests: list[str] | None = None,
    downstream: str | os.PathLike | None = None,
    pooling: str | None = None,
    batch_size: int = 64,
    max_length: int = 512,
    prompt: str | None = None,
    query_instruction: str | None = None,
    cell: dict | None = None,
    cache_root: str | os.PathLike | None = None,
    device: str | None = None,
    results_dir: str | os.PathLike | None = None,
    result_cache: str | os.PathLike | None = None,
) -> dict:
    """Evaluate ``model_dir`` with mteb and write ``out`` (mteb.json) and mteb's own result files.

    Tasks: ``local_tasks`` when non-empty (no hub; STS tables from ``tables`` /
    ``manifests`` or SentEval files under ``downstream``), else the named mteb
    ``tasks``, else ``benchmark``'s tasks. A task that fails is an error naming it
    (raised after all tasks ran, so one broken dataset does not hide the others;
    the partial result is written beside ``out`` as ``*.failed.json``).

    ``result_cache``: the folder of the ``mteb.ResultCache`` the evaluation runs through
    (default ``results_dir``; the workflow keeps it beside the embedding cache, which a
    rerun of the job keeps): a task whose result it holds for this model (name and
    revision: :func:`model_name`, the embedding cache's model key) and dataset revision is
    not evaluated again. ``results_dir``: where each task's result file and the model's
    ``model_meta.json`` are written, mteb's layout (module docstring). Each task is one
    progress line on stderr with an ETA (:mod:`aoe.util.progress`).
    """
    import mteb
    import sklearn

    from aoe.evaluate.run import finish_result
    from aoe.util.progress import progress

    start = time.perf_counter()
    local_tasks = list(local_tasks or [])
    if local_tasks:
        from aoe.data.contracts import read_manifest

        table_map: dict[str, tuple[str, str]] = {}
        for table, manifest in zip(tables or [], manifests or [], strict=True):
            table_map[read_manifest(manifest, table)["dataset"]] = (table, manifest)
        task_objs = [local_task(n, tables=table_map, downstream=downstream) for n in local_tasks]
        benchmark_name = None
    else:
        task_objs = benchmark_tasks(None if tasks else benchmark, tasks)
        benchmark_name = None if tasks else benchmark
    names = [t.metadata.name for t in task_objs]
    types = {t.metadata.name: t.metadata.type for t in task_objs}
    summarize({n: None for n in names}, types)  # unknown task types fail before any encoding

    wrapper = AoEMtebEncoder(
        model_dir,
        pooling=pooling,
        batch_size=batch_size,
        max_length=max_length,
        cache_root=cache_root,
        device=device,
        prompt=prompt,
        query_instruction=query_instruction,
        name=model_name(model_dir, cell),
    )
    meta = wrapper.mteb_model_meta
    encode_kwargs = {"batch_size": batch_size}
    cache_dir = result_cache if result_cache is not None else results_dir
    cache = mteb.ResultCache(cache_path=cache_dir) if cache_dir is not None else None
    task_results, exceptions, reused = [], [], []
    with progress(total=len(task_objs), desc="mteb", unit="task") as bar:
        for task in task_objs:
            bar.set_postfix(task=task.metadata.name)
            strategy = "only-missing"  # mteb's cache: a finished task is read back, a cut-short one resumed
            if cache is not None:
                held = _held_result(cache, task.metadata.name, meta)
                if held is not None and held.dataset_revision != task.metadata.revision:
                    strategy = "always"  # other data under the same task name: mteb's cache would serve it
                elif held is not None and not held.get_missing_evaluations(task):
                    reused.append(task.metadata.name)
            # one task per call: the same loop as mteb's over a task list, with a progress line per task
            model_result = mteb.evaluate(
                wrapper,
                task,
                encode_kwargs=dict(encode_kwargs),
                cache=cache,
                raise_error=False,
                overwrite_strategy=strategy,
                show_progress_bar=False,
            )
            task_results.extend(model_result.task_results)
            exceptions.extend(model_result.exceptions or [])
            bar.update(1)
    if results_dir is not None:
        written = mteb.ResultCache(cache_path=results_dir)
        for r in task_results:
            if cache is None or Path(cache.cache_path).resolve() != Path(results_dir).resolve():
                written.save_to_cache(r, meta, encode_kwargs=encode_kwargs)
    by_name = {r.task_name: r for r in task_results}
    errors = {e.task_name: e.exception for e in exceptions}
    per_task: dict[str, dict] = {}
    for task in task_objs:
        n = task.metadata.name
        r = by_name.get(n)
        entry: dict[str, Any] = {"category": CATEGORIES[types[n]], "type": types[n], "main_metric": task.metadata.main_score}
        if r is None:
            entry.update(main_score=None, scores=None, error=errors.get(n, "no result returned by mteb"))
            errors.setdefault(n, entry["error"])
        else:
            splits = [s for s in task.metadata.eval_splits if s in r.scores]
            entry.update(
                main_score=finite_or_none(100 * r.get_score(splits=splits)) if splits else None,
                scores=json_safe(r.to_dict()["scores"]),
                evaluation_seconds=r.evaluation_time,
            )
            if entry["main_score"] is None:
                errors.setdefault(n, f"no finite main score on splits {task.metadata.eval_splits}")
        per_task[n] = entry

    summary = summarize({n: e["main_score"] for n, e in per_task.items()}, types)
    result = {
        "tasks": per_task,
        "categories": summary["categories"],
        "avg": summary["avg"],
        "n_tasks": summary["n_tasks"],
        "n_missing": summary["n_missing"],
        "protocol": {
            "name": "mteb",
            "benchmark": benchmark_name,
            "tasks": names,
            "local_tasks": local_tasks,
            "mteb_version": mteb.__version__,
            "scikit_learn_version": sklearn.__version__,
            "main_score": "mteb main_score of each task x100, mean over its eval splits and subsets",
            "avg": "mean of the main scores of all tasks (MTEB leaderboard); categories: mean of their tasks; null if any missing",
            "similarity": "cosine",
            "query_instruction": wrapper.query_instruction,
            "prompt": wrapper.prompt,
            "batch_size": batch_size,
            "local_classification": {"n_experiments": TREC_N_EXPERIMENTS, "samples_per_label": TREC_SAMPLES_PER_LABEL}
            if any(LOCAL_TASKS[n].kind == "classification" for n in local_tasks)
            else None,
        },
        "data": {t.metadata.name: _task_data_record(t) for t in task_objs},
        "embedding": {"distinct_texts_embedded": wrapper.texts_embedded},
        "mteb_results": {
            "folder": str(Path(results_dir) / MTEB_RESULTS_SUBDIR / meta.model_name_as_path() / meta.revision) if results_dir is not None else None,
            "model_name": meta.name,
            "revision": meta.revision,
            "result_cache": str(cache.cache_path) if cache is not None else None,
            "reused": reused,
        },
        "errors": errors or None,
    }
    if errors:
        failed = Path(str(out) + ".failed.json")
        write_json_atomic(result, failed)
        raise MtebEvalError(f"MTEB: {len(errors)} task(s) failed: {sorted(errors)} (partial result: {failed}); first: {next(iter(errors.values()))}")
    return finish_result(result, model_dir, cell, wrapper.encoder, wrapper.cache, max_length, start, out)
