"""Issue 69: no Δ, gain or t-test between numbers measured otherwise. Each row of ours carries what it was measured
under (aoe.config.measures), one gate refuses a difference its table does not name (aoe.results.likeness), and every
t-test pair of every table of the paper grid and of every preset passes it; then the cases the issue found."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

from aoe.config.measures import measured_rows
from aoe.config.cells import PRETRAINED, RELEASED
from aoe.config.workflow import built_tables
from aoe.plan.check import load_config
from aoe.results.likeness import Measure, UnlikeNumbers, differences, like_for_like, named_text
from aoe.results.render import to_json
from aoe.results.table_model import Row
from aoe.results.tables import build_table, row_paper_refs
from aoe.results.ttests import TREATMENTS, treatment_row, ttest_pairs
from tests.workflow_utils import REPO

PRESETS = sorted(p.name for p in (REPO / "presets").glob("*.yaml"))


@lru_cache(maxsize=None)
def _config(preset: str | None) -> dict:
    return load_config(REPO, [REPO / "presets" / preset] if preset else [])


def _rows(config: dict, table: str) -> list[Row]:
    """The table's rows as the rule table builds them (no results: what they are and how they are measured)."""
    spec = config["tables"][table]
    rows = measured_rows(config, table)
    return [Row(label=r["label"] or f"{r['objective']} {r['eval_gold']} {r['eval_pooling']}".strip(), backbone=r["backbone"],
                objective=r["objective"], trainsets=r["trainsets"], seeds=r["seeds"], paper_ref=ref, eval_gold=r["eval_gold"],
                eval_pooling=r["eval_pooling"], measure=Measure.of(r["measure"]))
            for r, ref in zip(rows, row_paper_refs(spec, rows))]


def test_the_gate_refuses_an_unnamed_difference_and_prints_a_named_one():
    a = Measure(gold="int", protocol="indomain", pooling="cls", recipe='{"stsb": {"learning_rate": 1e-05}}')
    b = Measure(gold="float", protocol="indomain", pooling="cls", recipe='{"stsb": {"learning_rate": 2e-05}}')
    assert like_for_like(a, a) == {}
    with pytest.raises(UnlikeNumbers, match=r"tables.t: x vs y: measured otherwise \(gold: int vs float; recipe: learning_rate "
                                            r"1e-05 vs 2e-05\).*compare_across \(gold: <why>, recipe: <why>\)"):
        like_for_like(a, b, {}, "tables.t: x vs y")
    with pytest.raises(UnlikeNumbers, match=r"\(gold: int vs float\)"):  # naming the recipe alone leaves the gold refused
        like_for_like(a, b, {"recipe": "the paper's baselines ran their own code"})
    named = like_for_like(a, b, {"recipe": "own code", "gold": "why"})
    assert named == {"gold": "int vs float: why", "recipe": "learning_rate 1e-05 vs 2e-05: own code"}
    assert named_text(named).startswith("measured otherwise, as the table allows: gold (int vs float: why)")
    # other train sets are no recipe to compare key by key; an unrecorded field matches only another unrecorded one
    assert differences(Measure(recipe='{"a": {}}'), Measure(recipe='{"b": {}}')) == {"recipe": "trained on a vs b"}
    assert differences(Measure(), Measure(gold="float")) == {"gold": "unrecorded vs float"}
    with pytest.raises(ValueError, match="unknown field"):
        Measure.of({"gold": "int", "golds": "float"})


