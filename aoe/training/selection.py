"""``select_checkpoint: best``: the validation pairs, each epoch end's (or step's) Spearman, the best one's weights
kept and put back before the model is saved; the run identity that includes the selection table. A ``run`` below is
the one :mod:`aoe.training.train` assembles (its ``_Run``: selection, module, accelerator, tokenizer, finetuning).

Checkpoint selection (``select_checkpoint``). ``last`` (default): the model folder holds the
last step's weights, as the official code's printed numbers (angle-emb 0.1.1 ``fit`` saves the
final backbone, fcb6223 angle_emb/angle.py:734, and ``train_angle.py --mode test`` loads it).
``best``: at each epoch end, and at the last step, the model embeds ``select_split``'s pairs as it
trains (pooling, prompt, max_length; eval mode, no gradients) and scores Spearman of cosine vs gold
(x100); the epoch with the highest score above 0 wins, a later one only when strictly higher, as the
official ``EvaluateCallback`` (angle.py:398-415) keeps ``<output_dir>/best-checkpoint`` (its best
starts at 0, NaN never beats it). When no epoch scores above 0 the official keeps no best-checkpoint
and its output_dir holds the final model: the model folder then gets the last step's weights
(bench/parity/selection_parity.py runs both rules on the same scores).
The scores and the best weights so far (LoRA: the adapters only) are part of every checkpoint, so
a resumed run chooses what an uninterrupted one chooses; the scoring draws no random numbers, so
the training itself is that of ``last``, and its seconds stay out of ``train_seconds``.
aoe_config.json's ``selection`` records the split, every score, the chosen epoch and ``split_is_test``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from aoe.config.hparams import OFF_DEFAULTS, TrainSettings
from aoe.data.contracts import read_table
from aoe.data.io import DataError, sha256_file
from aoe.model.encoder import embed, pad_ids
from aoe.model.tokens import tokenize_texts


__all__ = ["Selection", "keep_best", "select_at", "validation_spearman", "with_selection"]


class Selection:
    """``select_checkpoint: best``: the validation pairs, each epoch end's score, and the best epoch's weights.

    Registered with accelerate for checkpointing (``state_dict`` / ``load_state_dict``): a checkpoint
    holds the scores and the best weights so far beside the model and optimizer, so a run resumed
    after a kill continues the same comparison. Costs one more copy of what the model folder saves,
    in memory (CPU) and in each checkpoint (LoRA: the adapters only).
    """

    def __init__(self, cfg: TrainSettings, table: str | Path, tokenizer, split_is_test: bool):
        from aoe.evaluate.sts import unique_texts

        df = read_table(table)  # its contract: texts, finite scores, rows
        if "score" not in df.columns:  # a table of no catalogued dataset, whose contract leaves the score out
            raise DataError(f"{table}: not a pair table with gold scores to select a checkpoint on (no column score); select_split {cfg.select_split}")
        self.split, self.table, self.split_is_test = dict(cfg.select_split), str(table), bool(split_is_test)
        self.every = cfg.select_every
        self.table_sha256 = sha256_file(table)
        texts = unique_texts([df])
        index = {t: i for i, t in enumerate(texts)}
        # tokenized as the training texts are (the official callback's valid_ds, AngleDataTokenizer as train_ds), or
        # at select_max_length (SimCSE's evaluation batcher cuts nothing, simcse/trainers.py:105-111)
        self.ids = tokenize_texts(tokenizer, texts, cfg.select_max_length or cfg.max_length, cfg.prompt)
        self.first, self.second = df["sentence1"].map(index).to_numpy(), df["sentence2"].map(index).to_numpy()
        self.gold = df["score"].to_numpy(dtype="float64")
        self.scores: list[dict] = []  # {"epoch", "step", "spearman"} per epoch end, in order
        self.best: dict | None = None  # the entry of scores whose weights are kept
        self.weights: dict[str, torch.Tensor] | None = None

    @property
    def name(self) -> str:
        return f"{self.split['dataset']}/{self.split['split']}"

    def state_dict(self) -> dict:
        return {"scores": self.scores, "best": self.best, "weights": self.weights or {}}

    def load_state_dict(self, state: dict) -> None:
        self.scores, self.best, self.weights = list(state["scores"]), state["best"], dict(state["weights"]) or None

    def record(self) -> dict:
        """aoe_config.json's ``selection``."""
        when = f"the step (one every {self.every})" if self.every else "the epoch end"
        return {
            "rule": "best",
            "criterion": f"{when} with the highest Spearman x100 of cosine vs gold on split above 0; a later one only if "
                         "strictly higher; epoch null: no epoch above 0, the model folder holds the last step's weights",
            "split": self.split,
            "table_sha256": self.table_sha256,
            "split_is_test": self.split_is_test,
            "epoch": self.best["epoch"] if self.best else None,
            "step": self.best["step"] if self.best else None,
            "score": self.best["spearman"] if self.best else None,
            "scores": self.scores,
        }


