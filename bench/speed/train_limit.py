"""The training engine's pairs/s against a bare forward+backward+AdamW loop on identical batches (issue 13).

    .venv/bin/python bench/speed/train_limit.py [--steps 30] [--repeats 3] [--threads 2] [--profile]

Both sides train MiniLM-L6 with the AoE objective (angle 1 + in-batch 1, tau 20, contrastive
threshold 0.8) on STS-B train from the mirror, batch 32, max_length 64, lr 5e-5 with 10%
linear warm-up, gradient clipping at 1.0, seed 1, fp32, ``--threads`` torch threads:

* ``engine``: ``aoe.training.train.train`` exactly as the pipeline's train rule calls it (token cache,
  accelerate, collation in the loop, logging every 10 steps); pairs/s from its run summary
  (the training loop's wall time, model loading and saving excluded);
* ``bare``: the same padded batches built before the clock starts (the engine's own
  ``epoch_batches`` order and ``Collator``), then only ``embed`` -> objective -> backward ->
  clip -> AdamW -> scheduler; ``--bare-adam`` picks the AdamW implementation (``fused``, the
  fastest on CPU and the default; ``single`` is torch's per-tensor loop, the engine's choice
  before issue 13) and ``--bare-clip`` the clipping (``foreach`` or ``default``); its forward is
  ``embed_bucketed`` with the engine's ``length_buckets`` (``--length-buckets``; 1 = one pass
  over the batch padded to its longest text), so both sides compute the same thing.

Each run is a fresh process; runs alternate (engine, bare, engine, bare, ...). The JSON
(bench/out/train_limit.json) has every run's pairs/s, the load average before and
after it, and the loss of both sides at the engine's logged steps (they must agree to float
tolerance: same seed, same batches, same dropout masks). ``--profile`` adds one cProfile'd
engine run and lists where its loop time goes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

SETTINGS = dict(objective="aoe", seed=1, learning_rate=5e-5, batch_size=32, warmup_ratio=0.1, max_length=64,
                score_range=(0, 5), objective_overrides={"contrastive_threshold": 0.8}, log_every=10)


def _config(args):
    from aoe.training.train import TrainConfig

    buckets = {} if args.length_buckets is None else {"length_buckets": args.length_buckets}
    return TrainConfig(max_steps=args.steps, **SETTINGS, **buckets)


def worker_engine(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    from aoe.training.train import train

    table = C.stsb_table("train", args.mirror)
    cache = C.token_cache(table, SETTINGS["max_length"])
    out = C.WORK_DIR / f"limit-engine-{os.getpid()}"
    shutil.rmtree(out, ignore_errors=True)
    try:
        summary = train(cache, table, C.backbone_dir(), out, _config(args))
        metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "pairs_per_s": summary["pairs_per_s"],
        "train_seconds": summary["train_seconds"],
        "losses": {m["step"]: m["loss"] for m in metrics},
        "torch_threads": torch.get_num_threads(),
    }


def worker_bare(args) -> dict:
    import torch
    from accelerate.utils import set_seed
    from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

    from aoe.losses import get_objective
    from aoe.model.encoder import embed_bucketed
    from aoe.model.tokens import ensure_pad_token, length_buckets
    from aoe.model.tokens import load_token_cache
    from aoe.training.train import Collator, epoch_batches, num_warmup_steps

    torch.set_num_threads(args.threads)
    cfg = _config(args)
    table = C.stsb_table("train", args.mirror)
    cache = C.token_cache(table, cfg.max_length)
    bb = C.backbone_dir()
    objective = get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format)
    set_seed(cfg.seed)  # as the engine: before the model is built
    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(bb))
    data = load_token_cache(cache, table, bb, cfg.max_length)
    collate = Collator(tokenizer, cfg, objective)
    model = AutoModel.from_pretrained(bb)
    # the same parameter groups as the engine (weight decay 0 here, so they only matter for identity)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm", "norm.weight")
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in params if not any(k in n for k in no_decay)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in params if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    adam = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single": {"foreach": False}}[args.bare_adam]
    optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate, **adam)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps(cfg, cfg.max_steps), cfg.max_steps)
    # every batch padded and converted before the clock starts
    order = []
    epoch = 0
    while len(order) < cfg.max_steps:
        order += epoch_batches(len(data), cfg.batch_size, cfg.seed, epoch)
        epoch += 1
    batches = []
    for idx in order[: cfg.max_steps]:
        rows = data[idx]
        batches.append(collate([dict(zip(rows, vals)) for vals in zip(*rows.values())]))
    pad_share = [1 - float(b["attention_mask"].float().mean()) for b in batches]
    bucket_pad_share = []  # padding left inside the forward passes of embed_bucketed
    for b in batches:
        lengths = b["attention_mask"].flatten(0, 1).sum(-1).tolist()
        groups = length_buckets(lengths, cfg.length_buckets)
        bucket_pad_share.append(1 - sum(lengths) / sum(len(g) * max(lengths[i] for i in g) for g in groups))
    clip_kw = {"foreach": True} if args.bare_clip == "foreach" else {}
    losses = {}
    model.train()
    start = time.perf_counter()
    for step, batch in enumerate(batches, start=1):
        b, k, t = batch["input_ids"].shape
        emb = embed_bucketed(model, cfg.pooling, batch["input_ids"].view(b * k, t), batch["attention_mask"].view(b * k, t),
                             cfg.length_buckets)
        emb = emb.float().view(b, k, -1)
        loss, _ = objective(tuple(emb.unbind(1)), batch["labels"], batch["text_ids"], None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm, **clip_kw)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if step % cfg.log_every == 0 or step == cfg.max_steps:
            losses[step] = loss.item()
    seconds = time.perf_counter() - start
    return {
        "pairs_per_s": cfg.batch_size * cfg.max_steps / seconds,
        "train_seconds": seconds,
        "losses": losses,
        "padding_share_mean": sum(pad_share) / len(pad_share),
        "length_buckets": cfg.length_buckets,
        "padding_share_in_buckets_mean": sum(bucket_pad_share) / len(bucket_pad_share),
        "torch_threads": torch.get_num_threads(),
    }


def profile_engine(args) -> dict:
    """One engine run under cProfile: the loop's time by function (cumulative), top entries."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    result = worker_engine(args)
    prof.disable()
    stats = pstats.Stats(prof)
    wanted = {
        "forward (embed)": "embed",
        "backward": "run_backward",
        "optimizer.step": "_use_grad",
        "clip_grad_norm_": "clip_grad_norm_",
        "collate (tokenizer.pad)": "__call__",
        "objective": "components",
        "arrow rows (Dataset.__getitem__)": "__getitem__",
    }
    found = {}
    for (filename, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        for label, name in wanted.items():
            if func == name and (label != "collate (tokenizer.pad)" or filename.endswith("aoe/training/train.py")) and (
                label != "arrow rows (Dataset.__getitem__)" or "arrow_dataset" in filename
            ):
                found[label] = max(found.get(label, 0.0), ct)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
    return {"engine_run": result, "seconds_by_part": found, "cprofile_top": buf.getvalue().splitlines()[:80]}


def main() -> None:
    workers = {"engine": worker_engine, "bare": worker_bare, "profile": profile_engine}
    ap = C.timed_parser(__doc__, "train_limit", list(workers))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bare-adam", choices=["fused", "foreach", "single"], default="fused")
    ap.add_argument("--bare-clip", choices=["foreach", "default"], default="foreach")
    ap.add_argument("--length-buckets", type=int, default=None,
                    help="forward passes per batch on both sides (default: the engine's TrainConfig default)")
    ap.add_argument("--profile", action="store_true", help="add one cProfile'd engine run")
    args = ap.parse_args()
    if C.serve_worker(args, workers):
        return

    # build the shared inputs once, outside the timed workers
    C.token_cache(C.stsb_table("train", args.mirror), SETTINGS["max_length"])
    base = C.worker_command(__file__, args, ["steps", "threads", "mirror", "bare_adam", "bare_clip", "length_buckets"])
    env = {"OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    runs = C.alternate(base, ("engine", "bare"), args.repeats, env, echo=lambda side, r: f"{r['pairs_per_s']:6.2f} pairs/s")
    stats = {side: C.summarize([r["pairs_per_s"] for r in runs if r["side"] == side]) for side in ("engine", "bare")}
    ratios = [e["pairs_per_s"] / b["pairs_per_s"] for e, b in zip(runs[0::2], runs[1::2])]
    eng_losses = runs[0]["losses"]
    bare_losses = runs[1]["losses"]
    diffs = [abs(eng_losses[s] - bare_losses[s]) for s in eng_losses if s in bare_losses]
    record = {
        "command": C.command(__file__),
        "settings": {**SETTINGS, "steps": args.steps, "threads": args.threads, "bare_adam": args.bare_adam,
                     "bare_clip": args.bare_clip,
                     "length_buckets": _config(args).length_buckets, "backbone": str(C.backbone_dir()), "data": "STS-B train (mirror)"},
        "runs": runs,
        "pairs_per_s": stats,
        "engine_over_bare_per_repeat": ratios,
        "engine_over_bare_median": sorted(ratios)[len(ratios) // 2],
        "loss_max_abs_diff_at_logged_steps": max(diffs) if diffs else None,
    }
    if args.profile:
        result, wall, before, after = C.run_worker(base + ["--worker", "profile"], env)
        record["profile"] = {**result, "load_before": before, "load_after": after}
    path = C.write_json("train_limit", record, args.out)
    C.print_table(
        f"Training loop vs bare loop: MiniLM-L6, AoE, batch 32, max_len 64, {args.steps} steps, {args.threads} threads, "
        f"{args.repeats} alternating repeats",
        ["loop", "pairs/s median", "min", "max", "spread"],
        [[s, st["median"], st["min"], st["max"], f"{100 * st['spread_rel']:.0f}%"] for s, st in stats.items()],
    )
    print(f"  engine / bare per repeat: {', '.join(f'{r:.3f}' for r in ratios)} (median {record['engine_over_bare_median']:.3f})")
    print(f"  largest |loss difference| at the logged steps: {record['loss_max_abs_diff_at_logged_steps']:.2e}")
    if args.profile:
        print("  engine loop time by part (cProfile, cumulative s): "
              + ", ".join(f"{k} {v:.1f}" for k, v in record["profile"]["seconds_by_part"].items()))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