@pytest.mark.parametrize("preset", [None, *PRESETS])
def test_every_ttest_of_every_table_sets_like_against_like(preset):
    """Over every table of the grid (`all`) and of each preset: each t-test pair passes the gate under its table's
    compare_across (an in-domain gold is named by no table, so every pair shares one); the treatment is the row set
    against the paper's AoE (or its variant row measured as the baseline is) wherever one of those is measured so; a
    refused pair is one no treatment row could take."""
    config = _config(preset)
    tables = [t for t in built_tables(config) if config["tables"][t]["kind"] not in ("gis_stats", "train_time")]
    assert tables
    for table in tables:
        spec = config["tables"][table]
        assert "gold" not in (spec.get("compare_across") or {}), table
        rows = _rows(config, table)
        for pair in ttest_pairs(rows, spec, table):
            where = f"{preset or 'config.yaml'} {table}: {pair.treatment.label} vs {pair.baseline.label}"
            group = [r for r in rows if r.backbone == pair.backbone]
            primary = treatment_row(group, (spec.get("ttest") or {}).get("treatment"))
            same = [r for r in group if r.objective == primary.objective]
            if pair.baseline.objective in (PRETRAINED, RELEASED):
                assert pair.treatment is primary and not pair.named, where
                continue
            if pair.refused:
                for cand in [r for r in group if r.objective in {primary.objective, *TREATMENTS}] :
                    if cand.objective != pair.baseline.objective:
                        with pytest.raises(UnlikeNumbers):
                            like_for_like(cand.measure, pair.baseline.measure, spec.get("compare_across"))
                continue
            named = like_for_like(pair.treatment.measure, pair.baseline.measure, spec.get("compare_across"), where)
            assert named == pair.named, where
            assert pair.treatment.measure.gold == pair.baseline.measure.gold, where
            if pair.treatment.objective != primary.objective:
                # another treatment row only where no row of the paper's AoE objective is measured as the baseline is
                for cand in same:
                    with pytest.raises(UnlikeNumbers):
                        like_for_like(cand.measure, pair.baseline.measure, spec.get("compare_across"))


def test_the_grid_tests_the_rows_the_papers_claims_are_about():
    """Section 1: ACL Tables 1, 3, 4, 5 tested the 2024-recipe aoe row; the row set against the paper's AoE-BERT is the
    arXiv-era angle_arxiv cell. Section 2: Table 2 set angle_arxiv (int gold) against float-gold baselines."""
    config = _config(None)

    def pairs(table: str) -> dict[str, tuple[str, str]]:
        return {p.baseline.label: (p.treatment.label, p.refused) for p in ttest_pairs(_rows(config, table), config["tables"][table], table)
                if p.backbone == "bert-base-uncased"}

    t1 = pairs("table1_sts")
    assert t1["SimCSE (sup., SimCSE's recipe, our NLI triplets)"] == ("AoE-BERT: arXiv-era recipe (angle_arxiv, 0.1.1 eval)", "")
    assert t1["SBERT (AoE recipe)"] == ("AoE-BERT: arXiv-era recipe (evaluated cls)", "")  # the CLS-scored row beside CLS
    assert pairs("table3_transfer")["SimCSE (sup., SimCSE's recipe, our NLI triplets)"][0] == "AoE-BERT: arXiv-era recipe (angle_arxiv, 0.1.1 eval)"
    assert pairs("table5_nli")["simcse_paper"][0] == "angle_arxiv"
    t2 = pairs("table2_indomain")
    for baseline in ("sbert", "simcse_sup", "AoE (the reproduction report's recipe)"):
        assert t2[baseline] == ("AoE (arXiv in-domain recipe), float gold", ""), baseline
    assert t2["AoE loss (w 1/1) at the STS-B example's recipe, from the NLI model"] == ("AoE (arXiv in-domain recipe, from BERT)", "")  # int gold both
    # AoE Table 4: the ablations vary the 2024 recipe, which the arXiv-era cell does not train: tested against AoE's
    # 2024 row; the 2024 rows themselves are refused against the arXiv-era cell (recipe not named for Table 4)
    t4 = pairs("table4_ablation")
    assert t4["only angle objective (2024 recipe)"] == ("AoE (2024 recipe)", "")
    assert t4["average (2024 recipe)"] == ("AoE (2024 recipe)", "")
    assert t4["AoE (2024 recipe)"][1].startswith("no test: measured otherwise (recipe: batch_size 50 vs 2048")
    # and a table that names nothing refuses every pair measured otherwise
    spec = {**config["tables"]["table2_indomain"], "compare_across": {}}
    refused = {p.baseline.label: p.refused for p in ttest_pairs(_rows(config, "table2_indomain"), spec, "table2_indomain")}
    assert refused["sbert"].startswith("no test: measured otherwise (")