def with_selection(identity: dict, select_table: str | Path | None) -> dict:
    """The run identity of :func:`aoe.training.checkpoints.run_identity` with what decides the selection: the saved
    weights depend on the table's content too. At their off default the selection settings are left out,
    so a run trained before they existed keeps its identity (its checkpoints resume, its final restores)."""
    train = {k: v for k, v in identity["train"].items() if not (k in OFF_DEFAULTS and v == OFF_DEFAULTS[k])}
    out = {**identity, "train": train}
    if select_table is not None:
        out["select_table_sha256"] = sha256_file(select_table)
    return out


def select_at(run, state: dict, metrics_lines: list[str]) -> float:
    """``select_checkpoint: best`` at an epoch end (or every ``select_every`` steps): score the model on the validation
    pairs, keep its weights if strictly better than the best so far (which starts at 0), log a metrics line; the
    seconds it took (0 without selection, or where this epoch end or step was scored already: a resumed run)."""
    sel = run.selection
    key = "step" if run.cfg.select_every else "epoch"
    if sel is None or (sel.scores and sel.scores[-1][key] == state[key]):
        return 0.0
    began = time.perf_counter()
    score = validation_spearman(run)
    # the official callback's best starts at 0 (angle.py:405): a score at or below it is never kept
    better = score is not None and score > (sel.best["spearman"] if sel.best is not None else 0.0)
    entry = {"epoch": state["epoch"], "step": state["step"], "spearman": score}
    sel.scores.append(entry)
    if better:
        sel.best = entry
        sel.weights = run.finetuning.kept_weights(run.accelerator.unwrap_model(run.module).encoder)
    took = time.perf_counter() - began
    metrics_lines.append(json.dumps({
        "step": state["step"], "epoch": state["epoch"], "select_split": sel.name, "select_spearman": score,
        "select_best": better, "select_seconds": took,
    }))
    return took


def validation_spearman(run) -> float | None:
    """Spearman x100 of the pairs' cosine similarities vs their gold scores (None: constant similarities),
    embedded as training embeds (:func:`aoe.model.encoder.embed`, the run's pooling) in eval mode; the main
    process's value on every process, so that all keep the same epoch."""
    import math

    from scipy.stats import spearmanr

    from aoe.evaluate.sts import cosine_rows

    sel, accelerator = run.selection, run.accelerator
    module = accelerator.unwrap_model(run.module)
    device = accelerator.device
    order = sorted(range(len(sel.ids)), key=lambda i: -len(sel.ids[i]))  # similar lengths together: less padding
    chunks = []
    module.eval()
    try:
        with torch.no_grad(), accelerator.autocast():
            for s in range(0, len(order), run.local):
                enc = pad_ids([sel.ids[i] for i in order[s : s + run.local]], run.tokenizer)
                pooled = embed(module.encoder, module.pooling, enc["input_ids"].to(device), enc["attention_mask"].to(device))
                chunks.append(pooled.float().cpu())
    finally:
        module.train()
    emb = torch.empty(len(order), chunks[0].shape[-1])
    emb[torch.tensor(order)] = torch.cat(chunks)
    emb = emb.numpy()
    value = float(spearmanr(cosine_rows(emb[sel.first], emb[sel.second]), sel.gold).statistic)
    if accelerator.num_processes > 1:
        from accelerate.utils import broadcast

        value = broadcast(torch.tensor([value], dtype=torch.float64, device=device), from_process=0).item()
    return 100 * value if math.isfinite(value) else None


def keep_best(run) -> None:
    """``select_checkpoint: best``: put the best epoch's weights back into the model before it is checked and saved."""
    sel = run.selection
    if sel is None:
        return
    if sel.best is None:
        # the official run then has no best-checkpoint, and its output_dir holds the final model (angle.py:734)
        run.accelerator.print(
            f"select_checkpoint best: no Spearman on {sel.name} above 0 at any of {len(sel.scores)} epoch ends "
            "(undefined or <= 0, the official callback's initial best): the last step's weights are kept"
        )
        return
    encoder = run.accelerator.unwrap_model(run.module).encoder
    result = encoder.load_state_dict(sel.weights, strict=not run.finetuning.partial_resume)
    if result.unexpected_keys:
        raise RuntimeError(f"the kept best weights name tensors the model lacks: {result.unexpected_keys[:3]}")
    run.accelerator.print(
        f"select_checkpoint best: epoch {sel.best['epoch']} (step {sel.best['step']}), Spearman {sel.best['spearman']:.2f} on {sel.name}"
    )
