"""Tables from result files: every kind, mean ± sample std over seeds, bold, missing cells, the paper's
numbers and Δ, paired t-tests, LaTeX / Markdown / CSV / JSON twins."""

from __future__ import annotations

from collections import Counter

import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from aoe.config.hparams import YAML_LOADER
from aoe.evaluate.sts import TASKS
from aoe.results.load import load_results, load_sts_results, train_time
from aoe.results.render import to_frame, to_json, to_latex, to_markdown, write_table
from aoe.results.stats import FLAG_RULE, PAIRED, SPREAD_OURS, TTEST_RULE, WELCH, compare_runs, paired_ttest
from aoe.results.paper_numbers import paper_reference
from aoe.results.tables import build_gis_table, build_table, render_table
from tests.test_paper_numbers import numbers_file  # noqa: F401  (the fixture)

COLUMNS = [*TASKS, "avg"]

# (backbone, objective, trainset) -> seed -> STSB score; other tasks derive from it.
STSB = {
    ("tiny_a", "pretrained", "none"): {0: 60.0},
    ("tiny_a", "aoe", "stsb"): {1: 80.0, 2: 82.0, 3: 84.5},
    ("tiny_a", "cosent", "stsb"): {1: 81.0, 2: 78.0},
    ("tiny_b", "pretrained", "none"): {0: 70.0},
    ("tiny_b", "aoe", "stsb"): {1: 75.0, 2: 76.0},
    # ("tiny_b", "cosent", "stsb") is missing on purpose
}


# -- fixture builders ---------------------------------------------------------------------------


def _cell(backbone, objective, trainset, seed):
    # as written by the evaluation rules: the cell comes from the wildcards, all strings
    return {"model": {"cell": {"backbone": backbone, "objective": objective, "trainset": trainset, "seed": str(seed)}}}


def _write(root: Path, backbone, objective, trainset, seed, name, result) -> Path:
    path = root / backbone / objective / trainset / f"seed{seed}" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, **_cell(backbone, objective, trainset, seed)}))
    return path


def write_sts(root, backbone, objective, trainset, seed, scores: dict[str, float | None]) -> Path:
    tasks = {t: (None if scores.get(t) is None else {"spearman": scores[t], "pearson": scores[t] - 1, "n": 10}) for t in TASKS}
    full = all(scores.get(t) is not None for t in TASKS)
    avg = float(np.mean([scores[t] for t in TASKS])) if full else None
    return _write(root, backbone, objective, trainset, seed, "sts.json", {"tasks": tasks, "avg": avg})


def write_transfer(root, backbone, objective, trainset, seed, accs: dict[str, float | None]) -> Path:
    names = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
    tasks = {t: (None if accs.get(t) is None else {"acc": accs[t], "devacc": accs[t] + 1, "ndev": 5, "ntest": 5}) for t in names}
    avg = float(np.mean([accs[t] for t in names])) if all(accs.get(t) is not None for t in names) else None
    return _write(root, backbone, objective, trainset, seed, "transfer.json", {"tasks": tasks, "avg": avg})


def write_nli(root, backbone, objective, trainset, seed, snli, mnli) -> Path:
    return _write(root, backbone, objective, trainset, seed, "nli_probe.json", {"sets": {}, "summary": {"SNLI": snli, "MultiNLI": mnli}})


def write_indomain(root, backbone, objective, trainset, seed, evalset, spearman, float_gold=None) -> Path:
    result = {"evalset": evalset, "dataset": evalset, "split": "test", "spearman": spearman, "pearson": spearman, "n": 9}
    if float_gold is not None:  # scored against int(score) as the headline, as AnglE.evaluate did; the float gold beside it
        result.update(gold="int", by_gold={"int": {"spearman": spearman, "pearson": spearman}, "float": {"spearman": float_gold, "pearson": float_gold}})
    return _write(root, backbone, objective, trainset, seed, f"indomain_{evalset}.json", result)


def write_mteb(root, backbone, objective, trainset, seed, categories: dict[str, float | None], avg) -> Path:
    tasks = {f"T_{c}": {"main_score": v, "category": c} for c, v in categories.items()}
    return _write(root, backbone, objective, trainset, seed, "mteb.json", {"tasks": tasks, "categories": categories, "avg": avg})


def write_flickr(root, backbone, objective, trainset, seed, strict, r1) -> Path:
    result = {"strict_accuracy": strict, "recall": {"@1": r1, "@4": r1 + 5, "@10": r1 + 9}, "queries": 100}
    return _write(root, backbone, objective, trainset, seed, "flickr30k.json", result)


def write_train_job(root: Path, backbone, objective, trainset, seed, job_s, train_s, steps, batch, rows) -> tuple[Path, Path]:
    bench = root / "benchmarks" / backbone / objective / trainset / f"seed{seed}.tsv"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text("s\th:m:s\tmax_rss\n" f"{job_s}\t0:00:10\t100.0\n")
    model = root / "models" / backbone / objective / trainset / f"seed{seed}"
    model.mkdir(parents=True, exist_ok=True)
    config = {
        "train": {"batch_size": batch, "gradient_accumulation_steps": 1, "epochs": 1, "max_steps": steps},
        "token_cache": {"n_examples": rows},
        "summary": {"steps": steps, "examples_seen": steps * batch, "train_seconds": train_s},
        "cell": {"backbone": backbone, "objective": objective, "trainset": trainset, "seed": str(seed)},
    }
    (model / "aoe_config.json").write_text(json.dumps(config))
    (model / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(10, steps + 1, 10)))
    return bench, model


def _scores(stsb: float, seed: int) -> dict[str, float]:
    # distinct values per task and seed, so a column or seed mix-up shows
    s = {task: stsb + k + 0.1 * seed for k, task in enumerate(TASKS)}
    s["STSB"] = stsb
    return s


def _write_results(root: Path) -> list[Path]:
    return [
        write_sts(root, backbone, objective, trainset, seed, _scores(stsb, seed))
        for (backbone, objective, trainset), seeds in STSB.items()
        for seed, stsb in seeds.items()
    ]


SPEC = {"backbones": ["tiny_a", "tiny_b"], "objectives": ["aoe", "cosent"], "trainset": "stsb", "kind": "sts7"}


@pytest.fixture
def results(tmp_path) -> pd.DataFrame:
    return load_sts_results(_write_results(tmp_path / "eval"))


def _row(frame: pd.DataFrame, backbone: str, objective: str) -> pd.Series:
    sel = frame[(frame.backbone == backbone) & (frame.objective == objective)]
    assert len(sel) == 1
    return sel.iloc[0]


def _latex_rows(tex: str) -> dict[str, list[str]]:
    """Body rows of the tabular: label -> cells."""
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule")[0]
    rows = {}
    for line in body.splitlines():
        line = line.strip()
        if line.endswith("\\\\") and not line.startswith("\\multicolumn"):
            label, *cells = [c.strip() for c in line[:-2].split(" & ")]
            rows[label] = cells
    return rows


def _md_rows(md: str) -> dict[str, list[str]]:
    rows = {}
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("| Model"):
            label, *cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[label] = cells
    return rows


# -- STS tables: mean / std / n, bold, missing --------------------------------------------------


def test_load_sts_results_long_format(results):
    n_files = sum(len(s) for s in STSB.values())
    assert len(results) == n_files * len(COLUMNS)
    assert results.seed.dtype.kind == "i"
    one = results[(results.backbone == "tiny_a") & (results.objective == "aoe") & (results.seed == 2)]
    assert one.set_index("task").spearman["STSB"] == 82.0
    assert one.set_index("task").spearman["STS13"] == pytest.approx(82.0 + 1 + 0.2)


def test_build_table_mean_std_n(results, caplog):
    with caplog.at_level(logging.WARNING, logger="aoe.results.tables"):
        frame = to_frame(build_table(results, SPEC, "sts7"))
    assert len(frame) == 6  # 2 backbones x (pretrained, aoe, cosent)
    for (backbone, objective, _), seeds in STSB.items():
        row = _row(frame, backbone, objective)
        assert row.n == len(seeds)
        for col in COLUMNS:
            values = [np.mean(list(_scores(v, s).values())) if col == "avg" else _scores(v, s)[col] for s, v in seeds.items()]
            assert row[f"{col}_mean"] == pytest.approx(np.mean(values)), (backbone, objective, col)
            if len(values) > 1:
                assert row[f"{col}_std"] == pytest.approx(np.std(values, ddof=1)), (backbone, objective, col)
            else:
                assert math.isnan(row[f"{col}_std"])
    # the aoe STSB std by hand: values 80, 82, 84.5, mean 82.1667, squares sum 10.1667, / 2 -> sqrt(5.0833)
    assert _row(frame, "tiny_a", "aoe")["STSB_std"] == pytest.approx(math.sqrt(5.083333333), abs=1e-6)

    missing = _row(frame, "tiny_b", "cosent")
    assert missing.n == 0
    assert all(math.isnan(missing[f"{c}_mean"]) for c in COLUMNS)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("missing result: tiny_b/cosent/stsb STS12" in m for m in warnings)
    assert not any("tiny_a" in m for m in warnings)


def test_build_table_without_pretrained(results):
    frame = to_frame(build_table(results, {**SPEC, "include_pretrained": False}, "stsb"))
    assert list(frame.objective) == ["aoe", "cosent", "aoe", "cosent"]
    assert [c for c in frame.columns if c.endswith("_mean")] == ["STSB_mean"]


def test_latex_bold_missing_and_format(results):
    tex = to_latex(build_table(results, {**SPEC, "caption": "STS results"}, "sts7", name="sts7"))
    for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert rule in tex
    assert tex.index("\\toprule") < tex.index("\\midrule") < tex.index("\\bottomrule")
    assert "\\label{tab:sts7}" in tex and "\\caption{STS results}" in tex
    assert "STS-B" in tex and "SICK-R" in tex and "Avg." in tex

    rows = _latex_rows(tex)
    aoe_a = rows["tiny\\_a AoE, stsb (n=3)"]
    cosent_a = rows["tiny\\_a CoSENT, stsb (n=2)"]
    pre_a = rows["tiny\\_a as downloaded (n=1)"]
    cosent_b = rows["tiny\\_b CoSENT, stsb (n=0)"]
    aoe_b = rows["tiny\\_b AoE, stsb (n=2)"]
    pre_b = rows["tiny\\_b as downloaded (n=1)"]

    stsb = COLUMNS.index("STSB")
    # tiny_a STSB: aoe mean 82.17 beats cosent 79.50 and pretrained 60.00; std 2.25 (= sqrt(5.0833))
    assert aoe_a[stsb] == "\\textbf{82.17 $\\pm$ 2.25}"
    assert cosent_a[stsb] == "79.50 $\\pm$ 2.12"
    assert pre_a[stsb] == "60.00"  # one seed: no std
    # tiny_b is bolded within tiny_b, independently of tiny_a's better numbers
    assert aoe_b[stsb] == "\\textbf{75.50 $\\pm$ 0.71}"
    assert pre_b[stsb] == "70.00"
    # the missing cell prints as a dash in every column, never as 0; and the notes list it
    assert cosent_b == ["–"] * len(COLUMNS)
    assert "Missing (8): tiny\\_b/cosent/stsb STS12" in tex
    for group in ((aoe_a, cosent_a, pre_a), (aoe_b, cosent_b, pre_b)):
        for c in range(len(COLUMNS)):
            assert sum(r[c].startswith("\\textbf") for r in group) == 1
    for cells in (aoe_a, cosent_a, pre_a, aoe_b, cosent_b, pre_b):
        for cell in cells:
            if cell != "–":
                assert re.fullmatch(r"(\\textbf\{)?-?\d+\.\d\d( \$\\pm\$ \d+\.\d\d)?\}?", cell), cell


