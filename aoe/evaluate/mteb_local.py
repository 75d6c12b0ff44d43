"""MTEB's local tasks: mteb task classes whose data never come from the hub.

The data come from the data mirror or the pipeline's prepared tables (CI, CPU presets):
the 7 STS test sets (``STSBenchmarkLocal``, ``SICKRLocal``, ``STS12Local`` ...) and
SentEval's TREC as a classification task (``TRECLocal``). :data:`LOCAL_TASKS` and
:func:`local_task_inputs` say what each reads without importing mteb (the Snakefile plans
with them); :func:`local_task` builds the task object (mteb imported then).
:mod:`aoe.evaluate.mteb_eval` runs them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

__all__ = [
    "LOCAL_TASKS",
    "LocalTaskSpec",
    "MtebEvalError",
    "TREC_N_EXPERIMENTS",
    "TREC_SAMPLES_PER_LABEL",
    "check_local",
    "local_task",
    "local_task_inputs",
]


class MtebEvalError(RuntimeError):
    """An MTEB evaluation that cannot give a complete, trustworthy result (names the task or file)."""


# ---------------------------------------------------------------------------
# Local tasks: what each one reads (no mteb import needed to plan a workflow).


@dataclass(frozen=True)
class LocalTaskSpec:
    """A local task: ``kind`` "sts" reads results/data/{dataset}/test.parquet (or the mirror);
    "classification" reads SentEval transfer task ``dataset`` from the downstream folder."""

    kind: str
    dataset: str
    description: str


LOCAL_TASKS: dict[str, LocalTaskSpec] = {
    **{
        f"STS{y}Local": LocalTaskSpec("sts", f"sts{y}", f"STS{y} test (SentEval files, all subsets), from the data mirror")
        for y in (12, 13, 14, 15, 16)
    },
    "STSBenchmarkLocal": LocalTaskSpec("sts", "stsb", "STS Benchmark test (SentEval's sts-test.csv), from the data mirror"),
    "SICKRLocal": LocalTaskSpec("sts", "sickr", "SICK relatedness test (SentEval's SICK_test_annotated.txt), from the data mirror"),
    "TRECLocal": LocalTaskSpec(
        "classification", "TREC", "TREC question type (6 coarse classes; SentEval's train_5500 / TREC_10), from the data mirror"
    ),
}

# mteb's classification protocol on TRECLocal: logistic regression on n_experiments
# seeded draws of samples_per_label training samples per class (mteb's defaults are 10 / 8;
# 32 per class keeps the 6-class few-shot score stable on 500 test questions).
TREC_N_EXPERIMENTS = 10
TREC_SAMPLES_PER_LABEL = 32

def check_local(names: Iterable[str]) -> list[str]:
    """``names`` as a list, refused (:class:`MtebEvalError`) when one is not a key of :data:`LOCAL_TASKS`."""
    names = list(names)
    unknown = [n for n in names if n not in LOCAL_TASKS]
    if unknown:
        raise MtebEvalError(f"unknown local MTEB task(s) {unknown}; known: {sorted(LOCAL_TASKS)}")
    return names


def local_task_inputs(names: Iterable[str]) -> dict[str, list[str]]:
    """What the named local tasks read: {"sts": [STS dataset keys], "transfer": [SentEval transfer tasks]}."""
    names = check_local(names)
    return {
        "sts": [LOCAL_TASKS[n].dataset for n in names if LOCAL_TASKS[n].kind == "sts"],
        "transfer": [LOCAL_TASKS[n].dataset for n in names if LOCAL_TASKS[n].kind == "classification"],
    }


def _metadata(name: str, spec: LocalTaskSpec, task_type: str, main_score: str, eval_splits: list[str]):
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        name=name,
        dataset={"path": f"local/{name}", "revision": "local"},  # never loaded from the hub: load_data is overridden
        description=spec.description,
        reference="https://github.com/princeton-nlp/SimCSE/tree/main/SentEval",
        type=task_type,
        category="t2t",
        modalities=["text"],
        eval_splits=eval_splits,
        eval_langs=["eng-Latn"],
        main_score=main_score,
        date=("2012-01-01", "2017-12-31"),
        domains=["Written"],
        task_subtypes=[],
        license="not specified",
        annotations_creators="human-annotated",
        dialect=[],
        sample_creation="found",
        bibtex_citation="",
    )


@lru_cache(maxsize=None)
def _task_classes() -> dict[str, type]:
    """One mteb task class per local task (built on first use: importing mteb takes seconds)."""
    from mteb.abstasks.classification import AbsTaskClassification
    from mteb.abstasks.sts import AbsTaskSTS

    class _Local:
        """Data from local files, set by the constructor's ``loader``; mteb never touches the hub."""

        def __init__(self, loader, files: dict[str, str], **kwargs):
            super().__init__(**kwargs)
            self._loader = loader
            self.files = files  # path -> sha256 (or a manifest's table_sha256): recorded in the result

        def load_data(self, num_proc: int | None = None, **kwargs) -> None:
            if self.data_loaded:
                return
            self.dataset = self._loader()
            self.data_loaded = True

    classes: dict[str, type] = {}
    for name, spec in LOCAL_TASKS.items():
        if spec.kind == "sts":
            lo, hi = (1, 5) if spec.dataset == "sickr" else (0, 5)
            attrs = {"metadata": _metadata(name, spec, "STS", "cosine_spearman", ["test"]), "min_score": lo, "max_score": hi}
            classes[name] = type(name, (_Local, AbsTaskSTS), attrs)
        else:
            attrs = {
                "metadata": _metadata(name, spec, "Classification", "accuracy", ["test"]),
                "n_experiments": TREC_N_EXPERIMENTS,
                "samples_per_label": TREC_SAMPLES_PER_LABEL,
            }
            classes[name] = type(name, (_Local, AbsTaskClassification), attrs)
    return classes


