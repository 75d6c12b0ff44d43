"""The resolver's precedence and provenance, the sources of every value, and the recipe ledger."""

from __future__ import annotations

import copy

import pytest
import yaml

from aoe.config.hparams import LOSS_LAYERS, TRAIN_LAYERS, YAML_LOADER, key_comments, recipe_anchor, resolve_cell
from aoe.config.recipes import OBJECTIVES
from aoe.config.cell_settings import train_params
from aoe.plan.check import load_config
from aoe.plan.ledger import DEVIATES, build_recipe, changes_markdown, reading_presets, readings, readings_markdown, recipe_changes, recipe_json, recipe_markdown
from aoe.training.train import TrainConfig
from tests.workflow_utils import REPO

PRESETS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "presets").glob("*.yaml"))


@pytest.fixture(scope="module")
def grid():
    return load_config(REPO, [])


def _settings(recipe):
    return {s.key: s for s in recipe.settings}


def test_a_frozen_block_resolves_each_cell_once_and_forgets_it_after(grid, monkeypatch):
    """aoe.config.hparams.frozen_while: the checks, a table's rows and the ledger resolve a cell once while they run; an
    edit after the block is seen (no stale recipe); a config frozen for planning stays frozen."""
    from aoe.config import hparams

    config, resolved = copy.deepcopy(grid), []
    real = hparams._resolve_cell
    monkeypatch.setattr(hparams, "_resolve_cell", lambda c, *cell: resolved.append(cell) or real(c, *cell))
    cell = ("bert-base-uncased", "aoe", "nli", 42)
    with hparams.frozen_while(config):
        first = resolve_cell(config, *cell)
        first.params["learning_rate"] = 1.0  # a caller's edit of what it got stays its own
        assert resolve_cell(config, *cell).params["learning_rate"] == 5e-5
    assert resolved == [cell]
    config["trainsets"]["nli"]["train"]["learning_rate"] = 7e-5
    assert resolve_cell(config, *cell).params["learning_rate"] == 7e-5 and len(resolved) == 2
    hparams.freeze_for_planning(config)
    try:
        with hparams.frozen_while(config):
            resolve_cell(config, *cell)
        resolve_cell(config, *cell)
        assert len(resolved) == 3  # resolved once after the edit, then kept by planning's freeze
    finally:
        hparams._FROZEN.pop(id(config), None)