def test_latex_is_a_standalone_document_with_escapes(results):
    spec = {**SPEC, "caption": "100% of runs_x & more"}
    tex = to_latex(build_table(results, spec, "sts7", name="my_table"))
    lines = tex.splitlines()
    assert lines[0] == "\\documentclass{article}" and "\\usepackage{booktabs}" in lines
    assert lines.count("\\begin{document}") == 1 and lines[-1] == "\\end{document}"
    # one longtable (a table longer than a page goes on), the rows written once and set twice to measure their width
    assert tex.count("\\begin{longtable}") == tex.count("\\end{longtable}") == 1
    assert tex.count("\\def\\tablerows{") == 1 and tex.count("\\tablerows") == 3
    assert "\\caption{100\\% of runs\\_x \\& more}" in tex and "\\label{tab:my_table}" in tex
    # every row has as many cells as the header; no unescaped specials outside math and commands
    header = next(line for line in lines if line.startswith("Model & "))
    n = header.count(" & ")
    for line in _latex_rows(tex):
        assert "_" not in line.replace("\\_", "")
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule")[0]
    for line in body.splitlines():
        if line.endswith("\\\\") and not line.startswith("\\multicolumn"):
            assert line.count(" & ") == n, line
    assert "ttest\\_rel" in tex and "ttest_rel" not in tex.replace("ttest\\_rel", "")
    assert not re.search(r"(?<!\\)%", tex)  # a bare % would comment out the rest of a line
    assert "Δ" not in tex and "±" not in tex and "†" not in tex


def test_no_bold_for_a_single_row():
    res = pd.DataFrame([{"backbone": "b", "objective": "aoe", "trainset": "t", "seed": 1, "column": "STSB", "value": 70.0}])
    table = build_table(res, {"backbones": ["b"], "objectives": ["aoe"], "trainset": "t", "include_pretrained": False}, "stsb")
    assert "\\textbf" not in to_latex(table) and "**" not in to_markdown(table)


def test_rows_with_seed_subsets_and_sections(results):
    spec = {
        "kind": "ablation",
        "trainset": "stsb",
        "rows": [
            {"section": "objective", "backbone": "tiny_a", "objective": "aoe", "label": "AoE"},
            {"section": "objective", "backbone": "tiny_a", "objective": "cosent", "label": "CoSENT"},
            {"section": "random seed", "backbone": "tiny_a", "objective": "aoe", "seeds": [2], "label": "fixed seed 2"},
        ],
    }
    table = build_table(results, spec)
    assert [r.n for r in table.rows] == [3, 2, 1]
    assert table.rows[2].mean("avg") == pytest.approx(np.mean(list(_scores(82.0, 2).values())))
    md = to_markdown(table)
    assert "| *objective* |" in md and "| *random seed* |" in md
    assert md.index("*objective*") < md.index("CoSENT") < md.index("*random seed*") < md.index("fixed seed 2")
    tex = to_latex(table)
    assert "\\multicolumn{2}{l}{\\textit{random seed}} \\\\" in tex


def test_fixed_seed_row_averages_the_reruns_of_one_seed(tmp_path):
    # AoE Table 4: "fixed random seed" = trainings of seed 42 (results/.../seed42-rerunK), "different
    # random seeds" = each seed's first training; a rerun never enters a row that does not ask for it
    fixed = {"42": 80.0, "42-rerun1": 80.2, "42-rerun2": 79.9}
    varying = {"42": 80.0, "43": 78.0, "44": 83.0}
    paths = [write_sts(tmp_path, "b", "aoe", "nli", run, {t: v for t in TASKS}) for run, v in {**fixed, **varying}.items()]
    results = load_results("ablation", paths)
    assert sorted(zip(results.seed, results.rerun))[-1] == (44, 0) and (42, 2) in set(zip(results.seed, results.rerun))
    spec = {"kind": "ablation", "trainset": "nli", "rows": [
        {"section": "random seed", "backbone": "b", "objective": "aoe", "seeds": [42], "reruns": 3, "label": "fixed seed 42"},
        {"section": "random seed", "backbone": "b", "objective": "aoe", "label": "different random seeds"}]}
    table = build_table(results, spec)
    f, v = table.rows
    assert f.values["avg"] == pytest.approx(fixed) and v.values["avg"] == pytest.approx(varying)
    assert (f.n, v.n) == (3, 3)
    assert f.std("avg") == pytest.approx(np.std(list(fixed.values()), ddof=1))
    assert to_json(table)["rows"][0]["values"]["avg"].keys() == fixed.keys()


# -- the paper's numbers, Δ, reference rows --------------------------------------------------


def test_paper_rows_and_delta(results, numbers_file):
    spec = {
        **SPEC,
        "paper": {"tiny_a": {"aoe": "aoe_table2/AoE-BERT"}, "bert": {"aoe": "aoe_table1/BERT-base/AoE-BERT"}},
        "paper_reference": ["aoe_table2/AnglE-BERT", "aoe_table2/AoE-BERT"],
    }
    table = build_table(results, spec, numbers_file=numbers_file)
    aoe = next(r for r in table.rows if (r.backbone, r.objective) == ("tiny_a", "aoe"))
    assert aoe.paper == {"STSB": 86.26, "SICKR": 80.1, "avg": 82.43}
    assert aoe.delta("STSB") == pytest.approx(82.1666667 - 86.26)
    assert math.isnan(aoe.delta("STS12"))  # no paper number
    # a used reference is not repeated; the mapping's entry for a backbone not in the table is a reference row
    assert [r.label for r in table.references] == ["AnglE-BERT (paper: AoE Tab. 2)", "AoE-BERT (paper: Li & Li, AoE, ACL 2024, Table 1)"]
    frame = to_frame(table)
    ours = _row(frame, "tiny_a", "aoe")
    assert ours["STSB_paper"] == 86.26 and ours["STSB_paper_std"] == 0.19
    assert ours["STSB_delta"] == pytest.approx(82.1666667 - 86.26)
    assert frame.reference.sum() == 2
    ref = frame[frame.reference].iloc[0]
    assert ref["STSB_mean"] == 85.0 and ref["STS12_mean"] == 75.09 and math.isnan(ref["n"])

    md = _md_rows(to_markdown(table))
    assert md["AoE-BERT (paper: AoE Tab. 2)"][COLUMNS.index("STSB")] == "86.26 ± 0.19"
    # beside Δ the gap a different seed alone makes: seeds 80, 82, 84.5 (s = 2.255), t(0.975, 2) · s · √(1 + 1/3) = 11.20
    assert md["Δ (ours − paper)"][COLUMNS.index("STSB")] == "-4.09 (±11.20)"
    assert aoe.bound("STSB").half == pytest.approx(4.302653 * np.std([80.0, 82.0, 84.5], ddof=1) * math.sqrt(4 / 3), rel=1e-5)
    assert md["Δ (ours − paper)"][COLUMNS.index("STS12")] == "–"
    assert ours["STSB_bound"] == pytest.approx(aoe.bound("STSB").half) and ours["STSB_bound_from"] == SPREAD_OURS
    assert math.isnan(ours["STS12_bound"]) and ours["STS12_bound_from"] == ""  # no paper number, no Δ, no bound
    data = next(r for r in to_json(table)["rows"] if r["backbone"] == "tiny_a" and r["objective"] == "aoe")
    assert data["bound"]["STSB"] == pytest.approx(aoe.bound("STSB").half) and data["flag"] == {"STSB": "", "SICKR": "", "avg": ""}
    assert data["bound_from"]["STSB"] == SPREAD_OURS and "STS12" not in data["bound"]
    tex = to_latex(table)
    ref_line = next(line for line in tex.splitlines() if line.startswith("\\textit{AnglE-BERT"))
    assert "\\textbf" not in ref_line  # reference rows never compete for bold
    # in LaTeX the bound goes under the number, smaller: a Δ cell no wider than a mean ± std cell
    assert "\\quad $\\Delta$ (ours $-$ paper)" in tex and "\\begin{tabular}[t]{@{}c@{}}$-4.09$\\\\{\\scriptsize ($\\pm$11.20)}\\end{tabular}" in tex
    assert _latex_rows(tex)["tiny\\_a AoE, stsb (n=3)"][COLUMNS.index("STSB")].startswith("\\textbf")


def test_explicit_row_paper_key(results, numbers_file):
    spec = {"kind": "stsb", "trainset": "stsb", "rows": [{"backbone": "tiny_b", "objective": "aoe", "paper": "aoe_table2/AoE-BERT"}]}
    table = build_table(results, spec, numbers_file=numbers_file)
    assert table.rows[0].paper == {"STSB": 86.26} and table.references == []
    assert table.rows[0].delta("STSB") == pytest.approx(75.5 - 86.26)


def test_reproduction_is_a_second_line_with_its_own_delta(results, numbers_file):
    """A row's `reproduction` (explicit rows) or the table's `reproduction` mapping: a second reference line under
    our row with Δ = ours − reproduction, in every output; an entry whose row is absent is a reference row."""
    spec = {
        **SPEC,
        "paper": {"tiny_a": {"aoe": "aoe_table2/AoE-BERT"}},
        "reproduction": {"tiny_a": {"aoe": "aoe_table1/BERT-base/AoE-BERT"}, "bert": {"aoe": "aoe_table2/AnglE-BERT"}},
    }
    table = build_table(results, spec, numbers_file=numbers_file)
    aoe = next(r for r in table.rows if (r.backbone, r.objective) == ("tiny_a", "aoe"))
    assert aoe.paper["STSB"] == 86.26 and aoe.repro == {"STS12": 75.26, "avg": 82.43}
    assert aoe.repro_delta("avg") == pytest.approx(aoe.mean("avg") - 82.43) and math.isnan(aoe.repro_delta("STSB"))
    assert [r.label for r in table.references] == ["AnglE-BERT (paper: AoE Tab. 2)"]
    lines = [line for line in to_markdown(table).splitlines() if line.startswith("| ")]
    at = next(i for i, line in enumerate(lines) if line.startswith("| tiny_a AoE"))
    assert lines[at + 1].startswith("|   AoE-BERT (paper: AoE Tab. 2)") and lines[at + 2].startswith("|   Δ (ours − paper)")
    assert lines[at + 3].startswith("|   AoE-BERT (paper: Li & Li, AoE, ACL 2024, Table 1)")
    repro_delta = [c.strip() for c in lines[at + 4].strip("|").split(" | ")]
    assert repro_delta[0] == "Δ (ours − reproduction)"
    assert repro_delta[1 + COLUMNS.index("avg")] == f"{aoe.mean('avg') - 82.43:+.2f} (±{aoe.repro_bound('avg').half:.2f})"
    assert repro_delta[1 + COLUMNS.index("STSB")] == "–"
    assert "\\quad $\\Delta$ (ours $-$ reproduction)" in to_latex(table)
    ours = _row(to_frame(table), "tiny_a", "aoe")
    assert ours["avg_reproduction"] == 82.43 and ours["avg_reproduction_delta"] == pytest.approx(aoe.mean("avg") - 82.43)
    assert ours["avg_reproduction_bound"] == pytest.approx(aoe.repro_bound("avg").half)
    data = next(r for r in to_json(table)["rows"] if r["backbone"] == "tiny_a" and r["objective"] == "aoe")
    assert data["reproduction"] == {"STS12": 75.26, "avg": 82.43} and set(data["reproduction_delta"]) == {"STS12", "avg"}
    assert any("independent reproduction" in n for n in to_json(table)["notes"])
    # an explicit row's own key
    rows_spec = {"kind": "stsb", "trainset": "stsb", "rows": [{"backbone": "tiny_b", "objective": "aoe", "reproduction": "aoe_table2/AoE-BERT"}]}
    row = build_table(results, rows_spec, numbers_file=numbers_file).rows[0]
    assert row.repro == {"STSB": 86.26} and row.paper == {} and row.repro_delta("STSB") == pytest.approx(75.5 - 86.26)


def test_paper_numbers_keep_their_printed_decimals(results, tmp_path):
    numbers = tmp_path / "n.yaml"
    numbers.write_text("t:\n  rows:\n    A: {STS-B: 61.646, SICK-R: 80.1}\n  std:\n    A: {STS-B: 0.125}\n")
    spec = {**SPEC, "paper": {"tiny_a": {"aoe": "t/A"}}}
    md = _md_rows(to_markdown(build_table(results, spec, numbers_file=numbers)))
    paper = md["A (paper: t)"]
    assert paper[COLUMNS.index("STSB")] == "61.646 ± 0.125"  # never rounded to the table's 2 decimals
    assert paper[COLUMNS.index("SICKR")] == "80.10"


def test_no_paper_numbers_note(results):
    md = to_markdown(build_table(results, SPEC))
    assert "No paper numbers for this table" in md


