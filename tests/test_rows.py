"""A table's rows (aoe.config.rows): their seeds and reruns against what the runs train, the models and files each reads,
and the paper's rows the paper grid hangs on the same table."""

from __future__ import annotations

import yaml

from aoe.config.cells import Cell, run_cells
from aoe.config.hparams import YAML_LOADER
from aoe.config.rows import table_cells, table_rows
from aoe.config.workflow import table_inputs, table_target
from tests.workflow_utils import REPO, validated_config


def test_table_rows_and_inputs():
    config = validated_config()
    rows = table_rows(config, "table4_ablation")
    assert [r.section for r in rows][:3] == ["objective"] * 3
    fixed, varying, varying_2024 = rows[-3], rows[-2], rows[-1]
    assert fixed.seeds == (42,) and varying.seeds == varying_2024.seeds == (42, 43, 44, 45, 46)
    # the fixed-seed row: five trainings of seed 42 of the arXiv-era cell (the first is its main row's seed-42 cell);
    # the different-seeds rows: each seed's first training only
    assert [c.path for c in fixed.cells] == ["bert-base-uncased/angle_arxiv/nli/seed42"] + [
        f"bert-base-uncased/angle_arxiv/nli/seed42-rerun{k}" for k in range(1, 5)]
    assert all(c.rerun == 0 for c in varying.cells) and len(varying.cells) == 5
    assert [c.path for c in varying_2024.cells] == [f"bert-base-uncased/aoe/nli/seed{s}" for s in range(42, 47)]
    assert "results/eval/bert-base-uncased/angle_arxiv/nli/seed42-rerun4/sts.json" in table_inputs(config, "table4_ablation")
    # in-domain: a trained model on its own train set's eval split, the backbone on every column's
    inputs = table_inputs(config, "table2_indomain")
    assert "results/eval/bert-base-uncased/aoe/gis/seed45/indomain_gis.json" in inputs and not any("rerun" in f for f in inputs)
    assert "results/eval/bert-base-uncased/pretrained/none/seed0/indomain_stsb.json" in inputs
    assert not any("aoe/gis/seed43/indomain_stsb" in f for f in inputs)
    # SimCSE, SBERT, AoE (arXiv recipe: its float-gold row reads the same files), AoE (STS-B example) and AoE (the report's
    # recipe) on STS-B and GIS, 5 trainings each; the backbone twice
    assert len(inputs) == 5 * 2 * 5 + 2
    assert table_inputs(config, "table_gis_stats") == ["results/analysis/gis/stats.json"]
    assert "results/benchmarks/train/bert-base-uncased/sbert/stsb/seed45.tsv" in table_inputs(config, "table_train_time")
    assert [table_target(t) for t in ("table1_sts", "table_mteb", "angle_flickr30k")] == ["table1", "table_mteb", "angle_flickr30k"]


def test_the_papers_seed_protocol_is_a_preset_of_the_same_cells():
    """presets/seed42-reruns.yaml: AoE §4's protocol (five trainings of seed 42 a cell, l.162 and l.182), which the grid
    leaves for five seeds at the same cost: the same cells as config.yaml's runs, each table row seed 42's five (Table 4's
    different-seeds rows excepted: seeds 43-46 of the arXiv-era and 2024 AoE cells trained for them alone,
    named_rows_only), so four trainings more than the grid, whose fixed-seed row needs four reruns of one cell."""
    grid = validated_config()
    preset = yaml.load((REPO / "presets" / "seed42-reruns.yaml").read_text(), Loader=YAML_LOADER)
    paper = {**grid, "runs": preset["runs"]}  # a list replaces the grid's whole, as --configfile does (the schema: test_schema)
    strip = lambda cells: {(c.backbone, c.objective, c.trainset) for c in cells}  # noqa: E731
    assert strip(run_cells(paper)) == strip(run_cells(grid)), "keep presets/seed42-reruns.yaml's runs in step with config.yaml's"
    assert len(run_cells(paper)) == len(run_cells(grid)) + 4 == 364 + 4
    table1 = [r for r in table_rows(paper, "table1_sts") if r.objective != "released"]
    assert all(r.seeds == (42,) and r.reruns == 5 for r in table1) and Cell("bert-base-uncased", "aoe", "nli", 43) not in table_cells(paper, "table1_sts")
    fixed, varying, varying_2024 = table_rows(paper, "table4_ablation")[-3:]
    assert (fixed.seeds, fixed.reruns, varying.seeds, varying.reruns) == ((42,), 5, (42, 43, 44, 45, 46), 1)
    assert (varying_2024.objective, varying_2024.seeds) == ("aoe", (42, 43, 44, 45, 46))


def test_the_papers_rows_are_the_tables_whatever_a_preset_trains():
    """Issue 62: the demo's `rows:` replaced the grid's Table 1 rows, and with them the paper's SBERT † and SimCSE numbers
    hung on two of them; the table rule adds the grid's paper rows to every configuration's table."""
    from aoe.config.rows import grid_paper_rows
    from aoe.plan.check import load_config

    grid = load_config(REPO)
    refs = {r["ref"]: (r["backbone"], r["objective"]) for r in grid_paper_rows(grid, "table1_sts")}
    assert refs["acl2024_table1/BERT-base/SBERT †"] == ("bert-base-uncased", "sbert_paper")
    assert refs["acl2024_table1/BERT-base/SimCSE"] == ("bert-base-uncased", "simcse_paper")
    assert refs["reproduction_report/table1/AoE-BERT (reproduction)"] == ("bert-base-uncased", "aoe_report")
    assert refs["acl2024_table1/open_source/USE †"] == ("", "") and len(refs) == 16
    assert grid_paper_rows(grid, "no_such_table") == []