def _demo_table2() -> dict:
    """The CPU demo's table2_indomain from result values as its files hold them: MiniLM-L6 as downloaded under its own
    mean pooling 82.03 and under CLS 73.50 against the float gold (their headline), AoE 82.11 against int(gold) (its
    headline) and 84.08 against the float gold."""
    config = _config("cpu-demo.yaml")
    base = {"backbone": "minilm-l6", "rerun": 0, "eval_pooling": "", "column": "stsb"}
    values = []
    for variant, as_float, as_int in (("none", 82.03, 79.90), ("cls_pooling", 73.50, 71.00)):
        values += [{**base, "objective": "pretrained", "trainset": variant, "seed": 0, "eval_gold": g, "value": v}
                   for g, v in (("", as_float), ("float", as_float), ("int", as_int))]
    for seed, (as_int, as_float) in ((1, (81.71, 83.78)), (2, (82.51, 84.38))):
        common = {**base, "objective": "aoe", "trainset": "stsb", "seed": seed}
        values += [{**common, "eval_gold": "", "value": as_int}, {**common, "eval_gold": "int", "value": as_int},
                   {**common, "eval_gold": "float", "value": as_float}]
    table = build_table(pd.DataFrame(values), config["tables"]["table2_indomain"], rows=measured_rows(config, "table2_indomain"),
                        name="table2_indomain")
    return to_json(table)


def test_the_demos_in_domain_gain_is_on_one_gold():
    """The demo printed "minilm-l6: AoE − as downloaded +8.60": 82.11 against int(gold) minus 73.50 against the float
    gold. Now each gain uses one gold: AoE's float-gold row minus each evaluation of the backbone (float gold; the
    pooling difference to its own mean named, as the demo's table allows it), and AoE's int-gold row, with no int-gold
    row of the backbone in the demo's table, gets none, saying why."""
    from aoe.publish.gains import gain_lines as _gain_lines
    from aoe.config.table_kinds import table_kind

    table = _demo_table2()
    assert {r["label"]: r["measure"]["gold"] for r in table["rows"] if not r["reference"]} == {
        "as downloaded (its own pooling: avg)": "float", "as downloaded (CLS pooling, as trained)": "float", "AoE": "int",
        "AoE (float gold)": "float"}
    text = "\n".join(_gain_lines(table, table_kind("indomain")))
    assert "| minilm-l6: AoE (float gold) − as downloaded (its own pooling: avg) | +2.05 |" in text
    assert "| minilm-l6: AoE (float gold) − as downloaded (CLS pooling, as trained) | +10.58 |" in text
    assert "- minilm-l6: AoE (float gold) − as downloaded (its own pooling: avg): measured otherwise, as the table allows: pooling (cls vs avg" in text
    assert "+8.60" not in text
    assert "- minilm-l6: AoE − as downloaded (its own pooling: avg): no gain, measured otherwise (gold: int vs float)" in text


def test_an_int_gold_row_gains_over_the_backbone_read_against_int_gold():
    """The grid's table2_indomain has the backbone's int-gold row too (its file's by_gold): AoE's int-gold row is set
    against it, its float-gold row against the backbone's headline."""
    from aoe.publish.gains import gain_lines as _gain_lines
    from aoe.config.table_kinds import table_kind

    config = _config(None)
    base = {"backbone": "bert-base-uncased", "rerun": 0, "eval_pooling": ""}
    values = []
    for col in ("stsb", "gis"):
        values += [{**base, "objective": "pretrained", "trainset": "none", "seed": 0, "eval_gold": g, "column": col,
                    "value": {"": 60.0, "float": 60.0, "int": 55.0}[g]} for g in ("", "float", "int")]
        for seed in (42, 43):
            values += [{**base, "objective": "angle_arxiv", "trainset": col, "seed": seed, "eval_gold": g, "column": col,
                        "value": {"": 80.0, "int": 80.0, "float": 82.0}[g] + seed - 42} for g in ("", "int", "float")]
    table = to_json(build_table(pd.DataFrame(values), config["tables"]["table2_indomain"], name="table2_indomain",
                                rows=measured_rows(config, "table2_indomain")))
    text = "\n".join(_gain_lines(table, table_kind("indomain")))
    # STS-B is graded: int 80.5 − 55 and float 82.5 − 60; GIS's 0/1 labels are one gold (the rows read the same files)
    assert "| bert-base-uncased: AoE (arXiv in-domain recipe, from BERT) − as downloaded (int gold) | +25.50 |" in text
    assert "| bert-base-uncased: AoE (arXiv in-domain recipe), float gold − as downloaded | +22.50 |" in text


