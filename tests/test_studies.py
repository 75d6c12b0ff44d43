"""The papers' own studies (issue 51): the verdict on each claim (aoe.results.studies), the study tables of
the grid and of presets/studies-cpu.yaml, built from result frames, their note and REPORT.md line, and the
grid's plan of each study's jobs; the objective comparison of presets/objectives-vs-cosent.yaml (issue 70): its
verdict, direction and correction, its caption's recipe differences and REPORT.md's lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from scipy import stats

from aoe.config.cells import run_cells
from aoe.config.hparams import YAML_LOADER
from aoe.config.rows import table_cells, table_rows
from aoe.publish.report import build_report
from aoe.results.render import to_json, to_markdown
from aoe.results.stats import detectable_gap
from aoe.results.studies import (COMPARISON_RULE, INCONCLUSIVE, NO_RESULT, NOT_SUPPORTED, STUDY_RULE, SUPPORTED, ComparedRow, StudyRow,
                                 judge_comparison, judge_study)
from aoe.results.tables import build_table
from tests.workflow_utils import MIRROR, REPO, dry_run_jobs, job_counts, needs_mirror, snakemake, tiny_backbone_overlay

STUDIES = ("study_weights", "study_tau", "study_batch", "study_pooling")
BEST = {"claim": "cls is the most helpful", "source": "aoe-acl2024.txt l.210", "test": "best", "best": "cls"}
RISING = {"claim": "larger batch sizes yield better results", "source": "angle-arxiv-b.txt l.333", "test": "increasing"}


def _row(label: str, *values: float) -> StudyRow:
    """A row of different seeds 1, 2, ... with these values."""
    return StudyRow(label, {str(i): v for i, v in enumerate(values, 1)})


def test_best_is_supported_only_by_a_test_across_seeds():
    # cls beats avg by 1.0 on each of three seeds (± 0.05): paired t = 34.6, p = 0.0008: supported
    v = judge_study([_row("cls", 80.0, 80.3, 80.1), _row("avg", 79.0, 79.25, 79.15)], BEST)
    assert v.status == SUPPORTED
    p = stats.ttest_rel([80.0, 80.3, 80.1], [79.0, 79.25, 79.15]).pvalue
    assert f"cls − avg = +1.00 (p = {p:.2g} (paired, 3 seeds))" in v.text and "l.210" in v.text
    # the same mean gap with the differences spread 0.5: p = 0.074, inconclusive, with the gap these seeds could
    # detect at 80% power (a paired test on 3 seeds, standard error 0.5 / √3: 1.63)
    v = judge_study([_row("cls", 79.0, 81.0, 80.5), _row("avg", 78.0, 80.5, 79.0)], BEST)
    assert v.status == INCONCLUSIVE
    gap = detectable_gap(0.5 / math.sqrt(3), 2)
    assert f"these seeds detect a gap of {gap:.2f} at α = 0.05, power 0.8" in v.text and f"detectable: {gap:.2f}" in v.text
    # another row beats it at p < 0.05 / 2 (Bonferroni over the claim's two comparisons): not supported, naming that row
    v = judge_study([_row("cls", 80.0, 80.3, 80.1), _row("avg", 79.0, 79.25, 79.15), _row("max", 82.0, 82.25, 82.15)], BEST)
    assert v.status == NOT_SUPPORTED
    assert "cls − max = -2.00" in v.text and "cls − avg" not in v.text.split("Means:")[0]


def test_a_one_sigma_gap_is_no_verdict():
    """The old rule called a gap above the larger seed σ real: two seeds a row, cls 1.30 above avg with σ 1.13 passed
    it ("supported"), while the paired test over the two seeds gives p = 0.14 (Welch's 0.32) and detects at 80% power
    only gaps of 4.90: inconclusive now, with that gap."""
    v = judge_study([_row("cls", 80.0, 81.6), _row("avg", 79.0, 80.0)], BEST)
    assert v.status == INCONCLUSIVE
    assert "cls − avg = +1.30 (p = 0.144 (paired, 2 seeds); detectable: 4.90)" in v.text


def test_reruns_of_one_seed_are_no_sample():
    """Five reruns of seed 42 differ by GPU noise only: no test over them, however large the gap; the verdict is
    inconclusive and says that no comparison could be tested."""
    def reruns(label, v):
        return StudyRow(label, {"42": v, **{f"42-rerun{i}": v + 0.01 * i for i in range(1, 5)}})

    v = judge_study([reruns("cls", 84.0), reruns("avg", 80.0)], BEST)
    assert v.status == INCONCLUSIVE and "1 of 1 comparisons have no test" in v.text
    assert "no test: cls is 5 reruns of seed 42 (GPU noise, no seed's spread)" in v.text


def test_increasing_needs_every_step_to_rise():
    rows = [_row("batch 8", 70.0, 70.1, 70.05), _row("batch 16", 71.0, 71.12, 71.02), _row("batch 32", 72.0, 72.08, 72.1)]
    assert judge_study(rows, RISING).status == SUPPORTED
    # one step within the spread: inconclusive; one step down at p < 0.05 / 2: not supported
    flat = rows[:2] + [_row("batch 32", 71.05, 70.9, 71.1)]
    assert judge_study(flat, RISING).status == INCONCLUSIVE
    down = rows[:2] + [_row("batch 32", 69.0, 69.1, 69.05)]
    v = judge_study(down, RISING)
    assert v.status == NOT_SUPPORTED and "batch 32 − batch 16 = -2.00" in v.text


def test_a_study_without_its_rows_says_so_and_a_bad_spec_is_refused():
    assert judge_study([_row("cls"), _row("avg", 79.0)], BEST).status == NO_RESULT
    assert judge_study([_row("batch 8", 70.0), _row("batch 16")], RISING).status == NO_RESULT
    v = judge_study([_row("avg", 1.0), _row("max", 2.0)], BEST)
    assert v.status == NO_RESULT and "'cls' is not one row's label (avg, max)" in v.text
    with pytest.raises(ValueError, match="study test"):
        judge_study([_row("cls", 1.0)], {**BEST, "test": "lowest"})


def _config(*presets: str, root: Path = REPO) -> dict:
    from snakemake.utils import update_config, validate

    config = yaml.load((root / "config.yaml").read_text(), Loader=YAML_LOADER)
    for p in presets:
        update_config(config, yaml.load((root / p).read_text(), Loader=YAML_LOADER))
    validate(config, str(REPO / "schemas" / "config.schema.yaml"))
    return config


def _frame(config: dict, name: str, value_of) -> pd.DataFrame:
    """A long results frame with one value per cell of the table's rows: value_of(row index, seed, rerun)."""
    column = "avg" if config["tables"][name]["kind"] == "ablation" else "STSB"
    out = []
    for i, row in enumerate(table_rows(config, name)):
        for seed in row.seeds:
            for rerun in range(row.reruns):
                out.append({"backbone": row.backbone, "objective": row.objective, "trainset": row.trainsets[0],
                            "seed": seed, "rerun": rerun, "column": column, "value": value_of(i, seed, rerun)})
    return pd.DataFrame(out)


@pytest.mark.parametrize("presets", [(), ("presets/studies-cpu.yaml",)], ids=["grid", "studies-cpu"])
def test_each_study_table_carries_its_claim_line(presets, tmp_path):
    """The grid's four study tables and the CPU preset's, built from results, each say in a note, in their
    JSON and in REPORT.md whether the rows support the paper's claim."""
    config = _config(*presets)
    assert set(STUDIES) <= set(config["build"]["tables"])
    paths = []
    for name in STUDIES:
        spec = config["tables"][name]
        # rows rising 3 points in table order, a seed's noise (0.05) shared by the rows and a little their own (0.01
        # to 0.02): every claim of the rising kind holds by a paired test over the seeds, and a best-row claim holds
        # where the paper's row is the last
        frame = _frame(config, name, lambda i, seed, rerun: 70.0 + 3.0 * i + 0.05 * (seed % 2) + 0.01 * ((seed * (i + 1)) % 4) + 0.01 * rerun)
        table = build_table(frame, spec, name=name, rows=[r.as_dict() for r in table_rows(config, name)])
        last = table.rows[-1].label
        expected = SUPPORTED if spec["study"]["test"] == "increasing" or spec["study"].get("best") == last else NOT_SUPPORTED
        assert table.study["status"] == expected, (name, table.study)
        assert spec["study"]["source"] in table.study["text"]
        assert any(n.startswith("Paper's claim") and STUDY_RULE in n for n in to_json(table)["notes"])
        assert spec["study"]["claim"] in to_markdown(table)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(to_json(table)))
        paths.append(path)
    report = build_report(paths)
    for name in STUDIES:
        section = report.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"**Study, {json.loads((tmp_path / f'{name}.json').read_text())['study']['status']}.**" in section