def test_delta_is_defined_only_where_a_row_has_the_papers(results, numbers_file):
    """The notes define Δ = ours − paper only where a Δ line is printed; a table whose paper rows are all on
    another backbone (a preset on a small model) says so instead, and its CSV has no empty Δ columns."""
    elsewhere = {**SPEC, "paper": {"bert": {"aoe": "aoe_table1/BERT-base/AoE-BERT", "cosent": "aoe_table2/AnglE-BERT"}}}
    table = build_table(results, elsewhere, numbers_file=numbers_file, name="t")
    # in the numbers file's order (its aoe_table2 before its aoe_table1)
    assert [(r.paper_backbone, r.paper_objective) for r in table.references] == [("bert", "cosent"), ("bert", "aoe")]
    md, tex, frame = to_markdown(table), to_latex(table), to_frame(table)
    assert "Δ = ours − paper" not in md and "$\\Delta$ = ours" not in tex and "Δ (ours − paper)" not in md
    assert ("- The paper's rows are on bert; ours are on tiny_a and tiny_b: no row of ours is one of the paper's, "
            "so no Δ.") in md
    assert "italic rows: the paper's rows that are no row of ours" in md
    assert not [c for c in frame.columns if c.endswith(("_delta", "_reproduction"))]
    data = to_json(table)
    assert {(r["paper_backbone"], r["paper_objective"]) for r in data["rows"] if r["reference"]} == {("bert", "aoe"), ("bert", "cosent")}
    # the paper on one of our backbones, for other objectives only
    other = build_table(results, {**SPEC, "paper": {"tiny_a": {"sbert": "aoe_table2/AoE-BERT"}}}, numbers_file=numbers_file)
    assert "The paper's rows on tiny_a are other objectives than ours: no row of ours is one of the paper's, so no Δ." in to_markdown(other)
    # a row with the paper's: the Δ line, its definition and the CSV's Δ columns
    matched = build_table(results, {**SPEC, "paper": {"tiny_a": {"aoe": "aoe_table2/AoE-BERT"}}}, numbers_file=numbers_file)
    md = to_markdown(matched)
    assert "Δ = ours − paper" in md and "|   Δ (ours − paper) |" in md and "no row of ours is one of the paper's" not in md
    assert "STSB_delta" in to_frame(matched).columns and "STSB_reproduction" not in to_frame(matched).columns


def _paper_lines(table) -> list[tuple[str, str]]:
    """(label, reference) of every paper line a table prints: under our rows and as reference rows."""
    out = [(r.paper_label, r.paper_ref) for r in table.rows if r.paper_ref]
    out += [(r.repro_label, r.repro_ref) for r in table.rows if r.repro_ref]
    return out + [(r.label, r.paper_ref) for r in table.references]


def test_no_two_paper_rows_of_a_table_share_a_label():
    """AoE Table 1 prints "SBERT ⋆" and "SimCSE ⋆" under LLaMA2-7B and again under LLaMA2-13B with other
    numbers: each configured table, with our rows or with none of them (a preset on another backbone),
    names every paper row apart, by the backbone the paper groups it under."""
    import yaml

    from aoe.results.load import RESULT_COLUMNS
    from tests.workflow_utils import REPO

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)
    seen = 0
    for name, spec in config["tables"].items():
        if spec["kind"] == "gis_stats":
            continue
        for variant in (spec, {**spec, "rows": [{"backbone": "minilm-l6", "objective": "aoe"}]}):
            table = build_table(empty, variant, name=name)
            labels: dict[str, set[str]] = {}
            for label, ref in _paper_lines(table):
                labels.setdefault(label, set()).add(ref)
            assert all(len(refs) == 1 for refs in labels.values()), (name, {k: v for k, v in labels.items() if len(v) > 1})
            # the paper's lines of the Markdown twin: italic reference rows and the lines under ours
            md_labels = [line.strip("|").split(" | ")[0].strip("* ") for line in to_markdown(table).splitlines()
                         if line.startswith(("| *", "|   ")) and "Δ" not in line and re.search(r"\| -?\d", line)]  # not a section's line
            # one paper row under two of ours (an evaluation-only variant row beside its cells' own) prints twice
            shared = sum(n - 1 for key in ("paper_ref", "repro_ref")
                         for n in Counter(getattr(r, key) for r in table.rows if getattr(r, key)).values())
            assert len(md_labels) == len(set(md_labels)) + shared, (name, md_labels)
            seen += len(labels)
    assert seen > 100
    table1 = build_table(empty, {**config["tables"]["table1_sts"], "rows": [{"backbone": "minilm-l6", "objective": "aoe"}]})
    refs = {r.paper_ref: r.label for r in table1.references}
    assert refs["acl2024_table1/LLaMA7B/SBERT ⋆"] == "SBERT ⋆ (LLaMA2-7B) (paper: Li & Li, AoE, ACL 2024, Table 1)"
    assert refs["acl2024_table1/LLaMA13B/SimCSE ⋆"] == "SimCSE ⋆ (LLaMA2-13B) (paper: Li & Li, AoE, ACL 2024, Table 1)"
    assert refs["acl2024_table1/BERT-base/ConSERT"] == "ConSERT (paper: Li & Li, AoE, ACL 2024, Table 1)"  # unique: as printed
    assert "acl2024_table1/BERT-base/SimCSE" not in refs  # under the row at SimCSE's recipe, not apart
    # with our own rows too (the full grid: ours train the ⋆ baselines with AoE's recipe, so the paper's ⋆ rows are
    # references beside them, issue 51), and in the LaTeX twin
    full = build_table(empty, config["tables"]["table1_sts"])
    assert "SBERT ⋆ (LLaMA2-13B) (paper: Li & Li, AoE, ACL 2024, Table 1)" in {r.label for r in full.references}
    assert not {r.paper_label for r in full.rows if r.objective in ("sbert", "simcse_sup")} - {""}
    assert "SBERT $\\star$ (LLaMA2-7B)" in to_latex(full)


def test_paper_rows_told_apart_by_their_group_key_without_a_group_label(results, tmp_path):
    numbers = tmp_path / "n.yaml"
    numbers.write_text("t:\n  groups:\n    small:\n      X: {STS-B: 70.0}\n    large:\n      X: {STS-B: 80.0}\n      Y: {STS-B: 81.0}\n")
    table = build_table(results, {**SPEC, "paper_reference": ["t/small/X", "t/large/X", "t/large/Y"]}, numbers_file=numbers)
    assert [r.label for r in table.references] == ["X (small) (paper: t)", "X (large) (paper: t)", "Y (paper: t)"]


# -- t-tests over seeds ------------------------------------------------------------------------


def test_paired_ttest_matches_scipy():
    a, b = [82.1, 83.0, 82.6, 81.9], [80.2, 81.5, 81.0, 80.9]
    p, t, note = paired_ttest(a, b)
    ref = stats.ttest_rel(a, b)
    assert p == pytest.approx(ref.pvalue) and t == pytest.approx(ref.statistic) and note == ""
    assert paired_ttest([1.0], [2.0]) == (None, None, "no test: 1 seed")
    assert paired_ttest([], []) == (None, None, "no test: 0 seeds")
    assert paired_ttest([1.0, 2.0], [1.0, 2.0])[0] is None


def test_compare_runs_tests_over_seeds_never_over_reruns():
    # the same seeds on both rows: paired over them (a seed of one row only is left out)
    a = {"1": 82.1, "2": 83.0, "3": 82.6, "4": 81.9, "5": 84.0}
    b = {"1": 80.2, "2": 81.5, "3": 81.0, "4": 80.9}
    c = compare_runs(a, b)
    ref = stats.ttest_rel([82.1, 83.0, 82.6, 81.9], [80.2, 81.5, 81.0, 80.9])
    assert (c.test, c.n_a, c.n_b, c.note) == (PAIRED, 4, 4, "") and c.p == pytest.approx(ref.pvalue) and c.statistic == pytest.approx(ref.statistic)
    assert c.diff == pytest.approx(1.5) and c.text() == f"p = {ref.pvalue:.3f} (paired, 4 seeds)"
    # reruns of one seed differ by GPU noise only: never samples, so no test (the old code ran Welch's over them, p = 0.033)
    a = {"42": 82.5, "42-rerun1": 82.6, "42-rerun2": 82.3}
    b = {"42": 81.9, "42-rerun1": 82.1, "42-rerun2": 81.6}
    c = compare_runs(a, b, "AoE", "SBERT")
    assert c.p is None and c.test == "" and c.note == "no test: AoE is 3 reruns of seed 42 (GPU noise, no seed's spread)"
    # a seed's reruns count once, by their mean: seeds 1 and 2 of each row, paired over those means
    c = compare_runs({"1": 80.0, "1-rerun1": 81.0, "2": 83.0, "2-rerun1": 82.0, "3": 84.0},
                     {"1": 79.0, "1-rerun1": 79.0, "2": 80.0, "2-rerun1": 80.0})
    assert (c.test, c.n_a) == (PAIRED, 2) and c.p == pytest.approx(stats.ttest_rel([80.5, 82.5], [79.0, 80.0]).pvalue)
    # different seeds on the two rows: nothing to pair, Welch over each row's seeds
    c = compare_runs({"1": 80.0, "2": 82.0, "3": 84.5}, {"4": 78.0, "5": 78.5})
    assert (c.test, c.n_a, c.n_b) == (WELCH, 3, 2) and c.text().endswith("(Welch, 3 vs 2 seeds)")
    assert c.p == pytest.approx(stats.ttest_ind([80.0, 82.0, 84.5], [78.0, 78.5], equal_var=False).pvalue)
    # one seed on either side, or a row not trained: no test, and why
    assert compare_runs({"1": 80.0, "2": 82.0}, {"0": 70.0}, "AoE", "as downloaded", trained_b=False).note == (
        "no test: as downloaded is not trained (no seed)")
    assert compare_runs({"1": 80.0}, {"1": 70.0, "2": 71.0}, "AoE", "SBERT").note == "no test: one seed of AoE"
    assert compare_runs({}, {"1": 70.0, "2": 71.0}, "AoE", "SBERT").note == "no test: no run of AoE"
    assert compare_runs({"1": 80.0, "2": 80.0}, {"3": 70.0, "4": 70.0}).p is None  # no spread: undefined


def test_detectable_gap_is_the_gap_a_test_finds_at_80_percent_power():
    """The smallest true gap a two-sided t-test at 5% finds with probability 0.8 (noncentral t): about 2.8 standard
    errors with many degrees of freedom (1.96 + 0.84), far more with few (one pair of seeds: a t(0.975, 1) of 12.7)."""
    from aoe.results.stats import detectable_gap

    assert detectable_gap(1.0, 1000) == pytest.approx(2.80, abs=0.01)
    assert detectable_gap(0.5, 4) == pytest.approx(0.5 * detectable_gap(1.0, 4))
    # four degrees of freedom: 3.76 (the normal-theory t(0.975, 4) + t(0.8, 4) = 3.72 underestimates it)
    assert detectable_gap(1.0, 4) == pytest.approx(3.76, abs=0.01) and detectable_gap(1.0, 1) > 15
    assert detectable_gap(0.0, 4) is None and detectable_gap(1.0, 0.5) is None
    # simulated: a paired test over 5 seeds at that gap rejects about 80% of the time
    rng = np.random.default_rng(0)
    gap = detectable_gap(1.0 / math.sqrt(5), 4)
    d = rng.normal(gap, 1.0, (4000, 5))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(5))
    assert 0.77 < np.mean(2 * stats.t.sf(np.abs(t), 4) < 0.05) < 0.83


def test_table_ttests_over_matched_seeds(results):
    table = build_table(results, SPEC)
    tests = {(t.backbone, t.baseline, t.column): t for t in table.ttests}
    # tiny_a: aoe seeds 1,2,3 vs cosent seeds 1,2 -> matched seeds 1,2
    t = tests[("tiny_a", "CoSENT", "STSB")]
    ref = stats.ttest_rel([80.0, 82.0], [81.0, 78.0])
    assert (t.test, t.n) == (PAIRED, 2) and t.p == pytest.approx(ref.pvalue)
    # no test pooled over (seed, dataset) pairs: the datasets of one model are not independent samples;
    # the Avg. column's test over per-seed averages stands for them
    assert not any(c == "pooled" for _, _, c in tests)
    avg = tests[("tiny_a", "CoSENT", "avg")]
    a_avg = [np.mean([_scores(v, s)[c] for c in TASKS]) for s, v in {1: 80.0, 2: 82.0}.items()]
    b_avg = [np.mean([_scores(v, s)[c] for c in TASKS]) for s, v in {1: 81.0, 2: 78.0}.items()]
    assert avg.p == pytest.approx(stats.ttest_rel(a_avg, b_avg).pvalue)
    # the backbone as downloaded draws no seed: no test (the old code paired its one value with every seed)
    pre = tests[("tiny_a", "as downloaded", "STSB")]
    assert pre.p is None and pre.text() == "no test: as downloaded is not trained (no seed)"
    # tiny_b: cosent is missing -> no test; tiny_b vs as downloaded exists, without a p
    assert ("tiny_b", "CoSENT", "STSB") not in tests and tests[("tiny_b", "as downloaded", "STSB")].p is None
    md = to_markdown(table)
    assert TTEST_RULE in md and f"p = {ref.pvalue:.3f} (paired, 2 seeds)" in md
    assert "pooled" not in md and "no test: as downloaded is not trained (no seed)" in md