def test_each_layer_wins_over_the_ones_below(grid):
    config = copy.deepcopy(grid)
    config["objectives"]["aoe_pool_max"]["angle_tau"] = 5.0
    config["trainsets"]["nli"]["train"]["warmup_steps"] = 7
    config["backbones"]["bert-base-uncased"]["train_overrides"] = {"warmup_steps": 9, "length_buckets": 8}
    config["trainsets"]["nli"]["objective_settings"]["all"] = {"contrastive_tau": 10.0, "angle_tau": 3.0, "weights": {"angle": 9.0}}
    s = _settings(resolve_cell(config, "bert-base-uncased", "aoe_pool_max", "nli", 43))
    assert (s["warmup_steps"].value, s["warmup_steps"].set_by) == (9, "backbones.bert-base-uncased.train_overrides.warmup_steps")
    assert (s["learning_rate"].value, s["learning_rate"].set_by) == (5e-5, "trainsets.nli.train.learning_rate")
    assert s["weight_decay"].set_by == "code:aoe.config.hparams.TrainSettings.weight_decay"
    # the train set's settings for every objective sit above the variant's own entry
    assert (s["loss.angle_tau"].value, s["loss.angle_tau"].set_by) == (3.0, "trainsets.nli.objective_settings.all.angle_tau")
    assert s["loss.weights"].value == {"angle": 1.0, "contrastive": 30.0}
    assert s["loss.weights"].set_by == "trainsets.nli.objective_settings.aoe.weights"
    assert (s["objective"].value, s["objective"].set_by) == ("aoe", "objectives.aoe_pool_max.base")
    assert (s["pooling"].value, s["pooling"].set_by) == ("max_zeroed", "objectives.aoe_pool_max.pooling")
    # the variant's own length_buckets wins over every train layer: its padded pooling needs one pass
    assert (s["length_buckets"].value, s["length_buckets"].set_by) == (1, "objectives.aoe_pool_max.length_buckets")
    assert (s["seed"].value, s["seed"].set_by) == (43, "cell")
    # a backbone's recipe on the train set is the top loss layer
    s = _settings(resolve_cell(grid, "llama-2-7b", "aoe", "nli", 42))
    assert s["loss.weights"].value == {"cosine": 1.0, "contrastive": 35.0, "angle": 1.0}
    assert s["loss.weights"].set_by == "backbones.llama-2-7b.objective_settings.nli.aoe.weights"
    assert (s["loss.angle_tau"].value, s["loss.identical_texts"].value) == (1.0, "positive")
    assert (s["in_batch_pool"].value, s["gradient_accumulation_steps"].value, s["batch_size"].value) == ("process", 1, 640)
    assert s["learning_rate"].set_by == "backbones.llama-2-7b.train_overrides.learning_rate"
    assert TRAIN_LAYERS[-1][0] == "backbones" and LOSS_LAYERS[-1][0] == "backbones"
    # one objective of one backbone on one train set wins over the backbone's overrides, and over the train
    # set's entry for that objective (BERT's cls_avg_padded)
    config = copy.deepcopy(grid)
    config["backbones"]["llama-2-7b"]["objective_train"] = {"nli": {"angle_arxiv": {"learning_rate": 3e-4, "eval_pooling": None}}}
    s = _settings(resolve_cell(config, "llama-2-7b", "angle_arxiv", "nli", 42))
    assert (s["learning_rate"].value, s["learning_rate"].set_by) == (3e-4, "backbones.llama-2-7b.objective_train.nli.angle_arxiv.learning_rate")
    assert (s["eval_pooling"].value, s["batch_size"].value, s["max_length"].value) == (None, 640, 45)
    bert = _settings(resolve_cell(grid, "bert-base-uncased", "angle_arxiv", "nli", 42))
    assert (bert["eval_pooling"].value, bert["batch_size"].value) == ("cls_avg_padded", 50)
    assert (bert["loss.weights"].value, bert["loss.weights"].set_by) == (
        {"cosine": 1.0, "contrastive": 35.0, "angle": 1.0}, "trainsets.nli.objective_settings.angle_arxiv.weights")
    # a variant inherits its base's entry there too
    config = copy.deepcopy(grid)
    config["backbones"]["bert-base-uncased"]["objective_train"] = {"nli": {"aoe": {"warmup_steps": 11}}}
    s = _settings(resolve_cell(config, "bert-base-uncased", "aoe_pool_max", "nli", 42))
    assert (s["warmup_steps"].value, s["warmup_steps"].set_by) == (11, "backbones.bert-base-uncased.objective_train.nli.aoe.warmup_steps")


def test_built_in_recipes_and_defaults_are_named(grid):
    s = _settings(resolve_cell(grid, "bert-base-uncased", "aoe", "stsb", 42))
    assert (s["loss.weights"].value, s["loss.weights"].set_by) == ({"angle": 1.0, "contrastive": 1.0}, "code:aoe.config.recipes.OBJECTIVES.aoe.weights")
    assert s["loss.angle_tau"].set_by == "code:aoe.config.recipes.LossSettings.angle_tau"
    s = _settings(resolve_cell(grid, "bert-base-uncased", "sbert", "nli", 42))
    assert s["loss.weights"].value == {"softmax": 1.0} and s["loss.weights"].set_by.endswith("by_format.nli3")
    s = _settings(resolve_cell(grid, "bert-base-uncased", "angle_only_angle", "stsb", 42))
    assert s["loss.angle_tau"].value == 1.0  # AnglE's tau, not AoE's 20


