"""Tables from sts.json files: mean ± sample std over seeds, missing cells, LaTeX, paper reference rows."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aoe.evaluate.sts import TASKS
from aoe.tables import build_table, load_sts_results, paper_reference, to_latex

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


def _scores(stsb: float, seed: int) -> dict[str, float]:
    # distinct values per task and seed, so a column or seed mix-up shows
    return {task: stsb + k + 0.1 * seed for k, task in enumerate(TASKS)}


def _write_results(root: Path) -> list[Path]:
    paths = []
    for (backbone, objective, trainset), seeds in STSB.items():
        for seed, stsb in seeds.items():
            scores = _scores(stsb, seed)
            scores["STSB"] = stsb
            result = {
                "tasks": {t: {"spearman": v, "pearson": v - 1, "n": 10, "subsets": {}} for t, v in scores.items()},
                "avg": float(np.mean(list(scores.values()))),
                # as written by the evaluate_sts rule: the cell comes from the wildcards, all strings
                "model": {"cell": {"backbone": backbone, "objective": objective, "trainset": trainset, "seed": str(seed)}},
            }
            path = root / backbone / objective / trainset / f"seed{seed}" / "sts.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(result))
            paths.append(path)
    return paths


SPEC = {"backbones": ["tiny_a", "tiny_b"], "objectives": ["aoe", "cosent"], "trainset": "stsb", "kind": "sts7"}


@pytest.fixture
def results(tmp_path) -> pd.DataFrame:
    return load_sts_results(_write_results(tmp_path / "eval"))


def _row(table: pd.DataFrame, backbone: str, objective: str) -> pd.Series:
    sel = table[(table.backbone == backbone) & (table.objective == objective)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_load_sts_results_long_format(results):
    n_files = sum(len(s) for s in STSB.values())
    assert len(results) == n_files * len(COLUMNS)
    assert results.seed.dtype.kind == "i"
    one = results[(results.backbone == "tiny_a") & (results.objective == "aoe") & (results.seed == 2)]
    assert one.set_index("task").spearman["STSB"] == 82.0
    assert one.set_index("task").spearman["STS13"] == pytest.approx(82.0 + 1 + 0.2)


def test_build_table_mean_std_n(results, caplog):
    with caplog.at_level(logging.WARNING, logger="aoe.tables"):
        table = build_table(results, SPEC, "sts7")
    assert len(table) == 6  # 2 backbones x (pretrained, aoe, cosent)
    for (backbone, objective, _), seeds in STSB.items():
        row = _row(table, backbone, objective)
        assert row.n == len(seeds)
        for col in COLUMNS:
            values = []
            for seed, stsb in seeds.items():
                s = _scores(stsb, seed)
                s["STSB"] = stsb
                values.append(np.mean(list(s.values())) if col == "avg" else s[col])
            assert row[f"{col}_mean"] == pytest.approx(np.mean(values)), (backbone, objective, col)
            if len(values) > 1:
                assert row[f"{col}_std"] == pytest.approx(np.std(values, ddof=1)), (backbone, objective, col)
            else:
                assert math.isnan(row[f"{col}_std"])
    # the aoe STSB std by hand: values 80, 82, 84.5, mean 82.1667, squares sum 10.1667, / 2 -> sqrt(5.0833)
    assert _row(table, "tiny_a", "aoe")["STSB_std"] == pytest.approx(math.sqrt(5.083333333), abs=1e-6)

    missing = _row(table, "tiny_b", "cosent")
    assert missing.n == 0
    assert all(math.isnan(missing[f"{c}_mean"]) for c in COLUMNS)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("tiny_b/cosent/stsb" in m for m in warnings)
    assert not any("tiny_a" in m for m in warnings)


def test_build_table_without_pretrained(results):
    table = build_table(results, {**SPEC, "include_pretrained": False}, "stsb")
    assert list(table.objective) == ["aoe", "cosent", "aoe", "cosent"]
    assert [c for c in table.columns if c.endswith("_mean")] == ["STSB_mean"]


def _latex_rows(tex: str) -> dict[str, list[str]]:
    """Body rows of the tabular: label -> cells."""
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule")[0]
    rows = {}
    for line in body.splitlines():
        line = line.strip()
        if line.endswith("\\\\"):
            label, *cells = [c.strip() for c in line[:-2].split(" & ")]
            rows[label] = cells
    return rows


def test_to_latex_bold_missing_and_format(results):
    tex = to_latex(build_table(results, SPEC, "sts7"), "sts7", caption="STS results", label="sts7")
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
    assert all(len(r) == len(COLUMNS) for r in rows.values())

    stsb = COLUMNS.index("STSB")
    # tiny_a STSB: aoe mean 82.17 beats cosent 79.50 and pretrained 60.00; std 2.25 (= sqrt(5.0833))
    assert aoe_a[stsb] == "\\textbf{82.17 $\\pm$ 2.25}"
    assert cosent_a[stsb] == "79.50 $\\pm$ 2.12"
    assert pre_a[stsb] == "60.00"  # one seed: no std
    # tiny_b is bolded within tiny_b, independently of tiny_a's better numbers
    assert aoe_b[stsb] == "\\textbf{75.50 $\\pm$ 0.71}"
    assert pre_b[stsb] == "70.00"
    # the missing cell prints as a dash in every column, never as 0
    assert cosent_b == ["–"] * len(COLUMNS)
    # exactly one bold per column per backbone
    for group in ((aoe_a, cosent_a, pre_a), (aoe_b, cosent_b, pre_b)):
        for c in range(len(COLUMNS)):
            assert sum(r[c].startswith("\\textbf") for r in group) == 1
    # every number has two decimals
    for cells in rows.values():
        for cell in cells:
            if cell != "–":
                assert re.fullmatch(r"(\\textbf\{)?-?\d+\.\d\d( \$\\pm\$ \d+\.\d\d)?\}?", cell), cell


def test_no_bold_for_a_single_row():
    res = pd.DataFrame(
        [{"backbone": "b", "objective": "aoe", "trainset": "t", "seed": 1, "task": "STSB", "spearman": 70.0}]
    )
    table = build_table(res, {"backbones": ["b"], "objectives": ["aoe"], "trainset": "t", "include_pretrained": False}, "stsb")
    assert "\\textbf" not in to_latex(table, "stsb", "c", "l")


PAPER_YAML = """\
aoe_table2:
  short: AoE Tab. 2
  rows:
    AoE-BERT:
      STS-B: 86.26
      SICK-R: 80.1
      Avg.: 82.43
      note: reported in the paper
    AnglE-BERT:
      STS12: 75.09
      STSB: 85.0
  std:
    AoE-BERT: {STS-B: 0.19}