def local_task(
    name: str,
    *,
    tables: Mapping[str, tuple[str | os.PathLike, str | os.PathLike]] | None = None,
    downstream: str | os.PathLike | None = None,
):
    """An mteb task object for local task ``name``.

    STS tasks read the prepared table of their dataset when ``tables`` (dataset ->
    (parquet, manifest)) has it, else SentEval's files under ``downstream`` (read with
    :func:`aoe.data.sts.read_sts`, the same rows). TRECLocal reads ``downstream``.
    """
    import datasets

    from aoe.data.contracts import read_manifest, read_table
    from aoe.data.io import sha256_file

    spec = LOCAL_TASKS[check_local([name])[0]]
    cls = _task_classes()[name]
    if spec.kind == "sts":
        if tables and spec.dataset in tables:
            table, manifest = (Path(p) for p in tables[spec.dataset])
            for p in (table, manifest):
                if not p.is_file():
                    raise MtebEvalError(f"{name}: missing {p}")
            meta = read_manifest(manifest, table)
            if (meta.get("dataset"), meta.get("split")) != (spec.dataset, "test"):
                raise MtebEvalError(f"{name}: {manifest} describes {meta.get('dataset')}/{meta.get('split')}, not {spec.dataset}/test")
            files = {str(table): meta["table_sha256"]}
            read = lambda: read_table(table, manifest)  # noqa: E731
        elif downstream is not None:
            from aoe.data.sts import read_sts, sts_files

            files = {str(Path(downstream) / f): sha256_file(Path(downstream) / f) for f in sts_files(spec.dataset, "test") if (Path(downstream) / f).is_file()}
            read = lambda: read_sts(downstream, spec.dataset, "test")  # noqa: E731
        else:
            raise MtebEvalError(f"{name}: no prepared table for {spec.dataset!r} and no downstream folder given")

        def loader():
            df = read()
            missing = {"sentence1", "sentence2", "score"} - set(df.columns)
            if missing:
                raise MtebEvalError(f"{name}: table lacks columns {sorted(missing)}")
            ds = datasets.Dataset.from_dict(
                {"sentence1": df["sentence1"].tolist(), "sentence2": df["sentence2"].tolist(), "score": df["score"].astype(float).tolist()}
            )
            return datasets.DatasetDict({"test": ds})

        return _with_revision(cls(loader=loader, files=files), spec)

    if downstream is None:
        raise MtebEvalError(f"{name}: needs SentEval's downstream folder (data mirror) for {spec.dataset}")
    from aoe.data.transfer import read_transfer, transfer_files

    root = Path(downstream)
    files = {str(root / f): sha256_file(root / f) for f in transfer_files(spec.dataset) if (root / f).is_file()}

    def loader():
        data = read_transfer(root, spec.dataset)
        return datasets.DatasetDict(
            {
                split: datasets.Dataset.from_dict({"text": data.splits[split].sentences, "label": data.splits[split].labels})
                for split in ("train", "test")
            }
        )

    return _with_revision(cls(loader=loader, files=files), spec)


def _with_revision(task, spec: LocalTaskSpec):
    """The task with a dataset revision naming its data: the files' checksums (and TREC's protocol).

    mteb records the revision in each result and its result cache keeps results by task name:
    new data must not be served an earlier result (:func:`aoe.evaluate.mteb_eval.run_mteb_evaluation` reruns a task
    whose cached result has another revision).
    """
    import hashlib

    content = {"files": sorted(task.files.values())}
    if spec.kind == "classification":
        content["protocol"] = {"n_experiments": TREC_N_EXPERIMENTS, "samples_per_label": TREC_SAMPLES_PER_LABEL}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    meta = task.metadata
    task.metadata = meta.model_copy(update={"dataset": {**meta.dataset, "revision": f"local-{digest}"}})
    return task