def test_params_build_the_train_config_of_every_cell(grid):
    from aoe.config.cells import run_cells

    for cell in run_cells(grid):
        if cell.trained:
            params = train_params(grid, cell.backbone, cell.objective, cell.trainset, cell.seed)
            cfg = TrainConfig(**params)
            assert cfg.objective in OBJECTIVES and cfg.seed == cell.seed


def test_config_does_not_restate_a_built_in_default(grid):
    """Each default is written once: a config objectives entry only holds what differs from the recipe."""
    raw = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    for name, entry in raw["objectives"].items():
        for key, value in entry.items():
            assert OBJECTIVES.get(name, {}).get(key) != value, f"objectives.{name}.{key} restates aoe/config/recipes.py"


def test_key_comments_reads_above_trailing_and_one_line_mappings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "a:\n"
        "  # the rate\n"
        "  # of b\n"
        "  b: 1  # and more\n"
        "  c: 'x # not a comment'\n"
        "  d: {e: 1, f: [1, 2]}  # one line\n"
        "  g: 2\n"
    )
    comments = key_comments(path)
    assert comments[("a", "b")] == "the rate of b and more"
    assert comments[("a", "c")] == ""
    assert comments[("a", "d", "e")] == comments[("a", "d")] == "one line"
    assert comments[("a", "g")] == ""


@pytest.mark.parametrize("configfiles", [[], *([p] for p in PRESETS)], ids=["paper-grid", *PRESETS])
def test_every_value_of_every_cell_cites_its_source(configfiles):
    config = load_config(REPO, configfiles)
    recipe = build_recipe(config, ["config.yaml", *configfiles])
    if not config["runs"]:  # a configuration that trains nothing (presets/evaluate-model.yaml): nothing to cite
        assert recipe["cells"] == []
        return
    assert recipe["cells"], "no trained cell"
    unsourced = sorted({(r["key"], r["set_by"]) for c in recipe["cells"] for r in c["rows"] if not r["source"]})
    assert not unsourced, f"values without a source (add a comment on the key): {unsourced[:10]}"
    md = recipe_markdown(recipe)
    for c in recipe["cells"]:
        assert f'<a id="{c["anchor"]}"></a>' in md
    assert "**no source**" not in md


