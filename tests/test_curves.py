"""Training curves: TensorBoard event files beside each model's metrics.jsonl (aoe.training.train, accelerate's
tracker) and the per-table training_curves figure (aoe.results.figures.curves, rules/figures.smk).

The event files are read back with tensorboard's own reader (EventAccumulator): every tag and step
must be metrics.jsonl's, once, through a finished run, a killed and resumed one, and a model laid out
again from its checkpoint folder's final copy. The figure is checked on synthetic metrics (its JSON
holds exactly the numbers it was given) and planned for the CI preset by a Snakemake dry run.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from aoe.config.hparams import YAML_LOADER
import aoe.training.train
from aoe.config.errors import ConfigError
from aoe.model.tokens import build_token_cache
from aoe.training.checkpoints import FINAL, checkpoint_dir
from aoe.training.curves import CURVES_DIR, curve_scalars
from aoe.training.train import TrainConfig, train
from tests.train_utils import random_pairs_table
from tests.workflow_utils import REPO, copy_workflow, dry_run_jobs, job_counts, snakemake

STEPS_PER_EPOCH = 5  # 40 pairs at batch 8


@pytest.fixture(scope="module")
def data(tiny_bert, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("curves_data")
    table = random_pairs_table(root / "train.parquet", 0, 8 * STEPS_PER_EPOCH)
    build_token_cache(table, tiny_bert, 16, root / "cache")
    return {"backbone": tiny_bert, "table": table, "cache": root / "cache", "dev": random_pairs_table(root / "dev.parquet", 1, 30)}


def _train(data, out: Path, select: bool = True, **kw) -> dict:
    base = dict(objective="aoe", pooling="cls", seed=0, learning_rate=1e-3, batch_size=8, epochs=2, log_every=1,
                max_length=16, score_range=(0.0, 5.0))
    if select:
        base.update(select_checkpoint="best", select_split={"dataset": "stsb", "split": "dev"})
    cfg = TrainConfig(**{**base, **kw})
    return train(data["cache"], data["table"], data["backbone"], out, cfg, extra_record={"cell": {"seed": 0}},
                 select_table=data["dev"] if select else None)


def _metrics(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]


def _events(folder: Path) -> dict[str, list]:
    """tag -> the scalar events tensorboard's own reader finds under ``folder`` (step order as written)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}


def _expected(metrics: list[dict]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list] = {}
    for record in metrics:
        for tag, value in curve_scalars(record).items():
            out.setdefault(tag, []).append((record["step"], value))
    return out


def _assert_mirrors(folder: Path, metrics: list[dict]) -> dict[str, list]:
    """Every tag and step of the event files is metrics.jsonl's (values to float32), each once."""
    events, expected = _events(folder), _expected(metrics)
    assert sorted(events) == sorted(expected)
    for tag, points in expected.items():
        got = [(e.step, e.value) for e in events[tag]]
        assert [s for s, _ in got] == [s for s, _ in points], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6, abs=1e-12), tag
    return events


# ---- the event files of a run --------------------------------------------------------------------


def test_event_files_hold_the_metrics_lines_tags_and_steps(data, tmp_path):
    out = tmp_path / "seed0"
    _train(data, out)
    metrics = _metrics(out)
    train_lines = [m for m in metrics if "select_split" not in m]
    assert [m["step"] for m in train_lines] == list(range(1, 2 * STEPS_PER_EPOCH + 1))
    # the gradient norm before clipping (max_grad_norm 1.0 by default): at every logged step
    assert all(m["grad_norm"] > 0 and math.isfinite(m["grad_norm"]) for m in train_lines)
    events = _assert_mirrors(out / CURVES_DIR, metrics)
    assert {"loss/total", "loss/angle", "loss/contrastive", "train/lr", "train/grad_norm", "train/pairs_per_s",
            "train/epoch", "select/spearman", "select/seconds"} == set(events)
    # one score per epoch end, at its step
    assert [e.step for e in events["select/spearman"]] == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]
    assert len(list((out / CURVES_DIR).glob("events.out.tfevents.*"))) == 1
    # the checkpoint folder keeps the finished model only; its final copy has no event files (TensorBoard
    # would show each run twice under --logdir results/models)
    root = checkpoint_dir(out)
    assert [p.name for p in root.iterdir()] == [FINAL]
    assert not (root / FINAL / CURVES_DIR).exists()


