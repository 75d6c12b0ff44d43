"""What four fidelity points of issue 36 change in real CPU runs: evaluation pooling (1, 2), best vs last
checkpoint (3) and the LLM evaluation text (6), on MiniLM-L6 and Gemma 3 270M; issue 51's recipe change of
AnglE's in-domain cells (51); and issue 61's in-domain scoring gold (61).

    .venv/bin/python bench/studies/fidelity_effects.py [--parts 1,2,3,6,7] [--max-pairs 1000] [--llm-max-pairs 120] [--part7-steps 200]
                                               [--mirror DIR] [--out PATH]
    .venv/bin/python bench/studies/fidelity_effects.py --parts 51 --out bench/studies/results/fidelity_effects_issue51.json
    .venv/bin/python bench/studies/fidelity_effects.py --parts 61 --out bench/studies/results/fidelity_effects_issue61.json

Everything goes through the pipeline's own code: the test, dev and train tables are prepared by
``aoe.data.prepare.prepare_sts_table`` (rule prepare_sts), the backbones by
``aoe.model.backbones.materialize_backbone`` (rule fetch_backbone), the token caches by
``aoe.model.tokens.build_token_cache``, the models by ``aoe.training.train.train`` with the cell's ``TrainConfig`` as
``aoe.config.cell_settings.train_params`` resolves it from config.yaml + a preset, and every score by
``aoe.evaluate.run.run_sts_evaluation`` (7 STS tasks, SentEval "all", Spearman x100), all under
``bench/out/work/fidelity/``. Nothing is reused between runs but the prepared tables and the
materialized backbones (their preparation time is recorded apart); every model is trained again.

1. MiniLM-L6 trained with AoE on STS-B train as the CPU demo's cell (presets/cpu-demo.yaml: seed 1,
   200 steps of 32 pairs, lr 5e-5, 10% warm-up, max_length 64, CLS pooling), scored under its
   training pooling ``cls`` (the reference), masked ``cls_avg``, and the official arithmetic over
   padded batches: 0.1.1's ``cls_avg_padded`` in SentEval batches of 16 (fcb6223 eval.py) and
   0.4.6's ``cls_avg_batchsum`` in batches of 2 (1c5515b examples/NLI/eval_nli.py).
2. The same four poolings on MiniLM-L6 as downloaded.
3. The same cell for ``--select-epochs`` whole epochs (max_steps 0) of a seeded ``--select-subset``-pair
   subset of STS-B train, once with ``select_checkpoint: best`` on STS-B dev and once with ``last``
   (the grid's default, the reference), same seed: the chosen epoch, each epoch end's dev Spearman,
   and the STS scores (``cls``) of both folders. The two runs' logged losses are compared step by
   step, and the last model's dev Spearman is computed again (aoe.evaluate.run.run_indomain_evaluation
   at the training max_length), to show that the best run's last epoch is the last run's model.
4. (Point 6) Gemma 3 270M as downloaded (presets/llm-cpu.yaml: AoE's prompt, last-token pooling),
   each text as in the table (``raw``, the reference) and rewritten as the official eval.py
   (``official_eval_py``, the grid's setting).
5. (Part 7, issue 51) The pooling ablations' arithmetic: the part-1 cell trained twice, with the masked
   ``avg`` (the reference; the demo's length buckets) and with 0.1.1's ``avg_padded`` (length_buckets 1:
   each micro-batch padded to its longest text, as the official collator), each scored on all of STS-B
   test in-domain as AnglE Table 3 is (aoe.evaluate.run.run_indomain_evaluation: the padded model in
   AnglE.evaluate's batches of 32 interleaved pairs) and on the 7 STS tasks under the cap.
6. (Part 51) AnglE's in-domain cells (AnglE Table 2, its ablation table) before and after issue 51, on the CPU
   demo's backbone: the angle_arxiv objective on STS-B train, seeds 1 and 2, ``--indomain-steps`` steps of 32 pairs,
   from the backbone, under the official STS-B example's values the grid had (lr 2e-5, no warm-up, max_length 128:
   presets/paper-angle-indomain-readme.yaml, the reference) and under fcb6223 train_angle.py's defaults the grid
   trains now (lr 1e-5, 100 warm-up steps, max_length 512). Not measured: the start (the README example fine-tunes
   the NLI model, the script BERT as downloaded), since an NLI stage is hours of CPU, and the 20 epochs, since the
   step count is held equal; so the row measures the rate, warm-up and length at equal length of training.
7. (Part 61, issue 61) The in-domain scoring gold: the CPU demo's cell (MiniLM-L6, AoE on STS-B train, 200 steps,
   seeds 1 and 2, presets/cpu-demo.yaml) scored on all of STS-B test by ``aoe.evaluate.run.run_indomain_evaluation``
   (the rule evaluate_indomain's code) against the gold as annotated (``float``, the reference) and against
   ``int(score)`` (``int``), as angle-emb's AnglE.evaluate correlates (fcb6223 angle_emb/angle.py:254, 750; the official
   package itself: bench/parity/gold_parity.py); and rho(gold, int(gold)) on the split. ``--part61-models`` scores the
   finished demo's own model folders (README command 1; seed 1, or both) instead of training them again, after
   checking their recorded recipe against the demo's. JSON: its own ``--out`` (bench/studies/results/fidelity_effects_issue61.json).

Caps: the MiniLM scores use a seeded ``--max-pairs`` subset of each task but STS-B (every one of its
1,379 test pairs): the official arithmetic embeds every text in its SentEval batch, without dedup or
length sorting, and batches of 2 run at a fraction of the masked path's speed, so every pair of the 7
tasks would take the whole run past 25 minutes on 2 cores. Gemma scores ``--llm-max-pairs`` per task,
STS-B included, as presets/llm-cpu.yaml does (``aoe.evaluate.sts.cap_pairs``: the same pairs for every
row of a model, and the pairs of the README's earlier 120-pair measurement).
The JSON (default ``bench/studies/results/fidelity_effects.json``) has every row's per-task scores, the caps,
seeds, library versions, the CPU model and the wall time of each part.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

RESULT = C.committed(__file__, "fidelity_effects.json")
WORK = C.WORK_DIR / "fidelity"
PARTS = ("1", "2", "3", "6", "7", "51", "61")
SEEDS_61 = (1, 2)  # the CPU demo's seeds
SEEDS_51 = (1, 2)  # the CPU demo's seeds
SEED = 1  # the CPU demo's first seed
SUBSET_SEED = 0
MINILM, GEMMA = "minilm-l6", "gemma3-270m"
# (row label, eval_pooling, SentEval batch): the trained pooling first (the reference), then the
# masked alternative, then each official release's arithmetic in the batch size its eval script used
POOLING_ROWS = [
    ("cls (the model's own)", None, None),
    ("cls_avg (masked)", "cls_avg", None),
    ("cls_avg_padded (0.1.1)", "cls_avg_padded", 16),
    ("cls_avg_batchsum (0.4.6)", "cls_avg_batchsum", 2),
]
EVAL_TEXTS = ("raw", "official_eval_py")


def cpu_model() -> str | None:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), None)


# --------------------------------------------------------------------------- data and backbones


def prepare_tables(mirror: str) -> dict:
    """The 7 STS test tables and STS-B train/dev, as rule prepare_sts writes them (kept between runs)."""
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.prepare import prepare_sts_table
    from aoe.data.sts import STS_DATASETS, sts_files

    downstream = resolve_downstream_root(mirror)
    if downstream is None:
        raise SystemExit("no data mirror: set AOE_DATA_MIRROR or --mirror")
    out = {}
    for dataset, split in [(d, "test") for d in STS_DATASETS] + [("stsb", "train"), ("stsb", "dev")]:
        table, manifest = WORK / "data" / dataset / f"{split}.parquet", WORK / "data" / dataset / f"{split}.manifest.json"
        if not manifest.is_file():
            table.parent.mkdir(parents=True, exist_ok=True)
            prepare_sts_table(dataset, split, {rel: downstream / rel for rel in sts_files(dataset, split)}, table, manifest)
        out[(dataset, split)] = (table, manifest)
    return out


def backbone(name: str, config: dict) -> tuple[Path, dict]:
    """The backbone folder as rule fetch_backbone lays it out (built once: Gemma's GGUF dequantization takes a minute)."""
    from aoe.model.backbones import materialize_backbone

    out = WORK / "backbones" / name
    record = out / "fidelity-backbone.json"
    if not record.is_file():
        start = time.perf_counter()
        provenance = materialize_backbone(name, config["backbones"][name], out)
        record.write_text(json.dumps({"provenance": provenance, "seconds": round(time.perf_counter() - start, 1)}, indent=2))
    return out, json.loads(record.read_text())


# --------------------------------------------------------------------------- training and scoring


def train_cell(config: dict, backbone_dir: Path, table: Path, name: str, dev: Path | None = None, objective: str = "aoe",
               seed: int = SEED, **overrides) -> tuple[Path, dict]:
    """The CPU demo's MiniLM cell (AoE, seed SEED unless given) with ``overrides``, trained from scratch into WORK/models/name."""
    from aoe.config.cell_settings import train_params
    from aoe.model.tokens import build_token_cache
    from aoe.training.train import TrainConfig, train

    params = {**train_params(config, MINILM, objective, "stsb", seed), **overrides}
    cfg = TrainConfig(**params)
    out = WORK / "models" / name
    # a finished run of the same identity would be restored from its .ckpt folder instead of trained
    for d in (out, out.with_name(out.name + ".ckpt")):
        shutil.rmtree(d, ignore_errors=True)
    cache = WORK / "tokens" / f"{table.stem}-{cfg.max_length}"
    if not (cache / "cache.json").is_file():
        build_token_cache(table, backbone_dir, cfg.max_length, cache)
    start = time.perf_counter()
    summary = train(cache, table, backbone_dir, out, cfg, extra_record={"cell": {"bench": "fidelity_effects", "run": name}},
                    **({"select_table": dev, "select_is_test": False} if dev is not None else {}))
    summary = {**summary, "wall_seconds": round(time.perf_counter() - start, 1)}
    return out, {"train": params, "summary": summary}


def logged_losses(model_dir: Path) -> dict[int, float]:
    lines = [json.loads(x) for x in (model_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {x["step"]: x["loss"] for x in lines if "loss" in x}


class Scorer:
    """run_sts_evaluation on the prepared test tables under one cap; each call writes WORK/eval/<name>.json."""

    def __init__(self, tables: dict, max_pairs: int | None, uncapped: list[str]):
        from aoe.data.sts import STS_DATASETS

        self.tables = [str(tables[(d, "test")][0]) for d in STS_DATASETS]
        self.manifests = [str(tables[(d, "test")][1]) for d in STS_DATASETS]
        self.max_pairs, self.uncapped = max_pairs, uncapped

    def __call__(self, model_dir: Path, name: str, **kw) -> dict:
        from aoe.evaluate.run import run_sts_evaluation

        out = WORK / "eval" / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        r = run_sts_evaluation(model_dir, self.tables, self.manifests, out, device="cpu", max_pairs=self.max_pairs,
                               uncapped_tasks=self.uncapped, **kw)
        return {"stsb": r["tasks"]["STSB"]["spearman"], "avg": r["avg"],
                "tasks": {t: v["spearman"] for t, v in r["tasks"].items()},
                "pairs": r["protocol"].get("subsample", {}).get("pairs"),
                "eval_seconds": round(r["wall_seconds"], 1), "sts_json": str(out.relative_to(C.REPO))}


def with_deltas(rows: list[dict]) -> list[dict]:
    """Δ of each row against its part's reference row (the first), x100 Spearman points."""
    ref = rows[0]
    for r in rows:
        r["delta_stsb"] = r["stsb"] - ref["stsb"]
        r["delta_avg"] = r["avg"] - ref["avg"]
    return rows


def pooling_rows(score: Scorer, model_dir: Path, part: str, model: str, pooling: str | None) -> list[dict]:
    rows = []
    for label, eval_pooling, batch in POOLING_ROWS:
        r = score(model_dir, f"part{part}-{eval_pooling or 'trained'}", pooling=pooling, eval_pooling=eval_pooling)
        rows.append({"part": part, "model": model, "setting": label, "eval_pooling": eval_pooling or "cls",
                     "senteval_batch": batch, **r})
        print(f"  part {part}: {label}: STS-B {r['stsb']:.2f}, avg {r['avg']:.2f} ({r['eval_seconds']} s)", flush=True)
    return with_deltas(rows)


# --------------------------------------------------------------------------- the parts


def part1(ctx) -> dict:
    model_dir, train_rec = train_cell(ctx["demo"], ctx["minilm"], ctx["tables"][("stsb", "train")][0], "part1-aoe-seed1")
    print(f"  part 1: trained {train_rec['summary'].get('steps')} steps in {train_rec['summary']['wall_seconds']} s", flush=True)
    return {"rows": pooling_rows(ctx["score"], model_dir, "1", "MiniLM-L6 AoE (STS-B train, 200 steps)", None),
            "training": train_rec}


def part2(ctx) -> dict:
    return {"rows": pooling_rows(ctx["score"], ctx["minilm"], "2", "MiniLM-L6 as downloaded", "cls")}


def part3(ctx, subset: int, epochs: int) -> dict:
    import pandas as pd

    from aoe.data.io import write_parquet_atomic
    from aoe.evaluate.run import run_indomain_evaluation

    train_table, _ = ctx["tables"][("stsb", "train")]
    dev_table, dev_manifest = ctx["tables"][("stsb", "dev")]
    small = WORK / "data" / "stsb" / f"train-{subset}-seed{SUBSET_SEED}.parquet"
    if not small.is_file():
        write_parquet_atomic(pd.read_parquet(train_table).sample(n=subset, random_state=SUBSET_SEED).sort_index(), small)
    # whole epochs instead of the demo's 200 steps; logging every 10 steps makes the two trajectories comparable
    common = {"max_steps": 0, "epochs": epochs, "log_every": 10}
    split = {"dataset": "stsb", "split": "dev"}
    last_dir, last_rec = train_cell(ctx["demo"], ctx["minilm"], small, "part3-last", **common)
    best_dir, best_rec = train_cell(ctx["demo"], ctx["minilm"], small, "part3-best", dev=dev_table, **common,
                                    select_checkpoint="best", select_split=split)
    selection = json.loads((best_dir / "aoe_config.json").read_text())["selection"]
    last_epoch = selection["scores"][-1]
    print(f"  part 3: dev Spearman per epoch {[round(s['spearman'], 2) for s in selection['scores']]}, "
          f"chosen epoch {selection['epoch']} (from 0)", flush=True)
    la, lb = logged_losses(last_dir), logged_losses(best_dir)
    same_steps = sorted(set(la) & set(lb))
    # the last model scored on dev again, at the training max_length, through the evaluation path
    dev_out = WORK / "eval" / "part3-last-dev.json"
    dev_last = run_indomain_evaluation(last_dir, dev_table, dev_manifest, dev_out, "stsb", max_length=best_rec["train"]["max_length"],
                                       device="cpu")["spearman"]
    rows = []
    # aoe_config.json counts epochs from 0; the table from 1
    chosen = f"{selection['epoch'] + 1}/{epochs}" if selection["epoch"] is not None else "none above 0: last"
    for label, d in (("last (grid default)", last_dir), (f"best on STS-B dev (epoch {chosen})", best_dir)):
        r = ctx["score"](d, f"part3-{d.name.removeprefix('part3-')}")
        rows.append({"part": "3", "model": f"MiniLM-L6 AoE ({subset} STS-B train pairs, {epochs} epochs)", "setting": label,
                     "eval_pooling": "cls", "senteval_batch": None, **r})
        print(f"  part 3: {label}: STS-B {r['stsb']:.2f}, avg {r['avg']:.2f}", flush=True)
    return {
        "rows": with_deltas(rows),
        "subset": {"pairs": subset, "seed": SUBSET_SEED, "of": str(train_table.relative_to(C.REPO)), "table": str(small.relative_to(C.REPO))},
        "selection": selection,
        "chosen_is_last_epoch": selection["epoch"] == last_epoch["epoch"],
        "same_trajectory": {
            "logged_steps_compared": same_steps,
            "max_abs_loss_diff": max((abs(la[s] - lb[s]) for s in same_steps), default=None),
            "last_model_dev_spearman_via_evaluation": dev_last,
            "best_run_last_epoch_dev_spearman": last_epoch["spearman"],
        },
        "training": {"last": last_rec, "best": best_rec},
    }


# (row label, the training values that differ): the grid's values before issue 51 first (the reference)
RECIPES_51 = [
    ("STS-B example (00a78ed): lr 2e-5, no warm-up, max_length 128", {"learning_rate": 2e-5, "warmup_ratio": 0.0, "warmup_steps": 0, "max_length": 128}),
    ("train_angle.py defaults (fcb6223): lr 1e-5, 100 warm-up steps, max_length 512",
     {"learning_rate": 1e-5, "warmup_ratio": 0.0, "warmup_steps": 100, "max_length": 512}),
]


def part51(ctx, steps: int) -> dict:
    import statistics

    train_table = ctx["tables"][("stsb", "train")][0]
    rows, training = [], {}
    for label, values in RECIPES_51:
        runs = []
        for seed in SEEDS_51:
            name = f"part51-{values['max_length']}-seed{seed}"
            model_dir, rec = train_cell(ctx["demo"], ctx["minilm"], train_table, name, objective="angle_arxiv", seed=seed,
                                        init=None, max_steps=steps, **values)
            r = ctx["score"](model_dir, name)
            runs.append(r)
            training[name] = rec
            print(f"  part 51: {label}, seed {seed}: STS-B {r['stsb']:.2f}, avg {r['avg']:.2f} "
                  f"({rec['summary']['wall_seconds']} s training)", flush=True)
        mean = lambda k: statistics.fmean(x[k] for x in runs)
        rows.append({"part": "51", "model": f"MiniLM-L6 AnglE (angle_arxiv, STS-B train, {steps} steps, seeds {SEEDS_51[0]}, {SEEDS_51[1]})",
                     "setting": label, "eval_pooling": "cls", "senteval_batch": None, "stsb": mean("stsb"), "avg": mean("avg"),
                     "per_seed": {str(s): {"stsb": x["stsb"], "avg": x["avg"]} for s, x in zip(SEEDS_51, runs)},
                     "stsb_std": statistics.stdev(x["stsb"] for x in runs), "values": values})
    return {"rows": with_deltas(rows), "training": training,
            "not_measured": "the start (NLI model vs BERT as downloaded) and the 20 epochs: equal steps from the backbone"}


# the demo cell's values a folder given to --part61-models must have been trained with (its aoe_config.json train)
DEMO_IDENTITY = ("objective", "pooling", "format", "learning_rate", "batch_size", "max_steps", "warmup_ratio", "warmup_steps",
                 "max_length", "init", "length_buckets", "seed")


def demo_model(ctx, path: Path, seed: int) -> tuple[Path, dict]:
    """A finished CPU demo model folder (README command 1's results/cpu-demo/models/minilm-l6/aoe/stsb/seed<s>), checked
    to be the demo's cell of ``seed`` as presets/cpu-demo.yaml resolves it, with its record (no training here)."""
    import hashlib

    from aoe.config.cell_settings import train_params

    record = json.loads((path / "aoe_config.json").read_text())
    want = train_params(ctx["demo"], MINILM, "aoe", "stsb", seed)
    differ = {k: (record["train"].get(k), want.get(k)) for k in DEMO_IDENTITY if record["train"].get(k) != want.get(k)}
    if differ or record["cell"]["backbone"] != MINILM:
        raise SystemExit(f"--part61-models {path}: not the CPU demo's seed-{seed} cell ({differ or record['cell']})")
    weights = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    return path, {"model_dir": str(path), "cell": record["cell"], "train": record["train"], "summary": record["summary"],
                  "model_safetensors_sha256": weights, "trained_by": "README command 1 (snakemake --configfile presets/cpu-demo.yaml)"}


def part61(ctx, models: list[str] | None) -> dict:
    """The demo's cell per seed, scored in-domain against the float gold (the reference) and int(score): trained here,
    or the finished demo's own model folders (``models``, one per seed of SEEDS_61)."""
    import statistics

    from aoe.evaluate.run import GOLDS, run_indomain_evaluation

    test_table, test_manifest = ctx["tables"][("stsb", "test")]
    # the finished demo's folders name their seeds (one, or both of SEEDS_61); else both are trained here
    seeds = [int(json.loads((Path(m) / "aoe_config.json").read_text())["cell"]["seed"]) for m in models] if models else list(SEEDS_61)
    if set(seeds) - set(SEEDS_61) or len(set(seeds)) != len(seeds):
        raise SystemExit(f"--part61-models: the demo's seeds {SEEDS_61}, each once; got {seeds}")
    per_seed, training, agreement = {}, {}, None
    for i, seed in enumerate(seeds):
        name = f"part61-aoe-seed{seed}"
        if models:
            model_dir, rec = demo_model(ctx, Path(models[i]).resolve(), seed)
            rec["summary"] = {**rec["summary"], "wall_seconds": rec["summary"].get("train_seconds")}
        else:
            model_dir, rec = train_cell(ctx["demo"], ctx["minilm"], ctx["tables"][("stsb", "train")][0], name, seed=seed)
        training[name] = rec
        r = run_indomain_evaluation(model_dir, test_table, test_manifest, WORK / "eval" / f"{name}-indomain.json", "stsb", device="cpu")
        per_seed[seed] = {g: r["by_gold"][g]["spearman"] for g in GOLDS}
        agreement = r["gold_int_vs_float_spearman"]
        print(f"  part 61: seed {seed}: STS-B test float gold {per_seed[seed]['float']:.2f}, int gold {per_seed[seed]['int']:.2f} "
              f"({rec['summary']['wall_seconds']} s training)", flush=True)
    rows = []
    for gold in GOLDS:  # float first: the reference
        values = [per_seed[s][gold] for s in seeds]
        rows.append({"part": "61", "model": f"MiniLM-L6 AoE (the CPU demo's cell, seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})",
                     "setting": f"in-domain STS-B test, {gold} gold", "gold": gold, "eval_pooling": "cls", "senteval_batch": None,
                     "stsb": statistics.fmean(values), "avg": statistics.fmean(values),
                     "stsb_std": statistics.stdev(values) if len(values) > 1 else None,
                     "per_seed": {str(s): per_seed[s][gold] for s in seeds}})
    rows = with_deltas(rows)
    return {"rows": rows, "training": training, "gold_int_vs_float_spearman": agreement, "seeds": seeds,
            "per_seed_delta": {str(s): per_seed[s]["int"] - per_seed[s]["float"] for s in seeds},
            "note": "stsb and avg are the same number here: the in-domain score of STS-B test, no 7-task average"}


def part6(ctx) -> dict:
    from aoe.config.pretrained import pretrained_embedding
    from aoe.config.cell_settings import evaluation_text

    gemma, fetched = backbone(GEMMA, ctx["llm"])
    pooling, prompt = pretrained_embedding(ctx["llm"], GEMMA)
    rows = []
    for mode in EVAL_TEXTS:
        r = ctx["llm_score"](gemma, f"part6-{mode}", pooling=pooling, prompt=prompt, eval_text=mode)
        rows.append({"part": "6", "model": "Gemma 3 270M as downloaded (prompt, last token)", "setting": f"eval_text {mode}",
                     "eval_pooling": pooling, "eval_text": mode, "senteval_batch": None, **r})
        print(f"  part 6: eval_text {mode}: STS-B {r['stsb']:.2f}, avg {r['avg']:.2f} ({r['eval_seconds']} s)", flush=True)
    return {"rows": with_deltas(rows), "prompt": prompt, "pooling": pooling,
            "grid_eval_text": evaluation_text(ctx["llm"], GEMMA, "pretrained", "none"), "backbone": fetched}


def part7(ctx, steps: int) -> dict:
    from aoe.evaluate.run import run_indomain_evaluation

    test_table, test_manifest = ctx["tables"][("stsb", "test")]
    rows, training = [], {}
    for label, pooling, buckets in (("avg (masked)", "avg", None), ("avg_padded (0.1.1, length_buckets 1)", "avg_padded", 1)):
        overrides = {"pooling": pooling, "max_steps": steps, **({"length_buckets": buckets} if buckets else {})}
        model_dir, rec = train_cell(ctx["demo"], ctx["minilm"], ctx["tables"][("stsb", "train")][0], f"part7-{pooling}", **overrides)
        training[pooling] = rec
        print(f"  part 7: {label}: trained {rec['summary'].get('steps')} steps in {rec['summary']['wall_seconds']} s", flush=True)
        indomain = run_indomain_evaluation(model_dir, test_table, test_manifest, WORK / "eval" / f"part7-{pooling}-indomain.json", "stsb",
                                           max_length=rec["train"]["max_length"], device="cpu")
        r = ctx["score"](model_dir, f"part7-{pooling}")
        rows.append({"part": "7", "model": f"MiniLM-L6 AoE (STS-B train, {steps} steps)", "setting": f"trained and scored {label}",
                     "eval_pooling": pooling, "senteval_batch": None, "indomain_stsb_test": indomain["spearman"],
                     "indomain_protocol": indomain["protocol"], **r})
        print(f"  part 7: {label}: in-domain STS-B test {indomain['spearman']:.2f}; STS-B {r['stsb']:.2f}, avg {r['avg']:.2f}", flush=True)
    rows = with_deltas(rows)
    for r in rows:
        r["delta_indomain_stsb_test"] = r["indomain_stsb_test"] - rows[0]["indomain_stsb_test"]
    return {"rows": rows, "training": training}


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="1,2,3,6,7", help="comma-separated subset of 1,2,3,6,7,51,61 (51, 61: each its own --out)")
    ap.add_argument("--indomain-steps", type=int, default=300, help="part 51: steps of each training")
    ap.add_argument("--max-pairs", type=int, default=300, help="MiniLM: pairs per task but STS-B (0: every pair)")
    ap.add_argument("--llm-max-pairs", type=int, default=120, help="Gemma: pairs per task, STS-B included")
    ap.add_argument("--select-subset", type=int, default=500, help="part 3: STS-B train pairs")
    ap.add_argument("--select-epochs", type=int, default=8, help="part 3: epochs")
    ap.add_argument("--part7-steps", type=int, default=200, help="part 7: training steps of each cell (the CPU demo's 200)")
    ap.add_argument("--part61-models", nargs="*", default=None,
                    help="part 61: the finished CPU demo's model folders (results/cpu-demo/models/minilm-l6/aoe/stsb/seed1 [seed2]), "
                         "checked against the demo's recipe, instead of training seeds 1 and 2 again")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mirror", default=C.default_mirror())
    ap.add_argument("--out", default=None, help=f"JSON path (default {RESULT.relative_to(C.REPO)})")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or set(parts) - set(PARTS):
        raise SystemExit(f"--parts: a comma-separated subset of {','.join(PARTS)}, got {args.parts!r}")

    import torch

    from aoe.plan.check import load_config
    from aoe.util.provenance import library_versions

    torch.set_num_threads(args.threads)
    start, load_before = time.perf_counter(), C.load()
    seconds = {}
    began = time.perf_counter()
    tables = prepare_tables(args.mirror)
    demo = load_config(C.REPO, [C.REPO / "presets" / "cpu-demo.yaml"])
    llm = load_config(C.REPO, [C.REPO / "presets" / "llm-cpu.yaml"])
    minilm, minilm_fetched = backbone(MINILM, demo) if set(parts) & {"1", "2", "3", "7", "51", "61"} else (None, None)
    seconds["setup"] = round(time.perf_counter() - began, 1)
    ctx = {"tables": tables, "demo": demo, "llm": llm, "minilm": minilm,
           "score": Scorer(tables, args.max_pairs or None, ["STSB"]),
           "llm_score": Scorer(tables, args.llm_max_pairs or None, [])}
    results = {}
    for p in parts:
        print(f"part {p} ...", flush=True)
        began, part_load = time.perf_counter(), C.load()
        results[p] = {"1": lambda: part1(ctx), "2": lambda: part2(ctx),
                      "3": lambda: part3(ctx, args.select_subset, args.select_epochs), "6": lambda: part6(ctx),
                      "7": lambda: part7(ctx, args.part7_steps), "51": lambda: part51(ctx, args.indomain_steps),
                      "61": lambda: part61(ctx, args.part61_models)}[p]()
        seconds[f"part{p}"] = round(time.perf_counter() - began, 1)
        # another process on the 2 cores slows an evaluation several-fold (threads oversubscribed): the load says if one ran
        results[p]["load_before_after"] = [part_load, C.load()]
        print(f"part {p}: {seconds[f'part{p}']} s", flush=True)
    seconds["total"] = round(time.perf_counter() - start, 1)

    versions = library_versions()
    record = {
        "command": "python bench/studies/fidelity_effects.py " + " ".join(sys.argv[1:]),
        "parts": parts,
        "caps": {"minilm_max_pairs_per_task": args.max_pairs or None, "minilm_uncapped_tasks": ["STSB"],
                 "gemma_max_pairs_per_task": args.llm_max_pairs or None, "gemma_uncapped_tasks": [],
                 "cap_seed": __import__("aoe.evaluate.sts", fromlist=["CAP_SEED"]).CAP_SEED},
        "seeds": {"train": SEED, "part3_subset": SUBSET_SEED},
        "presets": {"minilm": "presets/cpu-demo.yaml", "gemma": "presets/llm-cpu.yaml"},
        "metric": "Spearman x100 of cosine vs gold, SentEval 'all' setting; avg over the 7 tasks; delta vs the part's first row",
        "backbones": {"minilm-l6": minilm_fetched},
        "results": results,
        "seconds": seconds,
        "versions": {k: versions.get(k) for k in ("torch", "transformers", "python", "git_commit")},
        "library_versions": versions,
        "cpu_model": cpu_model(),
        "torch_threads": torch.get_num_threads(),
        "load_before": load_before, "load_after": C.load(),
    }
    path = C.write_json("fidelity_effects", record, args.out or str(RESULT))

    rows = [[r["part"], r["model"], r["setting"], "" if r["senteval_batch"] is None else str(r["senteval_batch"]),
             f"{r['stsb']:.2f}", f"{r['avg']:.2f}", f"{r['delta_stsb']:+.2f}", f"{r['delta_avg']:+.2f}"]
            for p in parts for r in results[p]["rows"]]
    C.print_table(f"Fidelity effects (Spearman x100; MiniLM: {args.max_pairs or 'all'} pairs/task, STS-B all 1,379; "
                  f"Gemma: {args.llm_max_pairs or 'all'} pairs/task; delta vs each part's first row)",
                  ["part", "model", "pooling / eval text", "batch", "STS-B", "7-task avg", "Δ STS-B", "Δ avg"], rows)
    if "3" in results:
        r3 = results["3"]
        sel, same = r3["selection"], r3["same_trajectory"]
        print(f"  part 3: dev Spearman per epoch {[round(s['spearman'], 2) for s in sel['scores']]}; chosen epoch {sel['epoch']} (from 0)"
              f"{' (the last: best and last are the same weights)' if r3['chosen_is_last_epoch'] else ''}; "
              f"logged losses last vs best run: max |diff| {same['max_abs_loss_diff']} over {len(same['logged_steps_compared'])} steps; "
              f"last model's dev Spearman {same['last_model_dev_spearman_via_evaluation']:.2f} vs the best run's last epoch "
              f"{same['best_run_last_epoch_dev_spearman']:.2f}")
    print(f"  wall seconds: {seconds}; CPU {record['cpu_model']}, torch {versions.get('torch')}, "
          f"transformers {versions.get('transformers')}, {record['torch_threads']} threads")
    print(f"wrote {path} (load average {load_before} before, {record['load_after']} after)")


if __name__ == "__main__":
    main()