def test_the_ledger_flags_departures_from_the_official_code(grid):
    recipe = build_recipe(grid, ["config.yaml"])
    cells = {c["cell"]: {r["key"]: r for r in c["rows"]} for c in recipe["cells"]}
    nli = cells["bert-base-uncased/aoe/nli/seed42"]
    # the official command's 2,048 pairs a step, negatives from one GPU's 128: the grid matches both
    assert (nli["batch_size"]["value"], nli["batch_size"]["official"]) == (2048, 2048)
    assert (nli["in_batch_pool"]["value"], nli["in_batch_pool"]["official"], nli["in_batch_pool"]["deviates"]) == (128, 128, "")
    assert nli["learning_rate"]["official"] == pytest.approx(5e-5) and nli["learning_rate"]["deviates"] == ""
    assert nli["init"]["deviates"] == ""  # google-bert/bert-base-uncased: the same weights
    assert not any(key.startswith("lora.") for key in nli)  # full fine-tuning
    for key in ("graded_labels", "contrastive_reduction", "identical_texts"):
        assert nli[key]["value"] == nli[key]["official"] and nli[key]["deviates"] == "", key
    assert nli["identical_texts"]["value"] == "filter"  # the 2024 code's collator
    llama = cells["llama-2-7b/aoe/nli/seed42"]
    # the official LLaMA command of October 2023 whole: its loss (cosine 1, ibn 35, angle 1 at tau 1.0), pool
    # (160 per GPU) and rate (2e-4; ACL's stated 1e-4 is presets/paper-llm-acl-lr.yaml)
    for key in ("weights.cosine", "weights.contrastive", "weights.angle", "angle_tau", "identical_texts", "in_batch_pool",
                "max_length", "warmup_steps", "mixed_precision", "lora.target_modules", "batch_size",
                "qlora_compute_dtype", "gradient_checkpointing", "learning_rate"):
        assert llama[key]["deviates"] == "", (key, llama[key])
    assert (llama["qlora_compute_dtype"]["value"], llama["qlora_compute_dtype"]["official"]) == ("fp32", "fp32")
    # no 4-bit layers in a full fine-tuning: not a setting of its cell, so a change reruns none of its jobs
    assert "qlora_compute_dtype" not in nli
    assert "qlora_compute_dtype" not in resolve_cell(grid, "bert-base-uncased", "aoe", "nli", 42).params
    assert llama["in_batch_pool"]["value"] == 160 and "4 GPU(s)" in llama["in_batch_pool"]["source"]
    assert llama["learning_rate"]["value"] == pytest.approx(2e-4)
    # AnglE-BERT on NLI: the in-batch weight the repository gives the runs of its time, as the ledger's official value
    angle = cells["bert-base-uncased/angle_arxiv/nli/seed42"]
    assert (angle["weights.contrastive"]["value"], angle["weights.contrastive"]["official"], angle["weights.contrastive"]["deviates"]) == (35.0, 35.0, "")
    assert "de7b750:README.md:32" in angle["weights.contrastive"]["official_source"]
    # AoE's in-domain cell: the official STS-B example's recipe, its start included: the grid's own NLI AnglE
    # model of the same seed, flagged because it is not the released checkpoint's weights
    stsb = cells["bert-base-uncased/aoe/stsb/seed45"]
    assert stsb["init"]["value"] == "results/models/bert-base-uncased/angle_arxiv/nli/seed45"
    assert stsb["init"]["set_by"] == "trainsets.stsb.train.init" and "00a78ed README.md:205" in stsb["init"]["source"]
    assert stsb["init"]["official"] == "SeanLee97/angle-bert-base-uncased-nli-en-v1" and stsb["init"]["deviates"] == DEVIATES
    for key in ("epochs", "warmup_ratio", "learning_rate", "batch_size", "max_length"):
        assert stsb[key]["deviates"] == "", (key, stsb[key])
    # AnglE's (arXiv) in-domain cells: fcb6223 train_angle.py's defaults, whole, from BERT as downloaded
    for trainset in ("stsb", "mrpc", "qqp", "qnli"):
        angle = cells[f"bert-base-uncased/angle_arxiv/{trainset}/seed45"]
        assert next(c for c in recipe["cells"] if c["cell"] == f"bert-base-uncased/angle_arxiv/{trainset}/seed42")[
            "official_recipe"] == "indomain-script-bert"
        assert angle["init"]["value"] == "bert-base-uncased" and "fcb6223 train_angle.py" in angle["init"]["source"]
        for key in ("init", "epochs", "warmup_steps", "warmup_ratio", "learning_rate", "batch_size", "max_length",
                    "weights.angle", "angle_tau", "identical_texts"):
            assert angle[key]["deviates"] == "", (trainset, key, angle[key])
        assert (angle["epochs"]["value"], angle["learning_rate"]["value"], angle["max_length"]["value"]) == (20, 1e-5, 512)
    # AnglE's NLI cell: the paper's batch and length over the same script's defaults (one version, whole)
    angle_nli = cells["bert-base-uncased/angle_arxiv/nli/seed42"]
    assert (angle_nli["learning_rate"]["value"], angle_nli["epochs"]["value"], angle_nli["warmup_steps"]["value"]) == (1e-5, 20, 100)
    assert [k for k in ("learning_rate", "epochs", "warmup_steps") if angle_nli[k]["deviates"]] == []
    assert angle_nli["batch_size"]["deviates"] == DEVIATES and "angle-arxiv-b.txt l.333" in angle_nli["batch_size"]["source"]
    summary = {line.split(" | ")[0]: line for line in recipe_markdown(recipe).splitlines() if line.startswith("| [")}
    assert " | angle_arxiv/nli model | " in summary["| [bert-base-uncased/aoe/stsb/seed45](#recipe-bert-base-uncased-aoe-stsb)"]
    assert " | backbone | " in summary["| [bert-base-uncased/angle_arxiv/stsb/seed45](#recipe-bert-base-uncased-angle-arxiv-stsb)"]
    assert " | backbone | " in summary["| [bert-base-uncased/aoe/nli/seed42](#recipe-bert-base-uncased-aoe-nli)"]
    # a baseline's loss is not compared with the AnglE loss
    sbert = cells["bert-base-uncased/sbert/nli/seed42"]
    assert sbert["weights.softmax"]["official"] is None
    assert recipe_anchor("bert-base-uncased", "aoe", "nli") == "recipe-bert-base-uncased-aoe-nli"