def test_the_grid_trains_each_studys_rows_once():
    """Each study row is a cell the grid trains (seeds 42-46, one training each); the batch rows differ from AnglE's by
    the batch alone and the weight rows from AoE's by w2 alone."""
    from aoe.config.hparams import resolve_cell

    config = _config()
    cells = set(run_cells(config))
    for name in STUDIES:
        needed = {c for c in table_cells(config, name) if c.objective != "pretrained"}
        assert needed and needed <= cells, name
        # five rows for the poolings: the fourth in 1c5515b's arithmetic and masked
        assert len(needed) == (5 if name == "study_pooling" else 4) * 5, name
    params = {o: resolve_cell(config, "bert-base-uncased", o, "nli", 42).params
              for o in ("angle_arxiv", "angle_batch8", "angle_tau_0_05", "aoe", "aoe_w2_10", "aoe_pool_cls_avg",
                      "aoe_pool_cls_avg_masked")}
    differ = lambda a, b: {k for k in params[a] if params[a][k] != params[b][k]}  # noqa: E731
    assert differ("angle_batch8", "angle_arxiv") == {"batch_size"}  # "objective" is the base recipe, angle_arxiv for both
    assert params["angle_batch8"]["batch_size"] == 8 and params["angle_arxiv"]["batch_size"] == 50
    assert differ("angle_tau_0_05", "angle_arxiv") == {"objective_overrides"}
    # the base's NLI weights (in-batch 35, trainsets.nli.objective_settings.angle_arxiv), the tau its own
    assert params["angle_tau_0_05"]["objective_overrides"] == {"angle_tau": 20.0, "weights": {"cosine": 1.0, "contrastive": 35.0, "angle": 1.0}}
    assert params["angle_tau_0_05"]["objective_overrides"]["weights"] == params["angle_arxiv"]["objective_overrides"]["weights"]
    assert differ("aoe_w2_10", "aoe") == {"objective_overrides"}
    assert params["aoe_w2_10"]["objective_overrides"]["weights"] == {"angle": 1.0, "contrastive": 10.0}
    assert differ("aoe_pool_cls_avg_masked", "aoe") == {"pooling"}
    assert differ("aoe_pool_cls_avg", "aoe") == {"pooling", "length_buckets"}
    assert (params["aoe_pool_cls_avg"]["pooling"], params["aoe_pool_cls_avg"]["length_buckets"]) == ("cls_avg_batchsum", 1)


