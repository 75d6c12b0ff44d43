"""The fingerprint of the code that computes what a training trains: part of a run's identity and its record.

Snakemake reruns a job when its params, its inputs or its rule's own script change; the package code a
train job runs (the objective, the step, the model's forward and pooling) is none of those, so an edited
loss planned "Nothing to be done" and a forced rerun restored the kept model of the old code (issue 70).
The fingerprint closes that: :func:`code_fingerprint` digests each module of :data:`TRAINING_CODE` with its
comments, docstrings and layout taken out (the module's ``ast`` dump: line numbers are attributes, which
``ast.dump`` leaves out by default), so reformatting or rewording a docstring keeps it, and any change
to what the code does changes it. :func:`aoe.training.checkpoints.run_identity` holds the per-module
digests, so a checkpoint or a kept final model of other code is never resumed or restored, and the model's
``aoe_config.json`` records them (``code``) with the commit and its dirty state; planning compares them
with the tree's (:mod:`aoe.plan.code_changes`).

Module-level, not function-level, on purpose (our choice): a function list would miss a helper the step
comes to call; a module list errs on the side of naming a model whose code changed in a part that did
not touch its weights (a reworded error message), which the planning message lets the user judge.
Standard library only, and cached by file size and mtime: the Snakefile computes it at every planning.

May import nothing of ``aoe`` (it names modules by path and never imports them).
"""

from __future__ import annotations

import ast
import hashlib
import json
from functools import lru_cache
from pathlib import Path

__all__ = ["TRAINING_CODE", "OUTSIDE_THE_FINGERPRINT", "PACKAGE_ROOT", "code_fingerprint", "fingerprint_of", "module_digest",
           "training_code_files"]

# the repository root: module paths below are relative to it, as a reader finds them
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

# What computes the trained weights: a folder stands for every .py file in it (a new loss module is in
# without a change here). tests/test_fingerprint.py fails on a module aoe/training/train.py imports
# (directly or through these) that is in neither this list nor OUTSIDE_THE_FINGERPRINT.
TRAINING_CODE = (
    "aoe/losses/",  # the objective: every loss function and their composition
    "aoe/training/train.py",  # the step: batches, micro-batches, optimizer, schedule, clipping
    "aoe/training/gathers.py",  # what the processes share: the gathered embeddings, the detached loss scale
    "aoe/training/finetuning.py",  # what trains (the transformer or adapters) and what a checkpoint keeps
    "aoe/training/selection.py",  # select_checkpoint best: which epoch's weights the model folder holds
    "aoe/model/encoder.py",  # the model's forward (embed, length buckets) and the loading of a base (QLoRA)
    "aoe/model/pooling.py",  # the poolings
    "aoe/model/pooling_names.py",  # which pooling needs the pooler or the first layer
    "aoe/model/lora.py",  # the adapters a LoRA / QLoRA run trains
    "aoe/model/tokens.py",  # padding, length buckets, the cached tokens a run reads
    "aoe/model/prompts.py",  # the template around an LLM's texts
)

# What the training imports that does not compute its weights, each with why it stays out
OUTSIDE_THE_FINGERPRINT = {
    "aoe/config/hparams.py": "its values are the run's resolved settings, which the identity holds already (train)",
    "aoe/config/recipes.py": "its values are the objective's resolved settings, which the identity holds already (objective)",
    "aoe/data/contracts.py": "checks a table and refuses it; the table itself is in the identity by its sha256",
    "aoe/data/io.py": "reads files and hashes them",
    "aoe/data/catalog.py": "names data sets and their published sizes",
    "aoe/data/mirror.py": "where data files come from",
    "aoe/model/backbones.py": "materialises a backbone folder, whose files are in the identity by name and size",
    "aoe/model/folder.py": "reads a model folder's records before anything loads",
    "aoe/model/interop.py": "writes the sentence-transformers files beside the trained weights",
    "aoe/training/checkpoints.py": "saves and restores the state of the same identity (bit for bit: tests/test_train_engine.py)",
    "aoe/training/fingerprint.py": "this module",
    "aoe/training/interruption.py": "records that a signal stopped a run, and its exit status",
    "aoe/training/curves.py": "draws metrics.jsonl as TensorBoard curves",
    "aoe/util/othertrees.py": "finds the same result in another results tree; what is taken from there has this identity",
    "aoe/util/formats.py": "on-disk format versions (the token cache's is in its cache.json)",
    "aoe/util/fsutil.py": "writes files atomically",
    "aoe/util/jsonio.py": "writes JSON",
    "aoe/util/progress.py": "progress lines",
    "aoe/util/provenance.py": "library versions and the commit, recorded beside the fingerprint",
    "aoe/evaluate/sts.py": "scores select_checkpoint best's validation pairs (Spearman of cosines); its choice is recorded in "
                           "aoe_config.json's selection, and the evaluation code would otherwise name every model at each edit",
}


def training_code_files(root: str | Path = PACKAGE_ROOT) -> list[str]:
    """The files of :data:`TRAINING_CODE` under ``root``, as sorted relative paths."""
    root = Path(root)
    out = set()
    for entry in TRAINING_CODE:
        if entry.endswith("/"):
            out |= {str(p.relative_to(root)) for p in (root / entry).glob("*.py")}
        else:
            out.add(entry)
    return sorted(out)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` less the docstring of the module and of each class and function (a string expression first in the body)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


@lru_cache(maxsize=None)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime only key the cache: an edit in the same process (a test) is read again
    source = Path(path).read_text(encoding="utf-8")
    return hashlib.sha256(ast.dump(_without_docstrings(ast.parse(source, filename=path))).encode()).hexdigest()[:16]


def module_digest(path: str | Path) -> str:
    """sha256 (16 hex digits) of a module's syntax tree without comments, docstrings and line positions."""
    stat = Path(path).stat()
    return _digest(str(path), stat.st_size, stat.st_mtime_ns)


def code_fingerprint(root: str | Path = PACKAGE_ROOT) -> dict:
    """``{"sha256": …, "modules": {relative path: digest}}`` of :data:`TRAINING_CODE` under ``root``."""
    root = Path(root)
    return fingerprint_of({rel: module_digest(root / rel) for rel in training_code_files(root)})


def fingerprint_of(modules: dict[str, str]) -> dict:
    """The fingerprint of per-module digests (a run identity's ``code``): their sha256 (16 hex digits) and them."""
    return {"sha256": hashlib.sha256(json.dumps(modules, sort_keys=True).encode()).hexdigest()[:16], "modules": dict(modules)}