def test_aoe_in_domain_cells_start_from_the_nli_model_angle_ones_from_bert(grid):
    from aoe.config.cells import Cell
    from aoe.config.cell_settings import init_cell

    s = _settings(resolve_cell(grid, "bert-base-uncased", "aoe", "gis", 42))
    assert s["init"].value == {"trainset": "nli", "objective": "angle_arxiv"} and s["init"].set_by == "trainsets.gis.train.init"
    assert init_cell(grid, Cell("bert-base-uncased", "aoe", "gis", 42, 3)) == Cell("bert-base-uncased", "angle_arxiv", "nli", 42, 3)
    # the baselines start from BERT as downloaded, as AnglE (arXiv) states (angle-arxiv-a.txt l.134, l.173)
    # (on MRPC, QQP and QNLI every cell does: the train set's own block, fcb6223 train_angle.py's defaults)
    for objective in ("sbert", "simcse_sup", "cosent"):
        for trainset in ("stsb", "gis", "mrpc", "qqp", "qnli"):
            s = _settings(resolve_cell(grid, "bert-base-uncased", objective, trainset, 42))
            key = f"trainsets.{trainset}.train.init" if trainset in ("mrpc", "qqp", "qnli") else f"trainsets.{trainset}.objective_train.{objective}.init"
            assert (s["init"].value, s["init"].set_by) == (None, key)
            assert init_cell(grid, Cell("bert-base-uncased", objective, trainset, 42)) is None
    # AoE's second reading of AoE Table 2, and AnglE's in-domain cells with their ablations: from BERT as downloaded
    for objective, trainset in (("aoe_from_bert", "stsb"), ("aoe_from_bert", "gis"), ("angle_arxiv", "stsb"), ("angle_arxiv", "gis"),
                                ("wo_angle", "stsb"), ("angle_pool_avg", "stsb"), ("angle_arxiv", "qqp")):
        assert init_cell(grid, Cell("bert-base-uncased", objective, trainset, 42)) is None, (objective, trainset)
    readme = load_config(REPO, ["presets/paper-angle-indomain-readme.yaml"])
    assert init_cell(readme, Cell("bert-base-uncased", "wo_angle", "stsb", 42)) == Cell("bert-base-uncased", "angle_arxiv", "nli", 42)
    assert init_cell(readme, Cell("bert-base-uncased", "angle_arxiv", "qqp", 42)) == Cell("bert-base-uncased", "angle_arxiv", "nli", 42)
    assert init_cell(readme, Cell("bert-base-uncased", "sbert", "qqp", 42)) is None
    # NLI training and the LLM-supervised sets start from the backbone (a code default)
    for trainset in ("nli", "stsb_llm", "stsb_self"):
        s = _settings(resolve_cell(grid, "bert-base-uncased", "aoe", trainset, 42))
        assert (s["init"].value, s["init"].set_by) == (None, "code:aoe.config.hparams.TrainSettings.init")
    # no objective: the cell's own (a two-stage run of one objective)
    config = copy.deepcopy(grid)
    config["trainsets"]["stsb"]["train"]["init"] = {"trainset": "nli"}
    assert init_cell(config, Cell("bert-base-uncased", "aoe", "stsb", 42)) == Cell("bert-base-uncased", "aoe", "nli", 42)
    # the reproduction report's in-domain recipe, the run its Table 2 numbers came from (issue 61): its own cells
    for trainset, epochs, accumulation in (("stsb", 30, 1), ("gis", 20, 8)):
        p = resolve_cell(grid, "bert-base-uncased", "aoe_from_bert", trainset, 42).params
        assert (p["batch_size"], p["epochs"], p["learning_rate"], p["warmup_steps"]) == (256, epochs, 2e-5, 100), trainset
        assert (p["gradient_accumulation_steps"], p["eval_gold"]) == (accumulation, "float")