def test_snakemake_plans_each_study_of_the_grid(tmp_path):
    """`snakemake -n study_<name>` on the grid plans its rows' trainings and evaluations (without a mirror)."""
    from tests.workflow_utils import copy_workflow

    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "-n", *STUDIES, env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    counts = job_counts(out.stdout)
    # 15 objectives x seeds 42-46: 11 new variants and aoe, aoe_pool_avg, aoe_pool_max, angle_arxiv
    assert counts["train_model"] == 75 and counts["evaluate_sts"] == 75 and counts["table"] == 4, counts
    trained = {j["wildcards"].get("objective") for j in dry_run_jobs(out.stdout) if j["rule"] == "train_model"}
    assert {"angle_batch8", "angle_tau_2", "aoe_w2_50", "aoe_pool_cls_avg", "aoe_pool_cls_avg_masked"} <= trained


def test_a_study_naming_a_row_it_lacks_is_refused_at_planning():
    from aoe.config.errors import ConfigError
    from aoe.plan.table_checks import check_tables

    config = _config("presets/studies-cpu.yaml")
    check_tables(config)
    config["tables"]["study_pooling"]["study"]["best"] = "CLS"
    with pytest.raises(ConfigError, match=r"tables.study_pooling.study.best: 'CLS' must be the label of one row .*'cls', 'cls_avg"):
        check_tables(config)
    config["tables"]["study_batch"]["rows"] = config["tables"]["study_batch"]["rows"][:1]
    config["tables"]["study_pooling"]["study"]["best"] = "cls"
    with pytest.raises(ConfigError, match="test increasing needs two rows or more"):
        check_tables(config)