def test_a_line_holds_the_mean_loss_of_the_steps_since_the_last(data, tmp_path):
    """Each metrics line's loss and parts are means over its interval (issue 54: the demo's curve showed one
    batch's loss every 50 steps); logging changes no weight, so the same run logged every step gives the terms."""
    every = [m for m in _metrics_of(_train(data, tmp_path / "one", select=False), tmp_path / "one")]
    _train(data, tmp_path / "three", select=False, log_every=3)
    three = _metrics(tmp_path / "three")
    assert [m["step"] for m in three] == [3, 6, 9, 10] and [m["steps_averaged"] for m in three] == [3, 3, 3, 1]
    for line in three:
        terms = [m for m in every if line["step"] - line["steps_averaged"] < m["step"] <= line["step"]]
        for key in ("loss", "angle", "contrastive"):
            assert line[key] == pytest.approx(np.mean([m[key] for m in terms]), rel=1e-6), (line["step"], key)
    assert "steps_averaged" not in curve_scalars(three[0]) and "loss/steps_averaged" not in curve_scalars(three[0])


def _metrics_of(summary: dict, out: Path) -> list[dict]:
    assert summary["steps"] == 2 * STEPS_PER_EPOCH
    return _metrics(out)


def test_the_logged_gradient_norm_is_the_pre_clip_total_norm(cpu_accelerator):
    accelerator = cpu_accelerator
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    grads = [torch.randn_like(p) * 3 for p in module.parameters()]
    for p, g in zip(module.parameters(), grads):
        p.grad = g.clone()
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    assert aoe.training.train._gradient_norm(accelerator, module).item() == pytest.approx(total.item(), rel=1e-6)
    assert all(torch.equal(p.grad, g) for p, g in zip(module.parameters(), grads))  # measured, not clipped
    norm = aoe.training.train._clip_gradients(accelerator, module, 1.0)
    assert norm.item() == pytest.approx(total.item(), rel=1e-6) and total.item() > 1.0
    clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in module.parameters()]))
    assert clipped.item() == pytest.approx(1.0, rel=1e-5)


def test_without_clipping_the_norm_is_measured_at_logged_steps_only(data, tmp_path, monkeypatch):
    measured = []
    real = aoe.training.train._gradient_norm
    monkeypatch.setattr(aoe.training.train, "_gradient_norm", lambda a, m: measured.append(1) or real(a, m))
    out = tmp_path / "seed0"
    _train(data, out, select=False, max_grad_norm=0.0, max_steps=6, log_every=3)
    lines = _metrics(out)
    assert [m["step"] for m in lines] == [3, 6] and all(m["grad_norm"] > 0 for m in lines)
    assert len(measured) == 2
    _assert_mirrors(out / CURVES_DIR, lines)


# ---- resume and restore --------------------------------------------------------------------------


def test_a_resumed_run_continues_its_curves_without_repeating_steps(data, tmp_path, monkeypatch):
    """Killed at step 5, after logging it, with the newest checkpoint at step 3: the resumed run trains steps
    4-6 again; the curves hold steps 1-6 once each, 1-3 at the wall-clock times the killed job logged them."""
    out = tmp_path / "seed0"
    real = aoe.training.train._check_weights

    def die_at_5(run, state):
        real(run, state)
        if state["step"] == 5:
            raise KeyboardInterrupt("preempted")

    with monkeypatch.context() as m:
        m.setattr(aoe.training.train, "_check_weights", die_at_5)
        with pytest.raises(KeyboardInterrupt):
            _train(data, out, select=False, max_steps=6, checkpoint_every=3)
    assert not out.exists()
    live = checkpoint_dir(out) / CURVES_DIR  # the killed job's curves, while it ran
    killed = _events(live)
    assert [e.step for e in killed["loss/total"]] == [1, 2, 3, 4, 5]
    _train(data, out, select=False, max_steps=6, checkpoint_every=3)
    metrics = _metrics(out)
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    events = _assert_mirrors(out / CURVES_DIR, metrics)
    assert not live.exists()
    kept = {e.step: e.wall_time for e in killed["loss/total"]}
    resumed = {e.step: e.wall_time for e in events["loss/total"]}
    assert [resumed[s] for s in (1, 2, 3)] == pytest.approx([kept[s] for s in (1, 2, 3)], abs=1e-3)
    assert min(resumed[s] for s in (4, 5, 6)) > kept[5]  # trained again after the kill: logged anew
    assert json.loads((out / "aoe_config.json").read_text())["summary"]["resumed_from_step"] == 3