def test_the_in_domain_gold_is_the_one_each_rows_source_scored(grid):
    """Issue 61: AnglE.evaluate (angle-emb 0.1.1-0.4.8) correlates with int(score): the cells whose numbers came from it
    (the arXiv script's, its ablations', the STS-B example's) score so; the baselines and the reproduction report's recipe
    against the gold as annotated; an evaluation setting, never given to the train job."""
    from aoe.config.cells import Cell
    from aoe.config.cell_settings import cell_eval_gold, train_params

    gold = {(o, t): cell_eval_gold(grid, Cell("bert-base-uncased", o, t, 42))
            for o, t in (("angle_arxiv", "stsb"), ("wo_ibn", "stsb"), ("angle_pool_avg", "stsb"), ("aoe", "stsb"), ("angle_arxiv", "mrpc"),
                         ("sbert", "stsb"), ("simcse_sup", "gis"), ("cosent", "stsb"), ("aoe_from_bert", "stsb"), ("aoe", "nli"))}
    assert {k for k, v in gold.items() if v == "int"} == {("angle_arxiv", "stsb"), ("wo_ibn", "stsb"), ("angle_pool_avg", "stsb"),
                                                          ("aoe", "stsb"), ("angle_arxiv", "mrpc")}
    assert set(gold.values()) == {"int", "float"}
    s = _settings(resolve_cell(grid, "bert-base-uncased", "angle_arxiv", "stsb", 42))
    assert s["eval_gold"].set_by == "trainsets.stsb.objective_train.angle_arxiv.eval_gold"
    assert "eval_gold" not in train_params(grid, "bert-base-uncased", "angle_arxiv", "stsb", 42)
    assert cell_eval_gold(grid, Cell("bert-base-uncased", "pretrained", "none", 0)) == "float"