# Each row's steps at its batch in the test's overlay: 800 pairs a row, the fewest that all four batches divide
# (the preset's 1,600 halved; its rows 200, 100, 50 and 32 steps)
SMALL_STEPS = {"angle_batch8": (8, 100), "angle_batch16": (16, 50), "angle_batch32": (32, 25), "angle_arxiv": (50, 16)}


@pytest.mark.slow
@needs_mirror
def test_the_cpu_presets_batch_study_is_built_with_its_claim_line(tmp_path):
    """presets/studies-cpu.yaml's batch study end to end, a tiny random BERT in MiniLM-L6's place (its
    rows' batches 8 to 50 through the real rules): the table's JSON carries the verdict and the Markdown the
    claim. The tiny model's numbers mean nothing; that the verdict is one of the three, and says so, does.

    At the smallest size that can still fail for that reason (an overlay on the preset, written here): one
    seed (the preset's two double a CI minute for what one shows); each row on 800 pairs, not 1,600 (the
    same count for every row, as the preset's, at its own batch: SMALL_STEPS); STS-B test scored on a seeded
    200 of its 1,379 pairs (evaluation.sts.max_pairs); one job at a time, each one torch thread (--cores 1:
    Snakemake gives a job min(threads, cores) threads, and beside the other xdist worker and the background
    runs a second job or a second OpenMP thread only waits on a busy core, docs/testing.md); the table's two
    outer rows, batch 8 and batch 50 (a test of increasing needs two; the four rows' batches and steps are
    the overlay's resolved settings, checked without training them). The jobs are the preset's: the STS-B
    files laid out, train and test prepared, train tokenized, two trainings, two evaluations, the table."""
    from aoe.config.hparams import resolve_cell
    from tests.workflow_utils import copy_workflow

    # the preset's own rows, which the overlay halves: each at its batch on the same 1,600 pairs (the run below
    # checked 200 and 32 steps of batch 8 and 50 in aoe_config.json before the overlay; resolved here, every row)
    preset = _config("presets/studies-cpu.yaml")
    own = {o: (p["batch_size"], p["max_steps"]) for o in SMALL_STEPS for p in [resolve_cell(preset, "minilm-l6", o, "stsb", 1).params]}
    assert own == {"angle_batch8": (8, 200), "angle_batch16": (16, 100), "angle_batch32": (32, 50), "angle_arxiv": (50, 32)}, own
    work = copy_workflow(tmp_path / "wf")
    overlay = tiny_backbone_overlay(work, tmp_path / "tiny")
    steps = "".join(f"{o}: {{max_steps: {s}}}, " for o, (_, s) in SMALL_STEPS.items()).rstrip(", ")
    rows = [r for r in preset["tables"]["study_batch"]["rows"] if r["objective"] in ("angle_batch8", "angle_arxiv")]
    (work / "small.yaml").write_text(
        "build: {tables: [study_batch], figures: [], analyses: []}\n"
        "runs: [{backbone: minilm-l6, trainset: stsb, objectives: [angle_arxiv, angle_batch8, angle_batch16, angle_batch32], seeds: [1]}]\n"
        f"trainsets: {{stsb: {{objective_train: {{{steps}}}}}}}\n"
        "evaluation: {sts: {max_pairs: 200}}\n"
        f"tables: {{study_batch: {{rows: {json.dumps(rows)}}}}}\n")
    # every row of the preset at its own batch on the same 800 pairs, as the overlay resolves them
    small = _config("presets/studies-cpu.yaml", overlay.name, "small.yaml", root=work)
    assert {o: (p["batch_size"], p["max_steps"]) for o in SMALL_STEPS for p in [resolve_cell(small, "minilm-l6", o, "stsb", 1).params]} == SMALL_STEPS
    out = snakemake(work, "study_batch", "--cores", "1", "--configfile", "presets/studies-cpu.yaml", overlay.name, "small.yaml",
                    env={"AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1"}, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:]
    assert job_counts(out.stdout)["train_model"] == 2, job_counts(out.stdout)  # the table's two rows, no more
    tables = work / "results" / "studies-cpu" / "tables"
    table = json.loads((tables / "study_batch.json").read_text())
    assert [r["label"] for r in table["rows"]] == ["batch 8", "batch 50"]
    assert all(r["count"]["STSB"] == 1 for r in table["rows"]), table["rows"]
    assert table["study"]["status"] in (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE), table["study"]
    assert "angle-arxiv-b.txt l.333" in table["study"]["text"] and "batch 50 − batch 8 = " in table["study"]["text"]
    assert "larger batch sizes yield better results" in (tables / "study_batch.md").read_text()
    # each row trained at its own batch on the same 800 pairs, as its aoe_config.json records it
    pairs = set()
    for objective in ("angle_batch8", "angle_arxiv"):
        batch, steps = SMALL_STEPS[objective]
        config = json.loads((work / f"results/studies-cpu/models/minilm-l6/{objective}/stsb/seed1/aoe_config.json").read_text())
        assert (config["train"]["batch_size"], config["train"]["max_steps"]) == (batch, steps), objective
        pairs.add(config["train"]["batch_size"] * config["train"]["max_steps"])
    assert pairs == {800}, pairs