aoe_table1:
  source: "Li & Li, AoE, ACL 2024, Table 1: standard STS"
  groups:
    BERT-base:
      AoE-BERT: {STS12: 75.26, avg: 82.43}
  std:
    BERT-base:
      AoE-BERT: {STS12: 0.04}
"""


@pytest.fixture
def numbers_file(tmp_path) -> Path:
    path = tmp_path / "paper_numbers.yaml"
    path.write_text(PAPER_YAML)
    return path


def test_paper_reference_from_a_numbers_file(numbers_file):
    label, values, stds = paper_reference("aoe_table2/AoE-BERT", numbers_file)
    assert label == "AoE-BERT (paper: AoE Tab. 2)"
    assert values == {"STSB": 86.26, "SICKR": 80.1, "avg": 82.43}  # header spellings normalised, text dropped
    assert stds == {"STSB": 0.19}
    label, values, stds = paper_reference("aoe_table1/BERT-base/AoE-BERT", numbers_file)
    assert label == "AoE-BERT (paper: Li & Li, AoE, ACL 2024, Table 1)"
    assert values == {"STS12": 75.26, "avg": 82.43} and stds == {"STS12": 0.04}
    with pytest.raises(KeyError, match="aoe_table1/LLaMA/AoE-BERT"):
        paper_reference("aoe_table1/LLaMA/AoE-BERT", numbers_file)
    with pytest.raises(KeyError, match="aoe_table2/Nope"):
        paper_reference("aoe_table2/Nope", numbers_file)
    with pytest.raises(KeyError, match="other/AoE-BERT"):
        paper_reference("other/AoE-BERT", numbers_file)


def test_reference_rows_in_table_and_latex(results, numbers_file):
    table = build_table(results, SPEC, "sts7", ["aoe_table2/AoE-BERT", "aoe_table2/AnglE-BERT"], numbers_file=numbers_file)
    refs = table[table.reference]
    assert list(refs.backbone) == ["AoE-BERT (paper: AoE Tab. 2)", "AnglE-BERT (paper: AoE Tab. 2)"]
    aoe = refs.iloc[0]
    assert aoe["STSB_mean"] == 86.26 and aoe["avg_mean"] == 82.43 and math.isnan(aoe["STS12_mean"])
    tex = to_latex(table, "sts7", "c", "l")
    ref_line = next(line for line in tex.splitlines() if line.startswith("\\textit{AoE-BERT"))
    cells = [c.strip() for c in ref_line.rstrip("\\ ").split(" & ")[1:]]
    assert cells[COLUMNS.index("STSB")] == "86.26 $\\pm$ 0.19"
    assert cells[COLUMNS.index("STS12")] == "–"
    assert "\\textbf" not in ref_line  # reference rows never compete for bold
    # paper rows do not change which of our rows is bold
    rows = _latex_rows(tex)
    assert rows["tiny\\_a AoE, stsb (n=3)"][COLUMNS.index("STSB")].startswith("\\textbf")
    assert tex.count("\\midrule") == 3  # header, after tiny_a, after tiny_b; then the reference rows


def test_every_configured_paper_reference_exists():
    """config.yaml's reference rows all resolve in the packaged paper_numbers.yaml."""
    import yaml

    from tests.workflow_utils import REPO

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    refs = [r for t in config["tables"].values() for r in t.get("paper_reference", [])]
    assert refs
    for ref in refs:
        _, values, _ = paper_reference(ref)
        assert values, ref
    _, values, stds = paper_reference("acl2024_table2/AoE")
    assert values["STSB"] == 86.28 and stds == {"STSB": 0.19}