def test_ttest_demo_case_prints_no_p(tmp_path):
    """The CPU demo's table1_sts: one as-downloaded value against two seeds of AoE. The old note printed
    "STS15 p = 0.0006 (n = 2) ... pooled p = 1.8e-05 (n = 14, 7 datasets x 2 seeds)"."""
    root = tmp_path / "eval"
    files = [write_sts(root, "minilm", "pretrained", "none", 0, {t: 70.0 + i for i, t in enumerate(TASKS)})]
    files += [write_sts(root, "minilm", "aoe", "stsb", seed, {t: 80.0 + i + 0.3 * seed for i, t in enumerate(TASKS)}) for seed in (42, 43)]
    spec = {"kind": "sts7", "trainset": "stsb", "backbones": ["minilm"], "objectives": ["aoe"]}
    table = render_table("table1_sts", spec, files)
    assert table.ttests and all(t.p is None and t.text() == "no test: as downloaded is not trained (no seed)" for t in table.ttests)
    # said once, not 8 times, and without the test rule: there is no test to read it for
    notes = to_json(table)["notes"]
    assert "No t-test between this table's rows: as downloaded is not trained (no seed)." in notes
    assert not any(TTEST_RULE in n or "p = " in n or "pooled" in n for n in notes)


def test_no_ttest_over_reruns_of_one_seed(tmp_path):
    """AoE Table 4's fixed-seed protocol on two rows (seed 42 trained three times each): the reruns differ by GPU
    noise only, which a test over them would call a difference (Welch's gave p = 0.033 here), so none is made and the
    note says why."""
    runs = {"aoe": {"42": 82.5, "42-rerun1": 82.6, "42-rerun2": 82.3}, "sbert": {"42": 81.9, "42-rerun1": 82.1, "42-rerun2": 81.6}}
    files = [write_sts(tmp_path, "b", o, "nli", run, {t: v for t in TASKS}) for o, vals in runs.items() for run, v in vals.items()]
    spec = {"kind": "ablation", "trainset": "nli", "rows": [
        {"backbone": "b", "objective": o, "seeds": [42], "reruns": 3, "label": o} for o in runs]}
    table = build_table(load_results("ablation", files), spec)
    (t,) = [t for t in table.ttests if t.column == "avg"]
    assert t.p is None and t.text() == "no test: aoe is 3 reruns of seed 42 (GPU noise, no seed's spread)"
    assert stats.ttest_ind(list(runs["aoe"].values()), list(runs["sbert"].values()), equal_var=False).pvalue < 0.05


def test_flag_rule_is_in_the_notes_of_a_table_with_a_delta(results, numbers_file):
    with_delta = build_table(results, {**SPEC, "paper": {"tiny_a": {"aoe": "aoe_table2/AoE-BERT"}}}, numbers_file=numbers_file)
    assert f"{FLAG_RULE}." in to_json(with_delta)["notes"] and FLAG_RULE in to_markdown(with_delta)
    # no Δ printed, nothing to bound: no rule
    assert not any(FLAG_RULE in n for n in to_json(build_table(results, SPEC))["notes"])


def test_ttest_one_seed_is_na(tmp_path):
    root = tmp_path / "eval"
    files = [write_sts(root, "b", o, "t", 1, {"STSB": v}) for o, v in (("aoe", 80.0), ("sbert", 78.0))]
    table = render_table("x", {"kind": "stsb", "trainset": "t", "backbones": ["b"], "objectives": ["aoe", "sbert"], "include_pretrained": False}, files)
    (t,) = table.ttests
    assert t.p is None and t.text() == "no test: one seed of AoE"
    assert "No t-test between this table's rows: one seed of AoE." in to_markdown(table)
    assert "No t-test between this table's rows: one seed of AoE." in to_latex(table)


def test_table_json_lists_the_files_it_read_with_sha256_and_cell(tmp_path):
    import hashlib

    root = tmp_path / "eval"
    files = [write_sts(root, "b", o, "t", 1, {"STSB": v}) for o, v in (("aoe", 80.0), ("sbert", 78.0))]
    spec = {"kind": "stsb", "trainset": "t", "backbones": ["b"], "objectives": ["aoe", "sbert"], "include_pretrained": False}
    sources = to_json(render_table("x", spec, files))["sources"]
    assert [s["path"] for s in sources] == [str(f) for f in files]
    assert [s["sha256"] for s in sources] == [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    assert [(s["cell"]["objective"], s["cell"]["seed"]) for s in sources] == [("aoe", "1"), ("sbert", "1")]
    # a train-time table reads model folders: each stands for its aoe_config.json
    bench, model = write_train_job(tmp_path, "b", "aoe", "stsb", 1, job_s=130.0, train_s=100.0, steps=50, batch=32, rows=800)
    tt = {"kind": "train_time", "trainset": "stsb", "backbones": ["b"], "objectives": ["aoe"], "include_pretrained": False}
    sources = render_table("tt", tt, [str(bench), str(model)]).sources
    assert [s["path"] for s in sources] == [str(bench), str(model / "aoe_config.json")]
    assert sources[1]["sha256"] == hashlib.sha256((model / "aoe_config.json").read_bytes()).hexdigest()


def test_ttest_treatment_and_disable(results):
    table = build_table(results, {**SPEC, "ttest": {"treatment": "cosent"}})
    assert {t.treatment for t in table.ttests} == {"CoSENT"}
    assert build_table(results, {**SPEC, "ttest": {"enabled": False}}).ttests == []


# -- other kinds -----------------------------------------------------------------------------


def test_indomain_columns_avg_and_pretrained(tmp_path, numbers_file):
    root = tmp_path / "eval"
    files = [
        write_indomain(root, "b", "aoe", "stsb", 1, "stsb", 85.0),
        write_indomain(root, "b", "aoe", "stsb", 2, "stsb", 86.0),
        write_indomain(root, "b", "aoe", "gis", 1, "gis", 70.0),
        write_indomain(root, "b", "aoe", "gis", 2, "gis", 72.0),
        write_indomain(root, "b", "pretrained", "none", 0, "stsb", 60.0),
        write_indomain(root, "b", "pretrained", "none", 0, "gis", 50.0),
        # a model trained on stsb and scored on gis is not an in-domain cell: never read
        write_indomain(root, "b", "aoe", "stsb", 1, "gis", 1.0),
    ]
    spec = {"kind": "indomain", "trainsets": ["stsb", "gis"], "backbones": ["b"], "objectives": ["aoe"], "paper": {"b": {"aoe": "indomain/AoE"}}}
    table = render_table("t2", spec, files, numbers_file=numbers_file)
    assert [c.key for c in table.columns] == ["stsb", "gis", "avg"]
    assert [c.header for c in table.columns] == ["STS-B", "GIS", "Avg."]
    pre, aoe = table.rows
    assert pre.values == {"stsb": {"0": 60.0}, "gis": {"0": 50.0}, "avg": {"0": 55.0}}
    assert aoe.values["gis"] == {"1": 70.0, "2": 72.0}
    assert aoe.values["avg"] == {"1": 77.5, "2": 79.0}  # per seed, then mean ± std
    assert aoe.mean("avg") == 78.25 and aoe.delta("avg") == pytest.approx(0.25)
    assert aoe.paper_std == {"stsb": 0.2, "gis": 0.3}
    md = _md_rows(to_markdown(table))
    assert md["b AoE, in-domain (n=2)"] == ["**85.50 ± 0.71**", "**71.00 ± 1.41**", "**78.25 ± 1.06**"]


def test_transfer_null_tasks_are_dashes(tmp_path, caplog):
    root = tmp_path / "eval"
    files = [
        write_transfer(root, "b", "aoe", "stsb", 1, {"TREC": 80.0, "MRPC": 70.0}),
        write_transfer(root, "b", "aoe", "stsb", 2, {"TREC": 82.0, "MRPC": 71.0}),
        write_transfer(root, "b", "pretrained", "none", 0, {"TREC": 60.0, "MRPC": 68.0}),
    ]
    spec = {"kind": "transfer", "trainset": "stsb", "rows": [{"backbone": "b", "objective": "pretrained"}, {"backbone": "b", "objective": "aoe"}]}
    with caplog.at_level(logging.WARNING, logger="aoe.results.tables"):
        table = render_table("t3", spec, files)
    assert [c.key for c in table.columns] == ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "avg"]
    md = _md_rows(to_markdown(table))
    assert md["b AoE, stsb (n=2)"] == ["–"] * 5 + ["**81.00 ± 1.41**", "**70.50 ± 0.71**", "–"]
    assert any("missing result: b/aoe/stsb MR" in r.getMessage() for r in caplog.records)
    assert any("missing result: b/pretrained/none avg" in r.getMessage() for r in caplog.records)
    assert not re.search(r"(?<![\d.])0\.00", to_latex(table))  # a missing value is never printed as 0


def test_nli_probe_average(tmp_path):
    root = tmp_path / "eval"
    files = [write_nli(root, "b", "aoe", "nli", s, snli, mnli) for s, snli, mnli in ((1, 60.0, 50.0), (2, 62.0, 54.0))]
    table = render_table("t5", {"kind": "nli_probe", "trainset": "nli", "backbones": ["b"], "objectives": ["aoe"], "include_pretrained": False}, files)
    (row,) = table.rows
    assert row.values == {"MultiNLI": {"1": 50.0, "2": 54.0}, "SNLI": {"1": 60.0, "2": 62.0}, "avg": {"1": 55.0, "2": 58.0}}


def test_mteb_categories(tmp_path, numbers_file):
    root = tmp_path / "eval"
    files = [
        write_mteb(root, "b", "aoe", "nli", 42, {"sts": 80.0, "classification": 70.0, "retrieval": None}, None),
        write_mteb(root, "c", "aoe", "nli", 42, {"sts": 82.0, "classification": 68.0, "retrieval": 40.0}, 63.3),
    ]
    spec = {"kind": "mteb", "rows": [{"backbone": "b", "objective": "aoe", "trainset": "nli"}, {"backbone": "c", "objective": "aoe", "trainset": "nli"}],
            "paper_reference": ["claims/mteb/AoE_avg"]}
    table = render_table("mteb", spec, files, numbers_file=numbers_file)
    # MTEB's category order, then the average; a category nobody has is not a column
    assert [c.key for c in table.columns] == ["classification", "retrieval", "sts", "avg"]
    assert [c.header for c in table.columns] == ["Class.", "Retr.", "STS", "Avg."]
    md = _md_rows(to_markdown(table))
    assert md["b AoE, nli (n=1)"] == ["70.00", "–", "80.00", "–"]
    assert md["c AoE, nli (n=1)"] == ["68.00", "40.00", "82.00", "63.30"]
    assert md["*AoE_avg*"] == ["–", "–", "–", "64.64"]
    assert "| *Claims* | | | | |" in to_markdown(table)  # each document's rows under a line naming it


def test_flickr30k(tmp_path):
    root = tmp_path / "eval"
    files = [write_flickr(root, "b", o, "nli", 1, s, r) for o, s, r in (("angle_arxiv", 12.0, 30.0), ("sbert", 5.0, 20.0))]
    table = render_table("f", {"kind": "flickr30k", "trainset": "nli", "backbones": ["b"], "objectives": ["sbert", "angle_arxiv"], "include_pretrained": False}, files)
    md = _md_rows(to_markdown(table))
    assert md["b AnglE, nli (n=1)"] == ["**12.00**", "**30.00**", "**35.00**", "**39.00**"]
    assert {t.treatment for t in table.ttests} == {"AnglE"}  # no aoe row: AnglE is the treatment
    assert "No paper numbers" in to_markdown(table)