def test_a_study_tables_latex_compiles(tmp_path):
    """The claim's quotes and the τ of the rows spelled out for pdflatex: the study tables compile."""
    import shutil
    import subprocess

    from aoe.results.render import to_latex

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed")
    config = _config()
    for name in ("study_tau", "study_pooling"):
        frame = _frame(config, name, lambda i, seed, rerun: 80.0 - i + 0.01 * ((seed * (i + 1)) % 4) + 0.01 * rerun)
        table = build_table(frame, config["tables"][name], name=name, rows=[r.as_dict() for r in table_rows(config, name)])
        tex = to_latex(table)
        assert not [c for c in tex if ord(c) > 127], name
        (tmp_path / f"{name}.tex").write_text(tex)
        out = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{name}.tex"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:]


# ---------------------------------------------------------------------------
# An objective comparison (issue 70).

CLAIM = {"claim": "AoE outperforms CoSENT", "source": "aoe-acl2024.txt l.134-137"}
COLUMNS = [("STS12", "STS12"), ("STSB", "STS-B"), ("avg", "Avg.")]
NOISE = (0.0, 0.3, -0.2)  # seeds 1-3: what a seed does to every row alike (pairing removes it)


def _compared(label: str, shift: float, own: tuple = (0.0, 0.0, 0.0), columns=COLUMNS) -> ComparedRow:
    """Seeds 1-3 of a row ``shift`` above a base of 70 + the column's index, each seed moved by NOISE and ``own``."""
    return ComparedRow(label, {key: {str(s): 70.0 + i + shift + n + o for s, n, o in zip((1, 2, 3), NOISE, own)}
                               for i, (key, _) in enumerate(columns)})


