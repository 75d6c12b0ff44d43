"""results/REPORT.md from the tables' JSON twins: ours vs paper, Δ, the 2-std flag, presets, figures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from aoe.report import FLAG, NO_STD, build_report, figure_section, flag, table_sources
from aoe.tables import build_table, to_json

NUMBERS = """\
paper_t:
  short: Paper T
  rows:
    AoE: {STS-B: 85.0}
    SBERT: {STS-B: 80.0}
    SimCSE: {STS-B: 79.0}
  std:
    AoE: {STS-B: 0.5}
    SBERT: {STS-B: 0.5}
"""


def test_flag():
    assert flag(-1.01, 0.5) == FLAG  # |Δ| > 2 std
    assert flag(1.01, 0.5) == FLAG
    assert flag(1.0, 0.5) == ""  # not strictly more
    assert flag(0.2, 0.5) == ""
    assert flag(3.0, None) == NO_STD
    assert flag(None, 0.5) == "" and flag(float("nan"), 0.5) == ""


@pytest.fixture
def table_json(tmp_path) -> Path:
    numbers = tmp_path / "numbers.yaml"
    numbers.write_text(NUMBERS)
    rows = []
    # aoe: mean 86.0 (Δ +1.0 = 2 std: not flagged); sbert: mean 78.0 (Δ -2.0 > 1.0: flagged); simcse: no paper std
    for obj, vals in (("aoe", [85.5, 86.0, 86.5]), ("sbert", [77.5, 78.0, 78.5]), ("simcse_sup", [81.0, 81.0, 81.0])):
        for seed, v in enumerate(vals, 1):
            rows.append({"backbone": "b", "objective": obj, "trainset": "stsb", "seed": seed, "column": "STSB", "value": v})
    spec = {
        "kind": "stsb", "trainset": "stsb", "backbones": ["b"], "objectives": ["aoe", "sbert", "simcse_sup", "cosent"],
        "include_pretrained": False, "caption": "In-domain STS-B",
        "paper": {"b": {"aoe": "paper_t/AoE", "sbert": "paper_t/SBERT", "simcse_sup": "paper_t/SimCSE"}},
    }
    table = build_table(pd.DataFrame(rows), spec, numbers_file=numbers, name="table2_x")
    path = tmp_path / "table2_x.json"
    path.write_text(json.dumps(to_json(table)))
    return path


def _report_rows(text: str) -> dict[str, list[str]]:
    out = {}
    for line in text.splitlines():
        if line.startswith("| b "):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            out[cells[0]] = cells[1:]
    return out


def test_report_flags_and_numbers(table_json, tmp_path):
    (tmp_path / "config.yaml").write_text("tables:\n  table2_x: {kind: stsb}\n  other: {kind: sts7}\n")
    (tmp_path / "preset.yaml").write_text("tables:\n  table2_x: {caption: x}\n")
    configs = [str(tmp_path / "config.yaml"), str(tmp_path / "preset.yaml")]
    text = build_report([table_json], configs, commit="abc123", figure_files=[])
    rows = _report_rows(text)
    # Column, Ours, Seeds, Paper, Δ, Flag
    assert rows["b AoE"] == ["STS-B test", "86.00 ± 0.50", "3", "85.00 ± 0.50", "+1.00", ""]
    assert rows["b SBERT"] == ["STS-B test", "78.00 ± 0.50", "3", "80.00 ± 0.50", "-2.00", FLAG]
    assert rows["b SimCSE (sup.)"] == ["STS-B test", "81.00 ± 0.00", "3", "79.00", "+2.00", NO_STD]
    assert "b CoSENT" not in rows
    assert "## table2_x" in text and "In-domain STS-B" in text
    assert "abc123" in text and all(c in text for c in configs)
    assert f"config: `{configs[0]}`, `{configs[1]}`" in text  # the files that set this table
    assert "compared with the paper: 3" in text and f"flagged {FLAG}: 1 (table2_x (1))" in text
    assert "without a paper std: 1" in text
    assert "AoE vs SBERT" in text and "Paired t-tests" in text
    assert "Missing cells (1, printed as –): b/cosent/stsb STSB" in text
    assert "Figures" not in text


def test_report_figures_and_sources(table_json, tmp_path):
    figs = tmp_path / "figures"
    figs.mkdir()
    (figs / "fig3.json").write_text(json.dumps({"pairs": 12, "kde": {"re": 0.25, "im": 0.5, "curve": [1, 2]}, "name": "x"}))
    (figs / "broken.json").write_text("{")
    section = figure_section(sorted(figs.glob("*.json")))
    assert "### fig3" in section and "- `pairs`: 12" in section and "- `kde.re`: 0.25" in section
    assert "curve" not in section and "broken.json`: unreadable" in section
    text = build_report([table_json], [], figure_files=[figs / "fig3.json"])
    assert "## Figures" in text and "Git commit: `unknown`" in text
    (tmp_path / "a.yaml").write_text("tables:\n  t1: {}\n")
    (tmp_path / "b.yaml").write_text("evaluation: {}\n")
    assert table_sources([tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "missing.yaml"]) == {"t1": [str(tmp_path / "a.yaml")]}


def test_report_without_paper_numbers(tmp_path):
    rows = [{"backbone": "b", "objective": "aoe", "trainset": "t", "seed": 1, "column": "STSB", "value": 70.0}]
    table = build_table(pd.DataFrame(rows), {"kind": "stsb", "trainset": "t", "backbones": ["b"], "objectives": ["aoe"], "include_pretrained": False}, name="t")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(to_json(table)))
    text = build_report([path])
    assert "No paper numbers matched" in text
    assert _report_rows(text)["b AoE"] == ["STS-B test", "70.00", "1", "–", "–", ""]


def test_reference_rows_are_listed_number_by_number(tmp_path):
    numbers = tmp_path / "numbers.yaml"
    numbers.write_text(NUMBERS + "  text:\n    SNLI: {STS-B: 61.646}\n".replace("  text:\n", "paper_u:\n  rows:\n"))
    rows = [{"backbone": "b", "objective": "aoe", "trainset": "stsb", "seed": 1, "column": "STSB", "value": 84.0}]
    spec = {"kind": "stsb", "trainset": "stsb", "backbones": ["b"], "objectives": ["aoe"], "include_pretrained": False,
            "paper": {"b": {"aoe": "paper_t/AoE"}}, "paper_reference": ["paper_t/SBERT", "paper_u/SNLI"]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(to_json(build_table(pd.DataFrame(rows), spec, numbers_file=numbers, name="t"))))
    text = build_report([path])
    assert "| SBERT (paper: Paper T) | STS-B test | 80.00 ± 0.50 |" in text
    assert "| SNLI (paper: paper_u) | STS-B test | 61.646 |" in text  # the paper's own decimals
    assert "paper numbers listed: 3" in text and "compared with the paper: 1" in text


def test_report_lists_every_paper_number_of_the_configured_tables(tmp_path):
    """Every paper number a configured table shows (under a row of ours or as a reference row) is in REPORT.md."""
    import yaml

    from aoe.tables import RESULT_COLUMNS, build_gis_table, paper_digits
    from tests.workflow_utils import REPO

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    files, expected = [], []
    for name, spec in config["tables"].items():
        if spec["kind"] == "gis_stats":
            stats = {"table7": {s: {"positive": 1, "negative": 1, "total": 2} for s in ("train", "valid", "test")}}
            table = build_gis_table(stats, spec, name)
        else:
            table = build_table(pd.DataFrame(columns=RESULT_COLUMNS), spec, name=name)
        data = to_json(table)
        headers = {c["key"]: c["header"] for c in data["columns"]}
        for row in data["rows"]:
            if row["reference"]:
                start = f"| {row['paper_label']} | "
            else:
                label = row["label"] if data["kind"] == "gis_stats" else f"{row['backbone']} {row['label']}"
                start = f"| {row['section'] + ': ' if row['section'] else ''}{label} | "
            for col, value in row["paper"].items():
                digits = 0 if name == "table_gis_stats" and col != "long_share" else 2
                expected.append((name, start + headers[col] + " | ", f"{value:.{paper_digits(value, digits)}f}"))
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        files.append(path)
    text = build_report(files)
    sections = {s.split("\n", 1)[0]: s for s in text.split("\n## ")[1:]}
    assert len(expected) > 150
    for name, start, printed in expected:
        lines = [line for line in sections[name].splitlines() if line.startswith(start)]
        assert any(f" | {printed} |" in line or f" | {printed} ± " in line for line in lines), (name, start, printed)
    assert "| AoE-LLaMA7B (paper: AoE ACL 2024, Appendix D) | s / epoch | 1027.18 |" in sections["table_train_time"]
    assert "| pooling: bert-base-uncased cls-last-avg | STS-B | – | 0 | 85.81 | – |" in sections["angle_table3_ablation"]
    assert f"| train | total | 2 | 1 | 18565 | -18563 | {NO_STD} |" in sections["table_gis_stats"]  # counts: no decimals