def test_train_time_from_benchmark_and_model(tmp_path):
    bench, model = write_train_job(tmp_path, "b", "aoe", "stsb", 1, job_s=130.0, train_s=100.0, steps=50, batch=32, rows=800)
    t = train_time(bench, model)
    assert t["job_seconds"] == 130.0 and t["train_seconds"] == 100.0
    assert t["epochs"] == pytest.approx(50 * 32 / 800) and t["sec_per_epoch"] == pytest.approx(50.0)
    inputs = [str(p) for p in (bench, model)]
    for obj, job, loop in (("sbert", 70.0, 40.0), ("simcse_sup", 90.0, 60.0)):
        inputs += [str(p) for p in write_train_job(tmp_path, "b", obj, "stsb", 1, job, loop, 50, 32, 800)]
    inputs += [str(p) for p in write_train_job(tmp_path, "b", "aoe", "stsb", 2, 140.0, 110.0, 50, 32, 800)]
    spec = {"kind": "train_time", "trainset": "stsb", "backbones": ["b"], "objectives": ["sbert", "simcse_sup", "aoe"], "include_pretrained": False}
    table = render_table("tt", spec, inputs)
    assert [c.key for c in table.columns] == ["sec_per_epoch", "train_seconds", "job_seconds", "epochs"]
    aoe = table.rows[2]
    assert aoe.values["sec_per_epoch"] == {"1": 50.0, "2": 55.0} and aoe.values["job_seconds"] == {"1": 130.0, "2": 140.0}
    md = _md_rows(to_markdown(table))
    assert md["b SBERT, stsb (n=1)"][0] == "**20.0**"  # fastest is bold (lower is better)
    assert md["b AoE, stsb (n=2)"][0] == "52.5 ± 3.5"
    assert md["b AoE, stsb (n=2)"][3] == "2.000 ± 0.000"  # epochs: never bold
    assert table.ttests == []
    assert "epochs trained = examples seen" in to_markdown(table)


def test_train_time_from_metrics_when_no_summary(tmp_path):
    bench, model = write_train_job(tmp_path, "b", "aoe", "stsb", 1, 30.0, 20.0, 40, 16, 320)
    cfg = json.loads((model / "aoe_config.json").read_text())
    del cfg["summary"]
    (model / "aoe_config.json").write_text(json.dumps(cfg))
    t = train_time(bench, model)
    assert t["epochs"] == pytest.approx(40 * 16 / 320) and t["train_seconds"] is None
    assert t["sec_per_epoch"] == pytest.approx(30.0 / 2)  # the job's wall time when the loop time is unknown


GIS_STATS = {
    "pairs": 30,
    "splits": ["train", "valid", "test"],
    "tokenizer": "bert-base-uncased",
    "long_threshold": 512,
    "table7": {
        "train": {"positive": 10, "negative": 8, "total": 18},
        "valid": {"positive": 3, "negative": 3, "total": 6},
        "test": {"positive": 2, "negative": 4, "total": 6},
        "all": {"positive": 15, "negative": 15, "total": 30},
    },
    "long_text_share": {"train": 0.6, "valid": 0.5, "test": 0.25},
    "paper_long_text_share": {"train": 0.6103, "valid": 0.6085, "test": 0.6050},
}
GIS_PAPER = {"GIS": {s: f"acl2024_table7_gis/{s}" for s in ("train", "valid", "test")}}


def test_gis_stats(tmp_path):
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(GIS_STATS))
    table = render_table("table_gis_stats", {"kind": "gis_stats", "caption": "GIS", "paper": GIS_PAPER}, [path])
    assert [r.label for r in table.rows] == ["train", "valid", "test", "all"]
    train = table.rows[0]
    assert train.values["total"] == {0: 18.0} and train.values["long_share"] == {0: 60.0}
    # AoE Table 7's counts and §4's share of long texts, from the packaged paper_numbers.yaml
    assert train.paper == {"positive": 9457.0, "negative": 9108.0, "total": 18565.0, "long_share": 61.03}
    assert train.delta("long_share") == pytest.approx(-1.03)
    md = _md_rows(to_markdown(table))
    assert md["train"] == ["10", "8", "18", "60.00"]
    assert md["train (paper: AoE ACL 2024, Table 7 and §4)"] == ["9457", "9108", "18565", "61.03"]
    assert md["all"] == ["15", "15", "30", "–"]
    assert md["Δ (ours − paper)"] == ["-805", "-737", "-1542", "-35.50"]  # the last Δ line: the test split
    assert "\\textbf" not in to_latex(table)
    assert "\\S{}" in to_latex(table)  # § spelled out for pdflatex
    assert table.ttests == []


def test_gis_stats_without_reference(tmp_path):
    # stats.json's own copy of the paper's share is not a reference: the spec's paper mapping is
    table = build_gis_table(GIS_STATS, {"caption": ""}, numbers_file=tmp_path / "none.yaml")
    assert all(not r.paper for r in table.rows)
    table = build_gis_table(GIS_STATS, {"paper": {"GIS": {"validation": "acl2024_table7_gis/valid"}}})
    assert all(not r.paper for r in table.rows)
    assert "Paper splits with no split of ours: validation." in to_markdown(table)


# -- files -----------------------------------------------------------------------------------------


def test_write_table_twins(results, tmp_path, numbers_file):
    spec = {**SPEC, "caption": "c", "paper": {"tiny_a": {"aoe": "aoe_table2/AoE-BERT"}}}
    table = build_table(results, spec, numbers_file=numbers_file, name="t")
    out = tmp_path / "out"
    out.mkdir()
    write_table(table, out / "t.tex", out / "t.csv", out / "t.md", out / "t.json")
    frame = pd.read_csv(out / "t.csv")
    assert {"objective", "n", "avg_mean", "avg_std", "STSB_paper", "STSB_delta"} <= set(frame.columns)
    md = (out / "t.md").read_text()
    assert md.startswith("### t\n") and "| Model | STS12 |" in md
    data = json.loads((out / "t.json").read_text())
    assert data["name"] == "t" and data["kind"] == "sts7" and len(data["rows"]) == 6
    aoe = next(r for r in data["rows"] if r["backbone"] == "tiny_a" and r["objective"] == "aoe")
    assert aoe["values"]["STSB"] == {"1": 80.0, "2": 82.0, "3": 84.5}
    assert aoe["paper_std"] == {"STSB": 0.19} and aoe["delta"]["STSB"] == pytest.approx(82.1666667 - 86.26)
    assert aoe["delta"]["STS12"] is None  # NaN is null in JSON
    assert data["ttests"] and all("text" in t for t in data["ttests"])
    # the Markdown and LaTeX twins show the same numbers
    for cell in ("82.17 ± 2.25", "86.26 ± 0.19", "-4.09"):
        assert cell in md
        assert cell.replace(" ± ", " $\\pm$ ").replace("-4.09", "$-4.09$") in (out / "t.tex").read_text()


def test_latex_compiles_with_pdflatex(results, tmp_path, numbers_file):
    """Each table is a standalone document: pdflatex turns it into a PDF (CI installs Debian's TeX)."""
    import os
    import shutil
    import subprocess

    from aoe.config.rows import grid_paper_rows

    exe = shutil.which("pdflatex")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("pdflatex not found: .ci/run installs texlive-latex-base and texlive-latex-recommended")
        pytest.skip("pdflatex not installed")
    spec = {
        **SPEC,
        "caption": "100% of runs_x & more: † ⋆ ± Δ",
        "paper": {"tiny_a": {"aoe": "aoe_table2/AoE-BERT"}},
        "paper_reference": ["aoe_table2/AnglE-BERT"],
    }
    # an underscore in the name: the label must survive LaTeX's .aux round trip
    write_table(build_table(results, spec, numbers_file=numbers_file, name="table_x_1"), *(tmp_path / f"t.{e}" for e in ("tex", "csv", "md", "json")))
    # AoE Table 1 beside rows on another backbone: its told-apart ⋆ rows and the note saying why there is no Δ
    demo = {**_config_table("table1_sts"), "rows": [{"backbone": "tiny_a", "objective": "pretrained"}, {"backbone": "tiny_a", "objective": "aoe"}]}
    # with every paper row of the grid's Table 1 (the reproduction report's among them), as the demo shows them
    grid_rows = grid_paper_rows({"tables": {"table1_sts": _config_table("table1_sts")}}, "table1_sts")
    write_table(build_table(results, demo, name="demo", paper_rows=grid_rows), *(tmp_path / f"d.{e}" for e in ("tex", "csv", "md", "json")))
    assert "SBERT \\textdagger{}" in (tmp_path / "d.tex").read_text()
    assert "no row of ours is one of the paper's, so no $\\Delta$" in (tmp_path / "d.tex").read_text()
    # the flag rule and the bound beside Δ, spelled out for pdflatex
    assert "t(0.975, k$-$1)$\\cdot$$\\sigma$$\\cdot$$\\surd$(1/m + 1/k)" in (tmp_path / "t.tex").read_text()
    assert "($\\pm$" in (tmp_path / "t.tex").read_text()
    for doc in ("t", "d"):
        for _ in range(2):  # the second pass reads the .aux the first wrote
            out = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", f"{doc}.tex"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stdout[-3000:]
        assert (tmp_path / f"{doc}.pdf").stat().st_size > 1000
        # within the page (issue 62: the demo's Table 1 ran 97pt off it)
        assert "Overfull \\hbox" not in (tmp_path / f"{doc}.log").read_text(errors="replace")


# -- the AnglE tables from config.yaml, and paper_numbers.yaml against the papers' text -------------


def _config_table(name: str) -> dict:
    import yaml

    from tests.workflow_utils import REPO

    return yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)["tables"][name]


def test_angle_ablation_is_in_domain_stsb_with_the_papers_rows(tmp_path):
    spec = _config_table("angle_table3_ablation")
    root = tmp_path / "eval"
    files = [write_indomain(root, "bert-base-uncased", "angle_arxiv", "stsb", s, "stsb", v, v + 2) for s, v in ((42, 86.0), (43, 86.5))]
    files += [write_indomain(root, "bert-base-uncased", "wo_ibn", "stsb", s, "stsb", v) for s, v in ((42, 85.0), (43, 85.4))]
    table = render_table("angle_table3_ablation", spec, files)
    assert [c.key for c in table.columns] == ["stsb"]
    by_label = {r.label: r for r in table.rows}
    assert by_label["AnglE-BERT-all"].paper == {"stsb": 86.26} and by_label["cls"].paper == {"stsb": 86.26}
    assert by_label["AnglE-BERT-all"].delta("stsb") == pytest.approx(86.25 - 86.26)
    # the full model against the float gold: its files' by_gold, no paper number, no Δ (issue 61)
    floats = by_label["AnglE-BERT-all, float gold"]
    assert floats.mean("stsb") == pytest.approx(88.25) and not floats.paper and floats.n == 2
    # every ablation is a row of its own, trained on STS-B, with the paper's number beside it
    assert by_label["without ibn"].delta("stsb") == pytest.approx(85.2 - 86.00)
    papers = {label: row.paper["stsb"] for label, row in by_label.items() if row.paper}
    # the ISP-detection ablation: the paper prints no score (§4.4: "about 0.18% performance drop")
    # and the masked poolings beside the official arithmetic's rows: ours, no paper number
    assert set(by_label) - set(papers) == {"only ibn without ISP detection", "cls-last-avg (masked)", "last-avg (masked)",
                                           "last-max (masked)", "AnglE-BERT-all, float gold"}
    assert papers == {"AnglE-BERT-all": 86.26, "without ibn": 86.00, "without angle": 85.30, "only cosine": 85.28, "only ibn": 72.48,
                      "only angle": 85.15, "cls": 86.26, "cls-last-avg": 85.81, "last-avg": 84.15, "last-max": 79.76, "first-last-avg": 81.99}
    assert [spec_row["objective"] for spec_row in spec["rows"] if spec_row["section"] == "pooling"] == [
        "angle_arxiv", "angle_pool_cls_avg", "angle_pool_avg", "angle_pool_max", "angle_pool_first_last_avg",
        "angle_pool_cls_avg_masked", "angle_pool_avg_masked", "angle_pool_max_masked"]
    assert not table.references
    md = to_markdown(table)
    assert "| *pooling* |" in md and "first-last-avg" in md and "81.99" in md