def test_a_model_laid_out_again_from_final_gets_its_curves_back(data, tmp_path, monkeypatch):
    out = tmp_path / "seed0"
    _train(data, out)
    before = _events(out / CURVES_DIR)
    shutil.rmtree(out)  # Snakemake removes the output of a job that did not end cleanly
    monkeypatch.setattr(aoe.training.train, "_build", lambda *a, **k: pytest.fail("restoring must not train"))
    summary = _train(data, out)
    assert "restored_from" in summary
    after = _assert_mirrors(out / CURVES_DIR, _metrics(out))
    assert {t: [(e.step, e.value) for e in v] for t, v in after.items()} == {t: [(e.step, e.value) for e in v] for t, v in before.items()}
    assert not (checkpoint_dir(out) / FINAL / CURVES_DIR).exists()


# ---- the figure ----------------------------------------------------------------------------------


def _fake_model(folder: Path, seed: int, steps: int, select: bool) -> Path:
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(10, steps + 1, 10):
        lines.append({"step": s, "epoch": s // 50, "loss": float(3 * math.exp(-s / 80) + rng.uniform(0, 0.1)),
                      "angle": 1.0, "contrastive": 2.0, "lr": 1e-5, "grad_norm": 2.5, "pairs_per_s": 100.0})
        if select and s % 50 == 0:
            lines.append({"step": s, "epoch": s // 50 - 1, "select_split": "stsb/dev", "select_spearman": 70 + s / 10 + seed,
                          "select_best": True, "select_seconds": 0.5})
    if select:  # an undefined score (constant similarities) is not a point
        lines.append({"step": steps, "epoch": 9, "select_split": "stsb/dev", "select_spearman": None, "select_best": False, "select_seconds": 0.5})
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


@pytest.mark.slow
def test_the_figure_plots_exactly_the_metrics_it_reads(tmp_path):
    from aoe.results.figures.curves import curves_summary, plot_training_curves

    panels = []
    for k, (objective, select) in enumerate([("aoe", True), ("cosent", False), ("sbert", False), ("simcse_sup", False), ("angle", True)]):
        runs = [{"seed": seed, "rerun": 0, "run": str(seed),
                 "model": str(_fake_model(tmp_path / f"models/{objective}/seed{seed}", seed + k, 200, select))} for seed in (1, 2)]
        panels.append({"backbone": "minilm-l6", "objective": objective, "trainset": "stsb", "runs": runs})
    panels[0]["runs"].append({"seed": 1, "rerun": 1, "run": "1-rerun1", "model": str(_fake_model(tmp_path / "models/aoe/seed1-rerun1", 9, 100, True))})
    summary = curves_summary("table_x", panels, {"backbones": {"minilm-l6": {"hf_id": "sentence-transformers/all-MiniLM-L6-v2"}}})
    pdf, png, out_json = tmp_path / "fig" / "table_x.pdf", tmp_path / "fig" / "table_x.png", tmp_path / "fig" / "table_x.json"
    written = plot_training_curves(summary, pdf, png)
    out_json.write_text(json.dumps(summary))
    assert written == [pdf, png] and pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-"
    saved = json.loads(out_json.read_text())
    assert [p["objective"] for p in saved["panels"]] == ["aoe", "cosent", "sbert", "simcse_sup", "angle"]
    assert saved["panels"][0]["title"] == "all-MiniLM-L6-v2 + AoE, STS-B train"
    for panel in saved["panels"]:
        for run in panel["runs"]:
            lines = _metrics(Path(run["model"]))
            train_lines = [x for x in lines if "select_split" not in x]
            assert run["loss"] == {"step": [x["step"] for x in train_lines], "value": [x["loss"] for x in train_lines]}
            scored = [x for x in lines if x.get("select_spearman") is not None]
            if panel["objective"] in ("aoe", "angle"):
                assert run["select_spearman"] == {"step": [x["step"] for x in scored], "value": [x["select_spearman"] for x in scored]}
                assert run["select_split"] == "stsb/dev" and len(scored) == len([x for x in lines if "select_split" in x]) - 1
            else:
                assert "select_spearman" not in run
    # the same numbers draw the same bytes (no dates in the files)
    again = tmp_path / "again.png"
    plot_training_curves(summary, tmp_path / "again.pdf", again)
    assert again.read_bytes() == png.read_bytes()


def test_a_model_folder_without_metrics_is_named(tmp_path):
    from aoe.results.figures.curves import curves_summary

    (tmp_path / "m").mkdir()
    panels = [{"backbone": "b", "objective": "aoe", "trainset": "stsb", "title": "t", "runs": [{"seed": 1, "rerun": 0, "run": "1", "model": str(tmp_path / "m")}]}]
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        curves_summary("t", panels)