def test_report_claims_subtract_rows_of_one_gold():
    """REPORT.md's claims on ACL Table 2 (AoE − SBERT, AoE − SimCSE, in-domain avg) subtracted the float-gold baseline
    from the int-gold AoE row: now from its float-gold row, which the line names."""
    from aoe.publish.claims import claims_section

    config = _config(None)
    base = {"backbone": "bert-base-uncased", "rerun": 0, "eval_pooling": ""}
    values = []
    for col in ("stsb", "gis"):
        for seed in (42, 43):
            values += [{**base, "objective": "angle_arxiv", "trainset": col, "seed": seed, "eval_gold": g, "column": col,
                        "value": {"": 84.0, "int": 84.0, "float": 86.0}[g]} for g in ("", "int", "float")]
            for obj in ("sbert", "simcse_sup"):
                values += [{**base, "objective": obj, "trainset": col, "seed": seed, "eval_gold": g, "column": col, "value": 80.0}
                           for g in ("", "float", "int")]
    table = to_json(build_table(pd.DataFrame(values), config["tables"]["table2_indomain"], name="table2_indomain",
                                rows=measured_rows(config, "table2_indomain")))
    text = claims_section([table])
    lines = [line for line in text.splitlines() if "`table2_indomain`" in line]
    assert len(lines) == 2
    for line in lines:
        assert "[ours: AoE (arXiv in-domain recipe), float gold −" in line and "86.00 − 80.00 = +6.00" in line, line
        assert "recipe (" in line  # the difference the table names is printed


def test_table2s_ttests_set_one_gold_against_one_and_say_what_differs():
    """The grid's table2_indomain from result values: SBERT (float gold) is tested against AoE's float-gold row, whose
    seeds are 2 points above its int-gold ones; the note names the recipe difference the table allows, once a pair."""
    from aoe.results.render import _notes

    config = _config(None)
    base = {"backbone": "bert-base-uncased", "rerun": 0, "eval_pooling": "", "column": "stsb", "trainset": "stsb"}
    values = []
    for seed, shift in zip((42, 43, 44), (0.0, 0.5, -0.3)):
        values += [{**base, "objective": "angle_arxiv", "seed": seed, "eval_gold": g, "value": v + shift}
                   for g, v in (("", 84.0), ("int", 84.0), ("float", 86.0))]
        values += [{**base, "objective": "sbert", "seed": seed, "eval_gold": g, "value": 86.0 + 2 * shift}
                   for g in ("", "float", "int")]
    table = build_table(pd.DataFrame(values), config["tables"]["table2_indomain"], name="table2_indomain",
                        rows=measured_rows(config, "table2_indomain"))
    (test,) = [t for t in table.ttests if t.baseline == "SBERT" and t.column == "stsb"]
    assert test.treatment == "AoE (arXiv in-domain recipe), float gold"
    # float − float: 86 + s against 86 + 2s, a mean gap of −0.067, t = −0.29 (int − float: −2.07, t = −8.9)
    assert test.test == "paired" and test.n == 3 and test.statistic == pytest.approx(-0.2857, abs=0.001)
    assert test.named.startswith("measured otherwise, as the table allows: recipe (")
    note = next(n for n in _notes(table, latex=False) if "vs SBERT" in n)
    assert "AoE (arXiv in-domain recipe), float gold vs SBERT (measured otherwise, as the table allows: recipe (" in note


def test_a_table_names_exactly_the_fields_a_measure_has():
    """tables.<name>.compare_across takes the fields of a measure, no other (a misspelt field would allow nothing)."""
    from aoe.config.hparams import read_yaml
    from aoe.results.likeness import FIELDS

    schema = read_yaml(REPO / "schemas" / "config.schema.yaml")
    table = schema["properties"]["tables"]["additionalProperties"]["properties"]["compare_across"]
    assert tuple(table["properties"]) == FIELDS and table["additionalProperties"] is False
    assert set(Measure().as_dict()) == set(FIELDS)


@pytest.mark.parametrize("preset", [None, "studies-cpu.yaml"])
def test_a_studys_rows_differ_only_as_its_table_names(preset):
    """A study's verdict tests its rows against each other: they pass the gate (the batch study names the recipe, the
    pooling study the pooling), and a study table naming nothing is refused with the difference and the fix."""
    from aoe.results.table_model import Table
    from aoe.results.tables import kind_columns
    from aoe.results.verdicts import study_verdict

    config = _config(preset)
    for name in ("study_weights", "study_tau", "study_batch", "study_pooling"):
        spec = config["tables"][name]
        table = Table(name, spec["kind"], "", kind_columns(spec["kind"], spec), _rows(config, name), [],
                      compare_across=dict(spec.get("compare_across") or {}))
        study_verdict(table, spec["study"])
        if spec.get("compare_across"):
            table.compare_across = {}
            with pytest.raises(UnlikeNumbers, match=rf"tables.{name} \(study\): .*name the difference with its source"):
                study_verdict(table, spec["study"])