def test_angle_tables_show_the_papers_numbers():
    rows = _config_table("angle_table2_nontransfer")["rows"]
    refs = {r["objective"]: r["paper"] for r in rows if r.get("paper")}
    cols = ["mrpc", "stsb", "qqp", "qnli", "gis", "avg"]
    assert paper_reference(refs["angle_arxiv"], columns=cols)[1] == {
        "mrpc": 62.20, "stsb": 86.26, "qqp": 76.54, "qnli": 72.19, "gis": 70.55, "avg": 73.55}
    assert paper_reference("angle_arxiv_table2_nontransfer/AnglE-RAN", columns=cols)[1]["gis"] == 71.25
    spec = _config_table("angle_flickr30k")
    refs = [*spec["paper"]["bert-base-uncased"].values(), *spec["paper_reference"]]
    got = {r.rsplit("/", 1)[1]: paper_reference(r, columns=["strict_accuracy"])[1]["strict_accuracy"] for r in refs}
    assert got == {"AnglE": 12.9, "SimCSE (supervised)": 10.4, "SBERT": 5.2}
    # the baselines train AoE's NLI recipe, not their own: the paper's numbers stand apart, no Δ (issue 51)
    assert set(spec["paper"]["bert-base-uncased"]) == {"angle_arxiv"}
    # one row carries the paper's AnglE-BERT: the cells scored as the script scored them (int gold), not the float-gold variant
    assert [(r["objective"], r.get("eval_gold")) for r in rows if r.get("paper")] == [("angle_arxiv", None)]
    ens = paper_reference("angle_arxiv_table4_llm/llm_supervised/AnglE-BERT + Ensemble", columns=["STSB"])[1]
    assert ens == {"STSB": 82.01}


def test_table_kind_registry_is_the_schema_enum_and_each_kind_renders(tmp_path):
    """Every kind the config schema accepts has one registry entry (aoe.config.table_kinds.KINDS) and back;
    each kind that reads evaluation results builds a table from a result file of its suite."""
    import yaml

    from aoe.config.table_kinds import KINDS, table_kind
    from tests.workflow_utils import REPO

    schema = yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)
    enum = schema["properties"]["tables"]["additionalProperties"]["properties"]["kind"]["enum"]
    assert list(enum) == list(KINDS)
    with pytest.raises(ValueError, match="unknown table kind 'stsx'; known: sts7, stsb"):
        table_kind("stsx")
    results = {
        "sts": {"tasks": {t: {"spearman": 70.0 + i} for i, t in enumerate(TASKS)}, "avg": 73.0},
        "transfer": {"tasks": {t: {"acc": 80.0} for t in ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")}, "avg": 80.0},
        "nli_probe": {"summary": {"MultiNLI": 60.0, "SNLI": 62.0}},
        "mteb": {"categories": {"sts": 75.0, "classification": 65.0}, "avg": 70.0},
        "flickr30k": {"strict_accuracy": 40.0, "recall": {"@1": 50.0}},
        "indomain": {"evalset": "stsb", "spearman": 85.0},
    }
    for name, kind in KINDS.items():
        if kind.suite is None:
            continue
        file = f"{kind.suite}_stsb.json" if kind.column_per_trainset else f"{kind.suite}.json"
        # an objective comparison judges two rows (its comparison: which the paper puts higher)
        objectives = ["aoe", "cosent"] if kind.compares_rows else ["aoe"]
        frame = load_results(name, [_write(tmp_path / name, "b", o, "stsb", 1, file, results[kind.suite]) for o in objectives])
        spec = {"kind": name, "trainset": "stsb", "backbones": ["b"], "objectives": objectives, "include_pretrained": False}
        if kind.compares_rows:
            spec["comparison"] = {"claim": "AoE outperforms CoSENT", "source": "aoe-acl2024.txt l.134-137", "higher": "aoe", "lower": "cosent"}
        table = build_table(frame, spec, name=name)
        values = [table.rows[0].mean(c.key) for c in table.columns]
        assert table.columns and not all(math.isnan(v) for v in values), name


def test_ttest_treatment_per_backbone(tmp_path):
    """AnglE's tables hold AnglE-BERT (angle_arxiv) and AnglE-LLaMA (the grid's aoe cell): each
    backbone is tested against its own treatment."""
    root = tmp_path / "eval"
    files = []
    for backbone, objective, base in (("bert", "angle_arxiv", 80.0), ("bert", "sbert", 75.0), ("llama", "aoe", 85.0), ("llama", "sbert", 84.0)):
        files += [write_sts(root, backbone, objective, "nli", s, {t: base + s + 0.1 * i for i, t in enumerate(TASKS)}) for s in (1, 2, 3)]
    spec = {"kind": "sts7", "trainset": "nli", "rows": [
        {"backbone": "bert", "objective": "sbert"}, {"backbone": "bert", "objective": "angle_arxiv"},
        {"backbone": "llama", "objective": "sbert"}, {"backbone": "llama", "objective": "aoe"}]}
    table = render_table("t", spec, files)
    assert {(t.backbone, t.treatment, t.baseline) for t in table.ttests} == {("bert", "AnglE", "SBERT"), ("llama", "AoE", "SBERT")}


def test_angle_transfer_tables_follow_the_arxiv_versions(tmp_path):
    """angle_transfer_sts: arXiv v1 Table 1 (= v3 Table 2) rows with the paper's numbers and Δ; v2's
    (angle-arxiv-b) unprompted LLaMA avg / max / last rows as ours, each from its own evaluation of the
    downloaded backbone, with v2's numbers; v2's trained LLaMA rows as reference rows; each AnglE number that is a
    released checkpoint's (82.37, 85.96, the repository image's 85.90) against that checkpoint too, the BERT one
    read from its 0.1.1-scored pool file; angle_transfer_tasks: AnglE-LLaMA's 91.38 against the grid's
    llama-2-7b aoe/nli cell (the October 2023 command whole, ACL's AoE-LLaMA cell too)."""
    root = tmp_path / "eval"
    files = [write_sts(root, "bert-base-uncased", "angle_arxiv", "nli", s, {t: 80.0 for t in TASKS}) for s in (42, 43)]
    files += [write_sts(root, "llama-2-7b", "aoe", "nli", s, {t: 85.0 for t in TASKS}) for s in (42, 43)]
    files.append(_pooled(write_sts(root, "bert-base-uncased", "released", "angle-bert-base-nli-v1", 0, {t: 82.0 for t in TASKS}), "cls_avg_padded"))
    files += [write_sts(root, "llama-2-7b", "released", key, 0, {t: 86.0 for t in TASKS}) for key in ("angle-llama-7b-nli-v2", "angle-llama-7b-nli-20231027")]
    files += [write_sts(root, "llama-2-7b", "pretrained", variant, 0, {t: score for t in TASKS})
              for variant, score in (("none", 60.0), ("no_prompt_avg", 45.0), ("no_prompt_max", 46.0), ("no_prompt_last", 30.0))]
    table = render_table("angle_transfer_sts", _config_table("angle_transfer_sts"), files)
    by_label = {r.label: r for r in table.rows}
    assert by_label["AnglE-BERT"].paper["avg"] == 82.37 and by_label["AnglE-BERT"].delta("avg") == pytest.approx(80.0 - 82.37)
    assert by_label["AnglE-LLaMA2-7B (Oct-2023 command)"].paper["avg"] == 85.96 and by_label["AnglE-LLaMA2-7B (Oct-2023 command)"].n == 2
    assert not by_label["AnglE-BERT (evaluated cls)"].paper  # an evaluation the 82.37 did not come from: no Δ
    released = {label: by_label[label] for label in by_label if ": released " in label}
    assert {label: (r.mean("avg"), r.paper["avg"], r.eval_pooling) for label, r in released.items()} == {
        "AnglE-BERT: released angle-bert-base-uncased-nli-en-v1 (0.1.1 eval)": (82.0, 82.37, "cls_avg_padded"),
        "AnglE-LLaMA2-7B: released angle-llama-7b-nli-v2": (86.0, 85.96, ""),
        "AnglE-LLaMA2-7B: released angle-llama-7b-nli-20231027": (86.0, 85.90, "")}
    assert by_label["LLaMA2-7B (prompt, last token)"].paper["avg"] == 65.06
    assert by_label["LLaMA2-7B (prompt, last token)"].mean("avg") == 60.0
    for label, ours, paper in (("-avg", 45.0, 47.24), ("-max", 46.0, 47.49), ("-last", 30.0, 28.38)):
        row = by_label[f"LLaMA-2 7B {label} (no prompt)"]
        assert (row.mean("avg"), row.n, row.paper["avg"]) == (ours, 1, paper)
        assert row.delta("avg") == pytest.approx(ours - paper)
    assert [r.section for r in table.rows] == ["unsupervised"] + ["unsupervised (arXiv v2)"] * 3 + ["supervised"] * 10
    refs = {r.paper_label: r.paper.get("avg") for r in table.references}
    assert refs["AnglE-LLaMA-2-7B (paper: AnglE arXiv, transfer STS table)"] == 78.02  # angle-arxiv-b
    assert 85.90 not in refs.values() and 75.69 in refs.values()  # the image's AnglE-LLaMA is a row's now; CoSENT-BERT
    # SBERT † and SimCSE-LLaMA2-7B ⋆ (ours: AoE's recipe, issue 51): the paper's numbers, no Δ; SimCSE-BERT (81.57)
    # sits under the row at SimCSE's own recipe
    assert 47.24 not in refs.values() and len(table.references) == 17 and 85.24 in refs.values() and 81.57 not in refs.values()
    assert by_label["SimCSE-BERT (SimCSE's recipe, our NLI triplets)"].paper["avg"] == 81.57
    frame = to_frame(table)
    assert frame.loc[frame.label == "LLaMA-2 7B -max (no prompt)", "trainset"].tolist() == ["no_prompt_max"]
    files = [write_transfer(root, "llama-2-7b", "aoe", "nli", s, {t: 90.0 for t in ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]})
             for s in (42, 43)]
    table = render_table("angle_transfer_tasks", _config_table("angle_transfer_tasks"), files)
    llama = next(r for r in table.rows if r.label == "AnglE-LLaMA (Oct-2023 command)")
    assert llama.paper["avg"] == 91.38 and llama.delta("avg") == pytest.approx(90.0 - 91.38)
    assert len(table.references) == 6


def _pooled(path: Path, pooling: str) -> Path:
    """A result file as rule evaluate_*_eval_pooling writes it: <suite>.pool-<pooling>.json, the cell record naming the pooling."""
    record = json.loads(path.read_text())
    record["model"]["cell"]["eval_pooling"] = pooling
    pooled = path.with_name(f"{path.stem}.pool-{pooling}.json")
    pooled.write_text(json.dumps(record))
    path.unlink()
    return pooled


def test_transfer_rows_read_their_pool_files(tmp_path):
    """Issue 36: a transfer table's evaluation-only row reads transfer.pool-<pooling>.json (rule
    evaluate_transfer_eval_pooling), the row without the key the cell's transfer.json: AnglE-BERT's two rows
    in AnglE's transfer-task table (no paper number: no Δ), AoE-BERT's two in Table 3, both against 86.96."""
    names = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
    root = tmp_path / "eval"
    files = []
    for seed in (42, 43):
        # each pool file first: it is written as transfer.json, then renamed
        files.append(_pooled(write_transfer(root, "bert-base-uncased", "angle_arxiv", "nli", seed, {t: 84.0 for t in names}), "cls"))
        files.append(write_transfer(root, "bert-base-uncased", "angle_arxiv", "nli", seed, {t: 85.0 for t in names}))
        files.append(_pooled(write_transfer(root, "bert-base-uncased", "aoe", "nli", seed, {t: 86.0 for t in names}), "cls_avg_batchsum"))
        files.append(write_transfer(root, "bert-base-uncased", "aoe", "nli", seed, {t: 87.0 for t in names}))
    assert sorted(p.name for p in files[:4]) == ["transfer.json", "transfer.json", "transfer.pool-cls.json", "transfer.pool-cls_avg_batchsum.json"]
    angle = {r.label: r for r in render_table("angle_transfer_tasks", _config_table("angle_transfer_tasks"), files).rows}
    own, cls = angle["AnglE-BERT"], angle["AnglE-BERT (evaluated cls)"]
    assert (own.eval_pooling, cls.eval_pooling) == ("", "cls")
    assert (own.mean("avg"), cls.mean("avg"), own.n, cls.n) == (85.0, 84.0, 2, 2)
    assert not own.paper and not cls.paper  # AnglE's transfer table has no AnglE-BERT row
    table3 = render_table("table3_transfer", _config_table("table3_transfer"), files)
    aoe = [r for r in table3.rows if r.backbone == "bert-base-uncased" and r.objective == "aoe"]
    assert [(r.label, r.eval_pooling, r.mean("avg")) for r in aoe] == [
        ("AoE (2024 recipe, CLS)", "", 87.0), ("AoE (2024 recipe, evaluated cls_avg, 0.4.6 eval_nli.py)", "cls_avg_batchsum", 86.0)]
    # issue 61: ACL's AoE-BERT (86.96) stands beside the arXiv-era cell and the released checkpoint, the 2024 recipe without Δ
    assert not any(r.paper for r in aoe)
    arxiv = [r for r in table3.rows if r.objective == "angle_arxiv"]
    assert arxiv[0].mean("avg") == 85.0 and arxiv[0].paper["avg"] == 86.96 and arxiv[0].delta("MR") == pytest.approx(85.0 - 83.00)
    # issue 69: the same cells scored with their training CLS, the t-test's treatment beside CLS-scored baselines, no Δ
    assert [(r.eval_pooling, r.mean("avg"), r.paper) for r in arxiv[1:]] == [("cls", 84.0, {})]
    assert to_json(table3)["rows"][table3.rows.index(aoe[1])]["eval_pooling"] == "cls_avg_batchsum"
    # without its pool files the variant row is missing, never filled from the cell's own transfer.json
    own_only = [f for f in files if ".pool-" not in f.name]
    angle = {r.label: r for r in render_table("angle_transfer_tasks", _config_table("angle_transfer_tasks"), own_only).rows}
    assert not angle["AnglE-BERT (evaluated cls)"].values["avg"] and angle["AnglE-BERT"].mean("avg") == 85.0


def test_released_tables_put_each_checkpoint_beside_its_published_numbers(tmp_path):
    """The `released` tables (AoE Table 8's checkpoints as downloaded): each row a checkpoint (objective
    released, trainset its key), labelled with its hub id, the published number under it with Δ; UAE has
    no published STS number, the transfer rows have none either (the papers' rows are context)."""
    root = tmp_path / "eval"
    ckpts = {"angle-bert-base-nli-v1": "bert-base-uncased", "angle-llama-7b-nli-20231027": "llama-2-7b",
             "angle-llama-7b-nli-v2": "llama-2-7b", "angle-llama-13b-nli": "llama-2-13b", "uae-large-v1": "bert-large-uncased"}
    # AnglE-BERT's 82.37 row reads its checkpoint under 0.1.1's padded cls_avg (the official eval.py's), as the
    # evaluation-only rule writes it (the cell record names the pooling); its own masked cls_avg: a variant row
    pooled = write_sts(root, "bert-base-uncased", "released", "angle-bert-base-nli-v1", 0, {t: 82.0 for t in TASKS})
    pooled = pooled.rename(pooled.with_name("sts.pool-cls_avg_padded.json"))
    record = json.loads(pooled.read_text())
    record["model"]["cell"]["eval_pooling"] = "cls_avg_padded"
    pooled.write_text(json.dumps(record))
    files = [write_sts(root, backbone, "released", key, 0, {t: 85.0 for t in TASKS}) for key, backbone in ckpts.items()]
    table = render_table("released", _config_table("released"), [*files, pooled])
    rows = {r.label: r for r in table.rows}
    # the candidate evaluations of 82.37 / 82.43 (issue 69 §4), no result file here: rows without values or Δ
    candidates = [r for r in rows if r.startswith("SeanLee97/angle-bert-base-uncased-nli-en-v1 (") and "masked" not in r]
    assert [rows[r].eval_pooling for r in candidates] == ["cls", "cls_avg_padded-bs32", "cls_avg_padded-bs2", "cls_avg_batchsum"]
    assert not any(rows[r].paper or rows[r].values["avg"] for r in candidates)
    assert [r for r in rows if r not in candidates] == [
                          "SeanLee97/angle-bert-base-uncased-nli-en-v1", "SeanLee97/angle-bert-base-uncased-nli-en-v1 (evaluated cls_avg, masked)",
                          "SeanLee97/angle-llama-7b-nli-20231027",
                          "SeanLee97/angle-llama-7b-nli-v2", "SeanLee97/angle-llama-13b-nli", "WhereIsAI/UAE-Large-V1"]
    official, masked = rows["SeanLee97/angle-bert-base-uncased-nli-en-v1"], rows["SeanLee97/angle-bert-base-uncased-nli-en-v1 (evaluated cls_avg, masked)"]
    assert (official.eval_pooling, masked.eval_pooling) == ("cls_avg_padded", "")
    assert official.mean("avg") == pytest.approx(82.0) and masked.mean("avg") == pytest.approx(85.0)
    # the published number came from 0.1.1's padded arithmetic: the row scored so carries the Δ, the masked variant none
    assert official.paper["avg"] == 82.37 and not masked.paper
    assert official.delta("avg") == pytest.approx(82.0 - 82.37)
    assert to_json(table)["rows"][0]["eval_pooling"] == "cls_avg_padded"
    # without the pool file the 82.37 row is missing, never filled from the masked sts.json
    table = render_table("released", _config_table("released"), files)
    assert not table.rows[0].values["avg"] and any("[SeanLee97/angle-bert-base-uncased-nli-en-v1] avg" in m for m in table.missing)
    table = render_table("released", _config_table("released"), [*files, pooled])
    rows = {r.label: r for r in table.rows}
    assert rows["SeanLee97/angle-llama-7b-nli-v2"].delta("avg") == pytest.approx(85.0 - 85.96)
    assert rows["SeanLee97/angle-llama-13b-nli"].paper["STSB"] == 89.69
    assert rows["WhereIsAI/UAE-Large-V1"].paper == {} and all(r.n == 1 for r in table.rows if r.label not in candidates)
    assert "official repository, examples/NLI/README.md" in rows["SeanLee97/angle-llama-7b-nli-v2"].paper_label
    md = to_markdown(table)
    assert "SeanLee97/angle-llama-13b-nli" in md and "Δ (ours − paper)" in md
    transfer = render_table("released_transfer", _config_table("released_transfer"), [
        write_transfer(root, "llama-2-7b", "released", "angle-llama-7b-nli-v2", 0, {t: 90.0 for t in ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]})])
    assert all(not r.paper for r in transfer.rows) and len(transfer.references) == 3