def test_recipe_diff_names_each_changed_value_of_a_preset_against_the_grid(grid, tmp_path):
    """`aoe recipe-diff` of the grid and a preset over it: exactly the values the preset sets, with both
    sides, once per cell group; a group trained on one side only is one row."""
    import subprocess
    import sys

    readme = load_config(REPO, ["presets/paper-angle-nli-2024-command.yaml"])
    before, after = build_recipe(grid, ["config.yaml"]), build_recipe(readme, ["config.yaml", "presets/paper-angle-nli-2024-command.yaml"])
    changes = recipe_changes(before, after)
    # AnglE's NLI cell and its variants of the papers' studies (angle_tau_*, angle_batch*), which train its recipe
    angle = ("angle_arxiv", "angle_tau_0_05", "angle_tau_0_5", "angle_tau_2", "angle_batch8", "angle_batch16", "angle_batch32")
    assert {(c["section"], c["key"], c["before"], c["after"]) for c in changes} == {
        (f"bert-base-uncased / {o} / nli", key, before, after) for o in angle
        for key, before, after in (("learning_rate", 1e-5, 5e-5), ("epochs", 20, 10), ("warmup_steps", 100, 50))
    }
    # seeds 42-46 a cell; AnglE's NLI cell also seed 42's four reruns of AoE Table 4's fixed-seed row (config.yaml runs)
    assert all(c["cells"] == (9 if c["section"] == "bert-base-uncased / angle_arxiv / nli" else 5) for c in changes)
    assert "1c5515b examples/NLI/README.md:60" in changes[0]["source"] + changes[1]["source"]
    fewer = copy.deepcopy(grid)
    fewer["runs"] = [r for r in fewer["runs"] if r["trainset"] != "qqp"]
    gone = [c for c in recipe_changes(before, build_recipe(fewer, ["config.yaml"])) if c["key"] is None]
    assert {c["section"] for c in gone} == {f"bert-base-uncased / {o} / qqp" for o in ("sbert", "simcse_sup", "cosent", "angle_arxiv")}
    assert all((c["before"], c["after"]) == ("trained", None) for c in gone)
    text = changes_markdown(changes, "a", "b")
    assert "| bert-base-uncased / angle_arxiv / nli (9) | epochs | 20 | 10 |" in text
    # the command line: the same table; a file that is not a ledger names itself and who writes one
    (tmp_path / "a.json").write_text(recipe_json(before))
    (tmp_path / "b.json").write_text(recipe_json(after))
    out = subprocess.run([sys.executable, "-m", "aoe", "recipe-diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and "| bert-base-uncased / angle_arxiv / nli (9) | epochs | 20 | 10 |" in out.stdout
    (tmp_path / "c.json").write_text("{")
    bad = subprocess.run([sys.executable, "-m", "aoe", "recipe-diff", str(tmp_path / "a.json"), str(tmp_path / "c.json")],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and f"{tmp_path / 'c.json'}: not a recipe.json" in bad.stderr and "snakemake recipe" in bad.stderr


def test_the_grids_ledger_lists_each_reading_it_did_not_take(grid):
    """RECIPE.md of the paper grid ends with every overlay preset (presets/paper-*.yaml: another reading of the
    sources) and the values it would change, the grid's beside the preset's, with the preset's source; the
    workflow gives the recipe rule those presets for the grid alone."""
    presets = sorted((REPO / "presets").glob("paper-*.yaml"))
    found = {r["preset"]: r for r in readings(build_recipe(grid, ["config.yaml"]), presets, REPO)}
    assert set(found) == {f"presets/{p.name}" for p in presets} and len(found) >= 7  # the report's in-domain reading trains in the grid (issue 61)
    nli = found["presets/paper-angle-nli-2024-command.yaml"]
    assert nli["summary"].startswith("AnglE (arXiv) on NLI with the 2024 command's rate")
    # AnglE's NLI cell and the studies' variants of it (angle_tau_*, angle_batch*), which train its recipe
    angle = ("angle_arxiv", "angle_tau_0_05", "angle_tau_0_5", "angle_tau_2", "angle_batch8", "angle_batch16", "angle_batch32")
    assert {(c["section"], c["key"], c["before"], c["after"]) for c in nli["changes"]} == {
        (f"bert-base-uncased / {o} / nli", key, before, after) for o in angle
        for key, before, after in (("learning_rate", 1e-5, 5e-5), ("epochs", 20, 10), ("warmup_steps", 100, 50))}
    # every preset there changes something, else it is no reading of its own
    assert all(r["changes"] for r in found.values())
    md = readings_markdown(list(found.values()))
    assert "## Other readings of the sources" in md and "### `presets/paper-angle-indomain-readme.yaml`" in md
    assert "| bert-base-uncased / angle_arxiv / qqp (5) | epochs | 20 | 1 | our choice then: the set is 90x STS-B |" in md
    assert reading_presets(REPO, ["config.yaml"]) == [f"presets/{p.name}" for p in presets]
    assert reading_presets(REPO, ["config.yaml", "presets/cpu-demo.yaml"]) == []


def test_the_ledger_summary_says_how_long_a_cell_trains():
    """max_steps wins over epochs in the loop: the summary shows the steps and the epochs they make, not
    the ignored epochs value (the demo's 200 steps of STS-B train were shown as "epochs 5")."""
    demo = load_config(REPO, ["presets/cpu-demo.yaml"])
    recipe = build_recipe(demo, ["config.yaml", "presets/cpu-demo.yaml"])
    lengths = {c["cell"]: c["length"] for c in recipe["cells"]}
    # STS-B train: 5,749 rows, 179 batches of 32 an epoch
    assert lengths["minilm-l6/aoe/stsb/seed1"] == "200 steps (≈1.1 epochs of ≤5,749 rows)"
    assert " | 200 steps (≈1.1 epochs of ≤5,749 rows) | " in recipe_markdown(recipe)
    grid = build_recipe(load_config(REPO, []), ["config.yaml"])
    assert {c["cell"]: c["length"] for c in grid["cells"]}["bert-base-uncased/aoe/nli/seed42"] == "10 epochs"


def test_a_backbone_without_pooling_takes_the_code_default(grid):
    """Issue 40: CLS is written once, TrainSettings.pooling; config.yaml and the schema leave it out."""
    from aoe.config.hparams import TrainSettings, backbone_pooling, train_default
    from aoe.config.pretrained import pretrained_embedding

    assert "pooling" not in grid["backbones"]["bert-base-uncased"]
    assert backbone_pooling(grid, "bert-base-uncased") == ("cls", "code:aoe.config.hparams.TrainSettings.pooling")
    assert train_default("pooling") == TrainSettings(objective="aoe").pooling == "cls"
    assert pretrained_embedding(grid, "bert-base-uncased")[0] == "cls"
    assert backbone_pooling(grid, "llama-2-7b") == ("last", "backbones.llama-2-7b.pooling")
    s = _settings(resolve_cell(grid, "bert-base-uncased", "aoe", "nli", 42))
    assert (s["pooling"].value, s["pooling"].set_by) == ("cls", "code:aoe.config.hparams.TrainSettings.pooling")


def test_schema_default_reads_the_schema():
    from aoe.config.hparams import schema_default

    assert schema_default("evaluation", "sts", "batch_size") == 64
    assert schema_default("evaluation", "sts", "max_length") == 512


def test_the_ledger_shows_a_padded_pooling_cell_trains_in_one_pass(grid):
    """The pooling-ablation cells train the official padded arithmetic: the ledger names the pooling and the
    length_buckets 1 it needs, each with the key that set it and the official line its comment cites."""
    recipe = build_recipe(grid, ["config.yaml"])
    rows = {c["cell"]: {r["key"]: r for r in c["rows"]} for c in recipe["cells"]}
    padded, masked = rows["bert-base-uncased/angle_pool_avg/stsb/seed42"], rows["bert-base-uncased/angle_pool_avg_masked/stsb/seed42"]
    assert (padded["pooling"]["value"], padded["pooling"]["set_by"]) == ("avg_padded", "objectives.angle_pool_avg.pooling")
    assert (padded["length_buckets"]["value"], padded["length_buckets"]["set_by"]) == (1, "objectives.angle_pool_avg.length_buckets")
    assert "fcb6223 angle.py:370-371" in padded["length_buckets"]["source"]
    assert masked["pooling"]["value"] == "avg" and masked["length_buckets"]["set_by"] != "objectives.angle_pool_avg_masked.length_buckets"
    aoe_max = rows["bert-base-uncased/aoe_pool_max/nli/seed42"]
    assert (aoe_max["pooling"]["value"], aoe_max["length_buckets"]["value"]) == ("max_zeroed", 1)