@pytest.mark.parametrize("preset", [None, *PRESETS])
def test_every_table_builds_through_the_gate(preset):
    """Every table of the grid and of each preset, built as the rule table builds it (its rows with their measures, no
    result yet): each Δ against a paper or reproduction number, each t-test and each study passes the gate."""
    from aoe.results.load import RESULT_COLUMNS

    config = _config(preset)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)
    for table in built_tables(config):
        spec = config["tables"][table]
        if spec["kind"] in ("gis_stats", "train_time"):
            continue
        build_table(empty, spec, rows=measured_rows(config, table), name=table)


def test_a_delta_against_a_paper_number_measured_otherwise_is_refused():
    """ACL Table 2's AoE is against int(gold) (paper_numbers.yaml acl2024_table2.measured): set against the float-gold
    row, the table is not built, the error naming the difference; the reproduction report's number is the float gold's."""
    from aoe.results.load import RESULT_COLUMNS
    from aoe.results.paper_numbers import paper_measure

    assert paper_measure("acl2024_table2/AoE") == {"gold": "int"}
    assert paper_measure("acl2024_table2/SBERT") == {}  # its evaluator is not stated
    assert paper_measure("reproduction_report/table2/AoE-BERT (reproduction)") == {"gold": "float"}
    assert paper_measure("angle_arxiv_table3_ablation/pooling/last-max") == {"gold": "int"}
    config = _config(None)
    spec = config["tables"]["table2_indomain"]
    rows = measured_rows(config, "table2_indomain")
    # the paper's AoE moved onto the float-gold row
    spec = {**spec, "rows": [{**r, "paper": "acl2024_table2/AoE"} if r.get("eval_gold") == "float" and r["objective"] == "angle_arxiv"
                             else {k: v for k, v in r.items() if k != "paper"} for r in spec["rows"]]}
    with pytest.raises(UnlikeNumbers, match=r"vs paper acl2024_table2/AoE: measured otherwise \(gold: float vs int\)"):
        build_table(pd.DataFrame(columns=RESULT_COLUMNS), spec, rows=rows, name="table2_indomain")


def test_planning_refuses_a_row_set_against_a_number_measured_otherwise():
    """The checks at start-up (aoe.plan.check) make the table's own: a float-gold row set against ACL Table 2's AoE
    (int gold) fails before anything trains, naming the row's key; a study naming nothing, too."""
    import copy

    from aoe.config.errors import ConfigError
    from aoe.plan.check import check_config

    config = copy.deepcopy(_config(None))
    rows = config["tables"]["table2_indomain"]["rows"]
    i = next(i for i, r in enumerate(rows) if r.get("eval_gold") == "float")
    rows[i] = {**rows[i], "paper": "acl2024_table2/AoE"}
    with pytest.raises(ConfigError, match=rf"tables.table2_indomain.rows\[{i}\] \(paper: acl2024_table2/AoE\): measured otherwise "
                                          r"\(gold: float vs int\)"):
        check_config(config)
    config = copy.deepcopy(_config(None))
    config["tables"]["study_batch"]["compare_across"] = {}
    with pytest.raises(ConfigError, match=r"tables.study_batch.rows\[1\] \(study\): measured otherwise \(recipe: batch_size 8 vs 16"):
        check_config(config)