def test_an_objective_comparison_names_the_higher_row_and_corrects_across_columns():
    # CoSENT 1.2 above AoE in every column, a seed's own noise ±0.05: p ≈ 0.002 per column, below 0.05/3 in each:
    # the claim is not supported, each gap's sign and the higher row named
    aoe, cosent = _compared("AoE", 0.0), _compared("CoSENT", 1.2, (0.05, -0.05, 0.0))
    v = judge_comparison(aoe, cosent, COLUMNS, CLAIM)
    p = stats.ttest_rel([70.0, 70.3, 69.8], [71.25, 71.45, 71.0]).pvalue
    assert v.status == NOT_SUPPORTED and p < 0.05 / 3
    assert f"AoE − CoSENT: STS12 -1.20 (p = {p:.2g} (paired, 3 seeds))" in v.text
    assert "(AoE higher in 0 of 3 columns, called at p < 0.05/3: CoSENT higher in STS12, STS-B, Avg.)" in v.text
    # in STS12 the differences spread (1.10, 1.45, 0.75): p ≈ 0.03, between 0.05/3 and 0.05: not called there
    # (Bonferroni over the 3 columns), its detectable gap printed instead; the other columns still call CoSENT higher
    sts12 = {s: x + d for (s, x), d in zip(aoe.values["STS12"].items(), (1.10, 1.45, 0.75))}
    v = judge_comparison(aoe, ComparedRow("CoSENT", {**cosent.values, "STS12": sts12}), COLUMNS, CLAIM)
    p12 = stats.ttest_rel(list(aoe.values["STS12"].values()), list(sts12.values())).pvalue
    assert 0.05 / 3 < p12 < 0.05, p12
    assert f"STS12 -1.10 (p = {p12:.3f} (paired, 3 seeds); detectable: " in v.text
    assert "called at p < 0.05/3: CoSENT higher in STS-B, Avg.)" in v.text and v.status == NOT_SUPPORTED
    # that column alone (c = 1): called, and the claim not supported
    v = judge_comparison(aoe, ComparedRow("CoSENT", {"STS12": sts12}), COLUMNS[:1], CLAIM)
    assert "called at p < 0.05/1: CoSENT higher in STS12)" in v.text and v.status == NOT_SUPPORTED
    # AoE above in every column at p < 0.05 (intersection-union: no correction needed): supported
    assert judge_comparison(_compared("AoE", 1.2, (0.05, -0.05, 0.0)), _compared("CoSENT", 0.0), COLUMNS, CLAIM).status == SUPPORTED
    # a gap within the seeds' spread: inconclusive, with the gap these seeds could detect
    v = judge_comparison(aoe, _compared("CoSENT", 0.2, (0.5, -0.4, 0.1)), COLUMNS, CLAIM)
    assert v.status == INCONCLUSIVE and "these seeds detect a gap of" in v.text and "called at p < 0.05/3: none" in v.text
    # one seed: no test, and no verdict
    one = ComparedRow("CoSENT", {k: {"1": 71.0} for k, _ in COLUMNS})
    assert judge_comparison(aoe, one, COLUMNS, CLAIM).status == NO_RESULT


def test_the_middle_row_says_whether_the_objective_or_the_labels_made_the_gap():
    aoe, cosent = _compared("AoE", 0.0), _compared("CoSENT", 1.2, (0.05, -0.05, 0.0))
    # AoE on CoSENT's labels scores as CoSENT does: the labels (and batches) made the gap
    on_scores = _compared("AoE on the scores", 1.2, (-0.03, 0.04, 0.0))
    v = judge_comparison(aoe, cosent, COLUMNS, CLAIM, separates=on_scores,
                         differences={("AoE", "AoE on the scores"): 'graded_labels "int" vs "score"'})
    assert "the gap is the labels and batches (AoE on the scores higher)" in v.text
    assert 'AoE − AoE on the scores (graded_labels "int" vs "score"): STS12 -1.20' in v.text
    assert "AoE on the scores − CoSENT: STS12 +0.00" in v.text and "detectable: " in v.text.split("AoE on the scores − CoSENT")[1]
    # AoE on CoSENT's labels scores as AoE does: the objective made it
    on_scores = _compared("AoE on the scores", 0.0, (0.03, -0.04, 0.0))
    v = judge_comparison(aoe, cosent, COLUMNS, CLAIM, separates=on_scores)
    assert "the gap is the objective (CoSENT higher)" in v.text
    # no gap between AoE and CoSENT: nothing to attribute
    v = judge_comparison(aoe, _compared("CoSENT", 0.2, (0.5, -0.4, 0.1)), COLUMNS, CLAIM, separates=on_scores)
    assert "no gap between the two rows to attribute at these seeds" in v.text