def test_the_papers_rows_keep_its_grouping_and_its_marks_are_explained():
    """Issue 54: the paper's context rows were listed flat with "(paper: ...)" on each, its † and ⋆ unexplained."""
    import pandas as pd

    from aoe.config.rows import table_rows
    from aoe.plan.check import load_config
    from aoe.results.render import to_markdown

    from tests.workflow_utils import REPO

    demo = load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    tasks = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR"]
    results = pd.DataFrame([dict(backbone="minilm-l6", objective=o, trainset=t, seed=s, task=task, spearman=70.0 + s)
                            for o, t, seeds in (("pretrained", "none", [0]), ("aoe", "stsb", [1, 2])) for s in seeds for task in tasks])
    table = build_table(results, demo["tables"]["table1_sts"], rows=[r.as_dict() for r in table_rows(demo, "table1_sts")], name="table1_sts")
    md = to_markdown(table).splitlines()
    groups = [line for line in md if line.startswith("| *the paper's ")]
    assert [g.split(" rows (")[0] for g in groups] == ["| *the paper's closed-source", "| *the paper's open-source",
                                                      "| *the paper's BERT-base", "| *the paper's LLaMA2-7B", "| *the paper's LLaMA2-13B"]
    assert all("(Li & Li, AoE, ACL 2024, Table 1)*" in g for g in groups)
    at = md.index(groups[2])
    assert md[at + 1].startswith("| *ConSERT* |") and "(paper: " not in md[at + 1]
    assert ("- The paper's marks: Li & Li, AoE, ACL 2024, Table 1: † = results from Reimers & Gurevych (2019); "
            "⋆ = authors' implementation using the official code; other baselines copied from their original papers.") in md


def test_table2_keeps_the_papers_columns_where_a_preset_trains_one_of_them():
    """Issue 54: the demo's AoE Table 2 dropped the paper's GIS and Avg. columns."""
    import pandas as pd

    from aoe.config.rows import table_rows
    from aoe.plan.check import load_config
    from aoe.results.render import to_markdown
    from tests.workflow_utils import REPO

    demo = load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    # as aoe.results.load reads an in-domain file: its headline (the cell's int gold), and each gold of its by_gold
    results = pd.DataFrame([dict(backbone="minilm-l6", objective=o, trainset=t, seed=s, eval_gold=g, column="stsb", value=70.0 + s + (g == "float"))
                            for o, t, seeds, golds in (("pretrained", "none", [0], ["", "float", "int"]), ("pretrained", "cls_pooling", [0], ["", "float", "int"]),
                                                       ("aoe", "stsb", [1, 2], ["", "float", "int"]))
                            for s in seeds for g in golds])
    table = build_table(results, demo["tables"]["table2_indomain"], rows=[r.as_dict() for r in table_rows(demo, "table2_indomain")],
                        name="table2_indomain")
    assert [c.header for c in table.columns] == ["STS-B", "GIS", "Avg."]
    assert table.missing == []  # GIS is not run here, not missing
    # the demo's cell against int(score) (the STS-B example's gold), and its float-gold row from the same files
    # issue 70: the backbone both ways, its own pooling (mean) and the CLS the demo trains
    assert [(r.label, r.mean("stsb")) for r in table.rows] == [("as downloaded (its own pooling: avg)", 70.0), ("as downloaded (CLS pooling, as trained)", 70.0),
                                                               ("AoE", 71.5), ("AoE (float gold)", 72.5)]
    md = to_markdown(table)
    # the paper's rows in its order, under a line naming the table they come from
    lines = md.splitlines()
    at = lines.index("| *Li & Li, AoE, ACL 2024, Table 2* | | | |")
    assert lines[at + 1:at + 4] == ["| *SimCSE* | 76.27 ± 0.23 | 60.38 ± 0.18 | 68.33 |", "| *SBERT* | 84.67 ± 0.35 | 69.50 ± 0.47 | 77.09 |",
                                    "| *AoE* | 86.28 ± 0.19 | 70.59 ± 0.35 | 78.44 |"]
    assert "- GIS: the paper's column, no model of this configuration trains on it (–); the average of ours needs every column." in md


def test_a_row_chosen_on_a_split_the_table_scores_says_so(tmp_path):
    """Issue 51: under select_checkpoint best on a scored split (the official choice for QQP / QNLI: the GLUE dev
    split it reports; MRPC selects on its dev split, held out), the row is marked and a note names where it
    was chosen; REPORT.md's lines carry the mark. The grid keeps the last checkpoint: no mark."""
    from aoe.config.checkpoint_selection import SCORED_SPLIT_MARK, scored_split_selections
    from aoe.plan.check import load_config
    from aoe.publish.report import build_report
    from aoe.results.render import write_table
    from tests.workflow_utils import REPO

    grid = load_config(REPO, [])
    assert scored_split_selections(grid, "angle_table2_nontransfer") == []
    best = load_config(REPO, ["presets/paper-best-checkpoint.yaml"])
    selections = scored_split_selections(best, "angle_table2_nontransfer")
    assert {s["objective"] for s in selections} == {"sbert", "simcse_sup", "cosent", "angle_arxiv"}
    assert {s["split"] for s in selections} == {"qnli dev, qqp dev"}  # STS-B (dev), GIS (valid) and MRPC (dev) are held out
    assert scored_split_selections(best, "table2_indomain") == []  # STS-B dev, GIS valid
    root = tmp_path / "eval"
    files = [write_indomain(root, "bert-base-uncased", "angle_arxiv", t, 42, t, 70.0) for t in ("mrpc", "stsb", "qqp", "qnli", "gis")]
    files += [write_indomain(root, "bert-base-uncased", "sbert", t, 42, t, 65.0) for t in ("mrpc", "stsb", "qqp", "qnli", "gis")]
    spec = {**_config_table("angle_table2_nontransfer"), "rows": [{"backbone": "bert-base-uncased", "objective": o} for o in ("sbert", "angle_arxiv")]}
    table = render_table("angle_table2_nontransfer", spec, files, selections=selections)
    labels = {r.objective: r.label for r in table.rows if not r.reference}
    assert labels["angle_arxiv"] == f"AnglE {SCORED_SPLIT_MARK}" and labels["sbert"] == f"SBERT {SCORED_SPLIT_MARK}"
    assert table.notes[0].startswith(f"{SCORED_SPLIT_MARK}: the checkpoint was chosen on a split this table scores")
    assert "bert-base-uncased AnglE on qnli dev, qqp dev" in table.notes[0]
    out = {ext: tmp_path / f"t.{ext}" for ext in ("tex", "csv", "md", "json")}
    write_table(table, out["tex"], out["csv"], out["md"], out["json"])
    report = build_report([out["json"]])
    assert f"AnglE {SCORED_SPLIT_MARK}" in report and "not a held-out estimate" in report
    unmarked = render_table("angle_table2_nontransfer", spec, files)
    assert not any(SCORED_SPLIT_MARK in r.label for r in unmarked.rows)