def test_the_reproduction_reports_numbers_stand_beside_rows_measured_its_way():
    """Section 3: the report's Table 3 is MTEB's classifier (C 1.0, no grid search), ours SentEval's: set against our
    SentEval row the gate refuses it, so it is a reference row whose note says why there is no Δ. Its Table 1 trained
    batch 512, 4e-5, 2 epochs, 100 warm-up steps: the 2024 command's aoe row is refused beside it, naming each setting,
    and the row that carries its line (aoe_report) trains exactly those."""
    from aoe.results.load import RESULT_COLUMNS
    from aoe.results.paper_numbers import paper_side

    config = _config(None)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)
    t3 = config["tables"]["table3_transfer"]
    ref3 = "reproduction_report/table3/AoE-BERT (reproduction, MTEB classifiers)"
    table = build_table(empty, t3, rows=measured_rows(config, "table3_transfer"), name="table3_transfer")
    assert not any(r.repro_ref for r in table.rows) and ref3 in {r.paper_ref for r in table.references}
    assert any(n.startswith("AoE-BERT (reproduction, MTEB classifiers)") and "MTEB classifier" in n and "transfer (builtin)" in n
               and n.endswith("so no Δ.") for n in table.notes)
    rows = [{**r, "reproduction": ref3} if r.get("objective") == "aoe" and not r.get("eval_pooling") and r["backbone"] == "bert-base-uncased"
            else r for r in t3["rows"]]
    with pytest.raises(UnlikeNumbers, match=r"vs paper reproduction_report/table3/.*\(protocol: transfer \(builtin\) vs MTEB classifier"):
        build_table(empty, {**t3, "rows": rows}, rows=measured_rows(config, "table3_transfer"), name="table3_transfer")

    t1 = {r["label"]: r for r in _rows_dicts(config, "table1_sts")}
    ref1 = "reproduction_report/table1/AoE-BERT (reproduction)"
    ours = Measure.of(t1["AoE (2024 recipe, CLS)"]["measure"])
    with pytest.raises(UnlikeNumbers, match=r"recipe: batch_size 2048 vs 512, epochs 10 vs 2, learning_rate 5e-05 vs 4e-05, "
                                            r"warmup_steps 50 vs 100\)"):
        like_for_like(ours, paper_side(ours, ref1))
    report = Measure.of(t1["AoE (the reproduction report's NLI recipe, official angle score)"]["measure"])
    assert like_for_like(report, paper_side(report, ref1)) == {}
    assert config["tables"]["table1_sts"]["rows"][[r["label"] for r in _rows_dicts(config, "table1_sts")].index(
        "AoE (the reproduction report's NLI recipe, official angle score)")]["reproduction"] == ref1


def _rows_dicts(config: dict, table: str) -> list[dict]:
    return [{**r, "label": r["label"] or r["objective"]} for r in measured_rows(config, table)]


def test_each_ablation_row_names_its_base_and_is_tested_within_it():
    """Section 3: AoE Table 4's AoE / cls / seed rows are the released arXiv AnglE-BERT or the arXiv-era cell, its
    ablations vary the 2024 recipe: each trained row's label names its base, and every t-test pair shares a recipe."""
    config = _config(None)
    spec = config["tables"]["table4_ablation"]
    assert "recipe" not in (spec.get("compare_across") or {})
    rows = _rows(config, "table4_ablation")
    for row in rows:
        if row.objective != RELEASED:
            assert ("2024 recipe" in row.label) != ("arXiv-era recipe" in row.label), row.label
    pairs = [p for p in ttest_pairs(rows, spec, "table4_ablation") if not p.refused and p.baseline.objective not in (PRETRAINED, RELEASED)]
    assert pairs and all(p.treatment.measure.recipe == p.baseline.measure.recipe for p in pairs)


def test_a_released_checkpoint_is_scored_in_each_candidate_evaluation():
    """Section 4: the released AnglE-BERT's 82.37 and 82.43 cannot come from one evaluation: evaluation-only rows score
    CLS and 0.1.1's padded cls_avg at SentEval's other official batch sizes (a -bs<N> name), each its own pooling."""
    from aoe.model.pooling_names import split_senteval_batch

    assert split_senteval_batch("cls_avg_padded-bs32") == ("cls_avg_padded", 32)
    assert split_senteval_batch("cls_avg_padded") == ("cls_avg_padded", None)
    with pytest.raises(ValueError, match="official arithmetic that depends on the batch"):
        split_senteval_batch("cls_avg-bs16")  # masked: the batch changes nothing
    config = _config(None)
    rows = [r for r in measured_rows(config, "released") if r["trainsets"] == ["angle-bert-base-nli-v1"]]
    assert [r["measure"]["pooling"] for r in rows] == ["cls_avg_padded", "cls_avg", "cls", "cls_avg_padded-bs32", "cls_avg_padded-bs2",
                                                       "cls_avg_batchsum"]
    spec = config["tables"]["released"]
    assert [r.get("paper") for r in spec["rows"][:6]].count(None) == 5  # only the 0.1.1 eval.py row has a Δ
