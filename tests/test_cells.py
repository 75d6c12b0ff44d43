"""The grid's cells (aoe.config.cells): which models the runs train, each seed's reruns, a run's name and path."""

from __future__ import annotations

from aoe.config.cell_settings import train_params
from aoe.config.cells import Cell, run_cells
from aoe.config.rows import table_cells, table_rows
from aoe.config.workflow import eval_cells
from tests.workflow_utils import validated_config


def test_cells_of_the_paper_grid():
    config = validated_config()
    cells = run_cells(config)
    assert {c.seed for c in cells} == {42, 43, 44, 45, 46}
    by_backbone = {b: sum(c.backbone == b for c in cells) for b in ("bert-base-uncased", "llama-2-7b", "llama-2-13b")}
    # BERT: 24 objectives on NLI (9; SBERT and SimCSE at their papers' recipes; the reproduction report's recipe, aoe_report;
    # AoE Table 4's masked max; the papers' studies' 11 variants), 19 on STS-B (6 + the AnglE ablation's 13: 10 rows and 3 masked poolings), 6 on GIS, 4 on MRPC,
    # QQP, QNLI, 5 on the LLM-supervised train sets (AnglE Table 4: 2 per generator, 1 self-paired); LLaMA: 3 on NLI
    # (the October 2023 command's aoe cell is also the arXiv AnglE-LLaMA rows'); x seeds 42-46; and the arXiv-era
    # AnglE-BERT on NLI with seed 42 four more times (Table 4's fixed seed)
    assert by_backbone == {"bert-base-uncased": 5 * (24 + 19 + 6 + 3 * 4 + 5) + 4, "llama-2-7b": 15, "llama-2-13b": 15}
    assert len(cells) == 364
    assert Cell("bert-base-uncased", "pretrained", "none", 0) in table_cells(config, "table2_indomain")
    # every row that a paper number is set against: five different seeds, one training each (config.yaml runs)
    assert Cell("llama-2-13b", "aoe", "nli", 46) in table_cells(config, "table1_sts")
    table1 = {(r.backbone, r.objective): r for r in table_rows(config, "table1_sts") if r.objective != "released"}
    assert all(r.seeds == (42, 43, 44, 45, 46) and r.reruns == 1 for r in table1.values())
    # AnglE-BERT's seed 42 is also trained four more times (Table 4's fixed-seed row), which stay out of Table 1
    assert {c.run for c in cells if (c.backbone, c.objective, c.trainset) == ("bert-base-uncased", "angle_arxiv", "nli")} == {
        "42", "43", "44", "45", "46", "42-rerun1", "42-rerun2", "42-rerun3", "42-rerun4"}
    assert not any(c.rerun for c in table_cells(config, "table1_sts"))
    # every trained cell plus BERT as downloaded (Tables 2, 3 and 5), LLaMA-2 7B as downloaded (AnglE's
    # transfer STS: with its prompt, and without under 3 poolings) and the 5 released checkpoints (AoE Table 8)
    assert len(eval_cells(config)) == 364 + 2 + 3 + 5
    assert {(c.objective, c.run) for c in cells if c.rerun} == {("angle_arxiv", f"42-rerun{k}") for k in range(1, 5)}
    assert sum(c.seed == 42 for c in cells) == 72 + 4 and sum(c.seed != 42 for c in cells) == 4 * 72


def test_a_rerun_is_its_cell_trained_again_with_the_same_seed():
    from aoe.config.cells import parse_run
    from aoe.config.cell_settings import start_cell

    cell = Cell.from_wildcards({"backbone": "bert-base-uncased", "objective": "aoe", "trainset": "nli", "seed": "42-rerun3"})
    assert (cell.seed, cell.rerun, cell.run) == (42, 3, "42-rerun3")
    assert cell.path == "bert-base-uncased/aoe/nli/seed42-rerun3"
    assert Cell("b", "aoe", "nli", 42).path == "b/aoe/nli/seed42" and parse_run("42") == (42, 0) and parse_run(7) == (7, 0)
    config = validated_config()
    assert train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed)["seed"] == 42
    # a rerun of a two-stage cell repeats its first stage too
    assert start_cell(Cell("b", "aoe", "stsb", 42, 2), {"trainset": "nli", "objective": "angle_arxiv"}) == Cell("b", "angle_arxiv", "nli", 42, 2)