def test_no_baseline_row_trained_with_the_aoe_recipe_carries_a_delta():
    """Issue 51: the grid trains SBERT, SimCSE and CoSENT with AoE's (or AnglE's) recipe under their losses, not
    their own papers' or official code's, so no score row of theirs is set beside the paper's number with a Δ:
    the paper's rows stand apart as references. (The training-time table compares seconds per epoch, not scores.)"""
    import yaml

    from aoe.results.load import RESULT_COLUMNS
    from tests.workflow_utils import REPO

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)
    checked = 0
    for name, spec in config["tables"].items():
        if spec["kind"] in ("gis_stats", "train_time"):
            continue
        table = build_table(empty, spec, name=name)
        for row in table.rows:
            if row.objective in ("sbert", "simcse_sup", "cosent"):
                checked += 1
                assert not row.paper_ref, (name, row.backbone, row.label, row.paper_ref)
    assert checked >= 15


def test_sbert_at_its_papers_recipe_is_the_row_beside_sberts_number():
    """Issue 51: SBERT † (AoE Table 1: Reimers & Gurevych's own number) and SBERT ⋆ (Table 3: the authors' run with
    SBERT's code) sit beside the cell that trains SBERT's published recipe (mean pooling, batch 16, one epoch,
    2e-5, 10% warm-up), with Δ; the AoE-recipe SBERT row beside it carries none."""
    import yaml

    from aoe.config.hparams import resolve_cell
    from aoe.plan.check import load_config
    from aoe.results.load import RESULT_COLUMNS
    from tests.workflow_utils import REPO

    grid = load_config(REPO, [])
    params = resolve_cell(grid, "bert-base-uncased", "sbert_paper", "nli", 42).params
    assert {k: params[k] for k in ("pooling", "format", "batch_size", "epochs", "learning_rate", "warmup_ratio", "warmup_steps", "weight_decay")} == {
        "pooling": "avg", "format": "nli3", "batch_size": 16, "epochs": 1, "learning_rate": 2e-5, "warmup_ratio": 0.1, "warmup_steps": 0,
        "weight_decay": 0.01}  # sentence-transformers 239fc1b7 trainer.py:39, the code of the paper's time (config.yaml cites it)
    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)
    for name, ref in (("table1_sts", "acl2024_table1/BERT-base/SBERT †"), ("table3_transfer", "acl2024_table3/SBERTbase ⋆")):
        table = build_table(empty, config["tables"][name], name=name)
        paper = {r.objective: r.paper_ref for r in table.rows if r.backbone == "bert-base-uncased" and r.objective.startswith("sbert")}
        assert paper == {"sbert": None, "sbert_paper": ref}, (name, paper)
        assert ref not in {r.paper_ref for r in table.references}


def test_simcse_at_its_papers_recipe_is_the_row_beside_simcses_number(tmp_path):
    """Issue 51: AoE Table 1's BERT-base SimCSE (81.57) and Table 3's SimCSE-BERTbase are the SimCSE paper's own numbers
    (captions l.147, l.180: "from their original papers"): they sit beside the cell that trains SimCSE's published recipe
    (simcse_paper), with Δ, and its table note says its checkpoint was chosen on STS-B dev, a split no column scores,
    without the § mark; the AoE-recipe SimCSE row beside it carries none, and neither table lists the number apart."""
    import yaml

    from aoe.config.checkpoint_selection import SCORED_SPLIT_MARK, scored_split_selections
    from aoe.plan.check import load_config
    from aoe.results.load import RESULT_COLUMNS
    from tests.workflow_utils import REPO

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)
    # AnglE's transfer STS table prints the same published 81.57; AoE Table 5's is the authors' run of SimCSE's code
    for name, ref in (("table1_sts", "acl2024_table1/BERT-base/SimCSE"), ("table3_transfer", "acl2024_table3/SimCSE-BERTbase"),
                      ("angle_transfer_sts", "arxiv_transfer_sts_table/supervised/SimCSE-BERT"),
                      ("table5_nli", "acl2024_table5_nli/SimCSE-BERTbase")):
        table = build_table(empty, config["tables"][name], name=name)
        paper = {r.objective: r.paper_ref for r in table.rows if r.backbone == "bert-base-uncased" and r.objective.startswith("simcse")}
        assert paper == {"simcse_sup": None, "simcse_paper": ref}, (name, paper)
        assert ref not in {r.paper_ref for r in table.references}
    grid = load_config(REPO, [])
    held = scored_split_selections(grid, "table1_sts", held_out=True)
    files = [write_sts(tmp_path, "bert-base-uncased", o, "nli", 42, {t: 80.0 for t in TASKS}) for o in ("simcse_paper", "aoe")]
    spec = {**config["tables"]["table1_sts"], "rows": [r for r in config["tables"]["table1_sts"]["rows"]
                                                        if r["backbone"] == "bert-base-uncased" and r["objective"] in ("simcse_paper", "aoe")]}
    table = render_table("table1_sts", spec, files, selections=scored_split_selections(grid, "table1_sts"), held_out=held)
    assert not any(SCORED_SPLIT_MARK in r.label for r in table.rows)
    note = next(n for n in table.notes if n.startswith("Chosen on a held-out split"))
    assert "bert-base-uncased SimCSE (sup., SimCSE's recipe, our NLI triplets) on stsb dev" in note and "AoE" not in note.split(":", 1)[1]
    row = next(r for r in table.rows if r.objective == "simcse_paper")
    assert row.paper_ref == "acl2024_table1/BERT-base/SimCSE"


def test_each_checkpoint_number_is_set_against_its_checkpoint_and_the_recipe_of_its_time():
    """Issue 61: ACL's AoE-BERT 82.43 (Table 1; Table 4's AoE, cls and fixed-seed rows) is the released arXiv AnglE-BERT
    under angle-emb 0.1.1 (SeanLee97/AnglE issue #68): set against that checkpoint scored cls_avg_padded and the arXiv-era
    cell (angle_arxiv on NLI, scored the same way), the 2024 recipe's aoe rows without Δ; ACL's LLaMA 85.96 / 86.52 against
    the released adapters and the October 2023 command's cell; no evaluation-only variant row carries a Δ."""
    import copy

    import yaml
    from snakemake.utils import update_config

    from aoe.config.hparams import resolve_cell
    from aoe.results.load import RESULT_COLUMNS
    from tests.workflow_utils import REPO

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    empty = pd.DataFrame(columns=RESULT_COLUMNS)

    def against(name: str) -> dict:
        table = build_table(empty, config["tables"][name], name=name)
        out: dict[str, set] = {}
        for r in table.rows:
            out.setdefault(r.paper_ref, set()).add((r.section, r.backbone, r.objective, r.trainsets[0], r.eval_pooling))
        return out

    bert = {("", "bert-base-uncased", "released", "angle-bert-base-nli-v1", "cls_avg_padded"), ("", "bert-base-uncased", "angle_arxiv", "nli", "")}
    t1, t4 = against("table1_sts"), against("table4_ablation")
    assert t1["acl2024_table1/BERT-base/AoE-BERT"] == bert
    assert t1["acl2024_table1/LLaMA7B/AoE-LLaMA2-7B"] == {("", "llama-2-7b", "released", "angle-llama-7b-nli-v2", ""), ("", "llama-2-7b", "aoe", "nli", "")}
    assert t1["acl2024_table1/LLaMA13B/AoE-LLaMA2-13B"] == {("", "llama-2-13b", "released", "angle-llama-13b-nli", ""), ("", "llama-2-13b", "aoe", "nli", "")}
    assert {(o, p) for _, b, o, _, p in t1[None] if b == "bert-base-uncased" and o == "aoe"} == {("aoe", ""), ("aoe", "cls_avg_batchsum")}
    for section, ref in (("objective", "objective/AoE"), ("pooling", "pooling/cls")):
        assert t4[f"acl2024_table4_ablation/{ref}"] == {(section, *row[1:]) for row in bert}
    assert t4["acl2024_table4_ablation/random_seed/fixed_seed_42"] == {("random seed", "bert-base-uncased", "angle_arxiv", "nli", "")}
    assert {(s, o) for s, _, o, _, _ in t4[None] if o == "aoe"} == {("objective", "aoe"), ("pooling", "aoe"), ("random seed", "aoe")}
    for table in (t1, t4):  # a Δ only for the scoring that made the number
        assert all(pooling in ("", "cls_avg_padded") for ref, rows in table.items() if ref for *_, pooling in rows)
    # the arXiv-era cell: scored as 0.1.1 scored, its in-batch term at 35; the LLaMA cells at the command's 2e-4;
    # the other readings as presets
    angle = resolve_cell(config, "bert-base-uncased", "angle_arxiv", "nli", 42).params
    assert angle["eval_pooling"] == "cls_avg_padded"
    assert angle["objective_overrides"]["weights"] == {"cosine": 1.0, "contrastive": 35.0, "angle": 1.0}
    assert [resolve_cell(config, b, "aoe", "nli", 42).params["learning_rate"] for b in ("llama-2-7b", "llama-2-13b")] == [2e-4, 2e-4]
    for preset, (backbone, objective, key, value) in {
        "paper-llm-acl-lr.yaml": ("llama-2-7b", "aoe", "learning_rate", 1e-4),
        "paper-angle-nli-w2-1.yaml": ("bert-base-uncased", "angle_tau_2", "weights", {"cosine": 1.0, "contrastive": 1.0, "angle": 1.0}),
    }.items():
        merged = copy.deepcopy(config)
        update_config(merged, yaml.load((REPO / "presets" / preset).read_text(), Loader=YAML_LOADER))
        params = resolve_cell(merged, backbone, objective, "nli", 42).params
        assert (params["objective_overrides"] if key == "weights" else params)[key] == value, preset


def test_table4s_ablation_base_is_inferred_and_the_other_reading_is_a_preset():
    """Issue 69: the paper does not say which recipe AoE Table 4's ablations varied. The grid's ablation rows vary the
    2024 recipe, each set against the paper's row of its name and said INFERRED in the caption; the other reading,
    presets/paper-table4-arxiv-base.yaml, sets the arXiv-era recipe's ablations of the same meaning against the same
    paper rows, each trained as the arXiv-era cell, the objective rows scored as it is (0.1.1's cls_avg), the pooling
    rows with the pooling they train."""
    from aoe.config.cell_settings import cell_eval_pooling
    from aoe.config.rows import table_cells
    from aoe.config.hparams import resolve_cell
    from aoe.plan.check import load_config
    from tests.workflow_utils import REPO

    ablations = {"only_angle_objective", "only_contrastive_objective", "avg", "max"}
    for files, objectives in (([], {"only_angle", "only_contrastive", "aoe_pool_avg", "aoe_pool_max"}),
                              ([REPO / "presets" / "paper-table4-arxiv-base.yaml"], {"angle_only_angle", "only_ibn", "angle_pool_avg", "angle_pool_max"})):
        config = load_config(REPO, files)
        assert "INFERRED" in config["tables"]["table4_ablation"]["caption"], files
        rows = config["tables"]["table4_ablation"]["rows"]
        against = {r["objective"] for r in rows if r.get("paper", "").rsplit("/", 1)[-1] in ablations}
        assert against == objectives, files
        arxiv = resolve_cell(config, "bert-base-uncased", "angle_arxiv", "nli", 42).params
        cells = {c.objective: c for c in table_cells(config, "table4_ablation") if c.trained and str(c.seed) == "42"}
        for objective in objectives:
            params = resolve_cell(config, "bert-base-uncased", objective, "nli", 42).params
            if files:  # the arXiv-era base: its schedule, batch and rate
                assert [params[k] for k in ("learning_rate", "epochs", "batch_size")] == [arxiv[k] for k in ("learning_rate", "epochs", "batch_size")]
            pooled = objective.endswith(("pool_avg", "pool_max"))
            assert cell_eval_pooling(config, cells[objective]) == (None if pooled or not files else "cls_avg_padded"), objective
