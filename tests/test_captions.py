"""What a table's caption and notes say its rows ran (aoe.config.captions), generated from their resolved cells."""

from __future__ import annotations

import functools

import pytest

from tests.workflow_utils import REPO


@functools.lru_cache(maxsize=1)
def _loaded_grid() -> dict:
    """config.yaml as load_config gives it, once per session (about 1 CPU-s each): its readers here only read it."""
    from aoe.plan.check import load_config

    return load_config(REPO)


def test_protocol_differences_name_how_a_presets_rows_train_otherwise():
    """Issue 54: the demo's in-domain STS-B model stood in AoE Table 1 (NLI-trained) without a word."""
    from aoe.config.captions import protocol_differences
    from aoe.plan.check import load_config

    grid, demo = load_config(REPO), load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    assert protocol_differences(demo, grid, "table1_sts") == [
        "trained on stsb (paper: nli)", "backbone minilm-l6 (paper: bert-base-uncased, llama-2-13b, llama-2-7b)",
        "200 steps of 32 pairs (paper: 10 epochs of 2048 pairs)"]
    # Table 2 is the in-domain protocol: the train set agrees (the demo trains one of its two); the grid's AoE
    # starts from its NLI model, the demo's from MiniLM as downloaded (issue 62)
    assert protocol_differences(demo, grid, "table2_indomain")[1:] == [
        "backbone minilm-l6 (paper: bert-base-uncased)", "start minilm-l6 as downloaded (paper: the AnglE model trained on nli)",
        "200 steps of 32 pairs (paper: 5 epochs of 32 pairs)"]
    assert protocol_differences(grid, grid, "table1_sts") == []


def test_each_tables_caption_says_what_its_configuration_ran():
    """Issue 62: the demo's Table 2 caption, copied from config.yaml, said its AoE started from the grid's NLI model;
    the demo's start from MiniLM as downloaded. What a table's rows ran is generated from their resolved cells."""
    from aoe.config.captions import training_summary
    from aoe.plan.check import load_config

    grid, demo = load_config(REPO), load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    assert training_summary(demo, "table2_indomain") == (
        "This run: minilm-l6 trained on stsb from its weights as downloaded; 200 steps of 32 pairs; seeds 1, 2; pooling cls. "
        "minilm-l6 as downloaded (its own pooling: avg), pooling avg, its own (1_Pooling/config.json: mode mean); "
        "as downloaded (CLS pooling, as trained), pooling cls.")  # issue 70: the backbone both ways, each row its pooling
    # the grid: AoE from the NLI stage, the baselines from BERT-base; said once, the rows that differ named
    grid2 = training_summary(grid, "table2_indomain")
    assert grid2.startswith("This run: bert-base-uncased trained on gis and stsb (a model per column) from its weights as downloaded "
                            "(AoE loss (w 1/1) at the STS-B example's recipe, from the NLI model: the AnglE model trained on nli); 5 epochs of 32 pairs "
                            "(AoE (arXiv in-domain recipe, from BERT), AoE (arXiv in-domain recipe), float gold: 20 epochs of 32 pairs;")
    # a recipe that differs in length, pooling or fine-tuning names its rows; LLaMA's adapters are said
    grid1 = training_summary(grid, "table1_sts")
    assert "SBERT (SBERT's recipe): 1 epoch of 16 labelled NLI pairs" in grid1 and "SBERT (SBERT's recipe): avg" in grid1
    assert "llama-2-7b trained on nli from its weights as downloaded" in grid1 and "fine-tuning qlora" in grid1
    # a configuration that changes a value changes the caption: a copied preset's table never keeps another run's
    longer = load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    longer["trainsets"]["stsb"]["train"]["max_steps"] = 400
    assert "400 steps of 32 pairs" in training_summary(longer, "table1_sts")
    # no caption of config.yaml states a training fact a preset can change (backbone, train set, start)
    for name, spec in grid["tables"].items():
        assert "starts from the grid" not in spec["caption"] and "(BERT-base, NLI" not in spec["caption"], name


@pytest.mark.parametrize("preset", sorted(p.name for p in (REPO / "presets").glob("*.yaml")))
def test_every_presets_table_notes_resolve(preset):
    """What rule table computes for each built table of every preset (the notes beside the paper grid's): the
    paper-* presets' dry runs stopped on table `released`, whose rows (released checkpoints) have no recipe."""
    from aoe.config.checkpoint_selection import scored_split_selections
    from aoe.config.captions import protocol_differences
    from aoe.config.workflow import built_tables
    from aoe.plan.check import load_config

    grid, config = _loaded_grid(), load_config(REPO, [REPO / "presets" / preset])
    for table in built_tables(config):
        differences = protocol_differences(config, grid, table)
        assert isinstance(differences, list), table
        scored_split_selections(config, table), scored_split_selections(config, table, held_out=True)