# ---- planning ------------------------------------------------------------------------------------


def _config(*presets: str, **figures) -> dict:
    from snakemake.utils import update_config, validate

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    for preset in presets:
        update_config(config, yaml.load((REPO / "presets" / preset).read_text(), Loader=YAML_LOADER))
    update_config(config, {"figures": {"training_curves": figures}} if figures else {})
    validate(config, str(REPO / "schemas" / "config.schema.yaml"))
    return config


def test_the_figure_per_table_with_trained_models():
    from aoe.results.figures.curves import curve_inputs, curve_panels, curve_results, curve_tables

    ci = _config("ci.yaml")
    assert curve_tables(ci) == ["table1_sts"]
    assert curve_results(ci) == [f"results/ci/figures/training_curves/table1_sts.{e}" for e in ("pdf", "png", "json")]
    # its rows: MiniLM-L6 as downloaded (no curves), AoE, and AoE under another evaluation pooling (the same model)
    assert curve_panels(ci, "table1_sts") == [{"backbone": "minilm-l6", "objective": "aoe", "trainset": "stsb", "runs": [
        {"seed": 1, "rerun": 0, "run": "1", "model": "results/ci/models/minilm-l6/aoe/stsb/seed1"}]}]
    # every built table with a trained model: the released-checkpoint and GIS tables have none
    every = curve_tables(_config("ci.yaml", tables=None))
    assert len(every) == 9 and "table_mteb" in every and "released" not in every
    demo = _config("cpu-demo.yaml")
    assert curve_tables(demo) == ["table1_sts", "table2_indomain"]
    assert curve_inputs(demo, "table2_indomain") == [f"results/cpu-demo/models/minilm-l6/aoe/stsb/seed{s}" for s in (1, 2)]
    grid = _config()
    assert "released" not in curve_tables(grid) and "table_gis_stats" not in curve_tables(grid)
    # AoE Table 4's seed rows (the arXiv-era AnglE-BERT cell): seed 42's five reruns and seeds 43-46 in one panel
    angle_panel = next(p for p in curve_panels(grid, "table4_ablation") if p["objective"] == "angle_arxiv")
    assert [r["run"] for r in angle_panel["runs"]] == ["42", "42-rerun1", "42-rerun2", "42-rerun3", "42-rerun4", "43", "44", "45", "46"]
    aoe_panel = next(p for p in curve_panels(grid, "table4_ablation") if p["objective"] == "aoe")
    assert [r["run"] for r in aoe_panel["runs"]] == ["42", "43", "44", "45", "46"]
    # build.figures without training_curves: none (the embedding figures on or off)
    off = copy.deepcopy(ci)
    off["build"]["figures"] = ["fig3", "fig4"]
    assert curve_tables(off) == []
    off["build"]["figures"] = []
    assert curve_tables(off) == []
    # a table defined but not built (build.tables) gets none, named in figures.training_curves.tables or not
    off = _config("ci.yaml", tables=["table1_sts", "table2_indomain"])
    off["build"]["tables"] = ["table2_indomain"]
    assert curve_tables(off) == ["table2_indomain"]
    with pytest.raises(ConfigError, match=r"figures.training_curves.tables: unknown table\(s\) \['table9'\]"):
        curve_tables(_config("ci.yaml", tables=["table1_sts", "table9"]))


def test_planning_the_curves_imports_neither_torch_nor_matplotlib():
    code = (
        "import sys, yaml; from aoe.results.figures.curves import curve_results, curve_panels, curve_tables; "
        "c = yaml.safe_load(open('config.yaml')); r = curve_results(c); [curve_panels(c, t) for t in curve_tables(c)]; "
        "print(len(r), 'torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    n, torch_loaded, mpl_loaded = out.stdout.split()
    assert int(n) > 0 and n.isdigit() and int(n) % 3 == 0 and torch_loaded == "False" and mpl_loaded == "False"


@pytest.mark.slow
def test_the_ci_preset_plans_the_curves_in_its_default_target(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "-n", "--configfile", "presets/ci.yaml", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    assert job_counts(out.stdout)["training_curves"] == 1
    job = next(j for j in dry_run_jobs(out.stdout) if j["rule"] == "training_curves")
    assert job["wildcards"] == {"table": "table1_sts"}
    assert job["input"][0] == "results/ci/models/minilm-l6/aoe/stsb/seed1"
    assert "aoe/results/figures/curves.py" in " ".join(job["input"])
    assert "results/ci/figures/training_curves/table1_sts.png" in out.stdout