def test_the_comparison_preset_is_the_demos_recipe_and_its_table_names_every_difference(tmp_path):
    """presets/objectives-vs-cosent.yaml trains AoE as the CPU demo does (every resolved setting but the seed list);
    its table, built from a synthetic frame with the rows the rule table passes (aoe.config.measures.measured_rows),
    names in its caption every setting the rows' resolved recipes differ in, judges them, and REPORT.md's ordering
    line cites the paper's claim instead of "the paper orders fewer than two"."""
    from aoe.config.hparams import resolve_cell
    from aoe.config.measures import measured_rows
    from aoe.plan.check import load_config

    config = load_config(REPO, [REPO / "presets" / "objectives-vs-cosent.yaml"])
    demo = load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    ours = resolve_cell(config, "minilm-l6", "aoe", "stsb", 1)
    assert ours.params == resolve_cell(demo, "minilm-l6", "aoe", "stsb", 1).params
    # the demo's evaluation, two of its seven STS tasks (the preset's comment says why)
    sts, demo_sts = config["evaluation"]["sts"], demo["evaluation"]["sts"]
    assert sts["tasks"] == ["STSB", "SICKR"] and set(sts["tasks"]) < set(demo_sts["tasks"])
    assert {**sts, "tasks": None} == {**demo_sts, "tasks": None}
    assert {k: v for k, v in config["evaluation"].items() if k not in ("sts", "pretrained_variants")} == {
        k: v for k, v in demo["evaluation"].items() if k not in ("sts", "pretrained_variants")}
    name = "aoe_vs_cosent"
    rows = measured_rows(config, name)
    shift, own = {"aoe": 0.0, "aoe_scores": 1.2, "cosent": 1.2}, {"aoe": 0.0, "aoe_scores": 0.04, "cosent": -0.03}

    def frame_of(columns):
        return pd.DataFrame([{"backbone": "minilm-l6", "objective": obj, "trainset": "stsb", "seed": seed, "rerun": 0, "column": col,
                              "value": 70.0 + i + shift[obj] + n + own[obj] * (seed - 2)}
                             for obj in shift for seed, n in zip((1, 2, 3), NOISE) for i, col in enumerate(columns)])

    # the preset's two tasks: the evaluation writes no avg of a subset, so the table has none (no column of "–", no
    # missing cells, no means of it in the verdict); its columns are the two tasks, each tested
    table = build_table(frame_of(sts["tasks"]), config["tables"][name], rows=rows, name=name)
    assert [c.key for c in table.columns] == ["STSB", "SICKR"] and not table.missing
    assert table.study["status"] == NOT_SUPPORTED and "Means (" not in table.study["text"] and "of 2 columns" in table.study["text"]
    # evaluated on all seven, the avg is a column, the verdict gives the rows' means in it, and REPORT.md orders by it
    table = build_table(frame_of([*demo_sts["tasks"], "avg"]), config["tables"][name], rows=rows, name=name)
    assert table.columns[-1].key == "avg" and "Means (Avg.): AoE " in table.study["text"]
    # the differences come from the resolved recipes: the preset's switches and the built-in recipes' weights
    assert ('AoE vs AoE on the scores: graded_labels "int" vs "score", identical_texts "filter" vs "ignore"; '
            'AoE on the scores vs CoSENT: objective "aoe" vs "cosent", weights {"angle": 1.0, "contrastive": 1.0} vs {"cosine": 1.0}; '
            'AoE vs CoSENT: graded_labels "int" vs "score", identical_texts "filter" vs "ignore", objective "aoe" vs "cosent", '
            'weights {"angle": 1.0, "contrastive": 1.0} vs {"cosine": 1.0}.') in table.caption
    assert table.study["status"] == NOT_SUPPORTED and "the gap is the labels and batches (AoE on the scores higher)" in table.study["text"]
    assert not table.ttests  # the comparison's tests replace the treatment-vs-baseline ones
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(to_json(table)))
    report = build_report([path])
    assert f"**Objective comparison, {NOT_SUPPORTED}.**" in report and COMPARISON_RULE in report
    assert "the paper orders fewer than two" not in report
    assert "the paper's claim (AoE, ACL 2024, Table 1 (aoe-acl2024.txt l.134-137)): AoE > CoSENT (**another order**)" in report


def test_a_comparison_naming_a_row_it_lacks_or_on_another_kind_is_refused_at_planning(tmp_path):
    from aoe.config.errors import ConfigError
    from aoe.plan.check import load_config

    preset = REPO / "presets" / "objectives-vs-cosent.yaml"
    cases = [
        ({"tables": {"aoe_vs_cosent": {"comparison": {"separates": "sbert"}}}},
         "tables.aoe_vs_cosent.comparison.separates: 'sbert' must be the objective of one trained row of the table "
         "(its rows' objectives: aoe, aoe_scores, cosent)"),
        ({"tables": {"aoe_vs_cosent": {"kind": "sts7"}}},
         "tables.aoe_vs_cosent.comparison: only a table of kind objective_comparison judges one (this one is sts7)"),
    ]
    for override, message in cases:
        (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
        with pytest.raises(ConfigError) as err:
            load_config(REPO, [preset, tmp_path / "override.yaml"])
        assert str(err.value) == message
