"""The papers' numbers as the tables read them (aoe.results.paper_numbers): a reference row from a numbers file,
every reference config.yaml names resolving in the packaged aoe/resources/paper_numbers.yaml, and that file's
numbers found again, in order, in the papers' text copies (shared/papers, where present)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from aoe.config.hparams import YAML_LOADER
from aoe.results.paper_numbers import paper_reference
from aoe.results.render import paper_digits
from aoe.results.tables import build_gis_table, kind_columns

# a numbers file in paper_numbers.yaml's shapes (rows, groups, std, a single number); tests/test_tables.py builds on it
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
indomain:
  short: In-domain
  rows:
    AoE: {STS-B: 86.0, GIS: 70.0, avg: 78.0}
  std:
    AoE: {STS-B: 0.2, GIS: 0.3}
ablation:
  short: Abl.
  rows:
    objective:
      AoE: {avg: 82.43, std: 0.08}
claims:
  short: Claims
  mteb:
    AoE_avg: 64.64
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
    # other columns: in-domain train sets; an entry's own std number is its avg's std; a single number is an avg
    assert paper_reference("indomain/AoE", numbers_file, ["stsb", "gis", "avg"])[1:] == (
        {"stsb": 86.0, "gis": 70.0, "avg": 78.0},
        {"stsb": 0.2, "gis": 0.3},
    )
    assert paper_reference("ablation/objective/AoE", numbers_file, ["avg"])[1:] == ({"avg": 82.43}, {"avg": 0.08})
    assert paper_reference("claims/mteb/AoE_avg", numbers_file, ["sts", "avg"])[1:] == ({"avg": 64.64}, {})
    for bad in ("aoe_table1/LLaMA/AoE-BERT", "aoe_table2/Nope", "other/AoE-BERT"):
        with pytest.raises(KeyError, match=bad):
            paper_reference(bad, numbers_file)


def test_every_configured_paper_reference_exists():
    """config.yaml's reference rows and paper mappings all resolve in the packaged paper_numbers.yaml."""
    import yaml

    from tests.workflow_utils import REPO

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    n = 0
    without = set()
    for name, table in config["tables"].items():
        refs = list(table.get("paper_reference", []))
        refs += [ref for by_obj in (table.get("paper") or {}).values() for ref in by_obj.values()]
        refs += [r["paper"] for r in table.get("rows", []) if r.get("paper")]
        refs += [ref for by_obj in (table.get("reproduction") or {}).values() for ref in by_obj.values()]
        refs += [r["reproduction"] for r in table.get("rows", []) if r.get("reproduction")]
        if not refs:
            without.add(name)
        if table["kind"] == "gis_stats":
            cols = [c.key for c in build_gis_table({}, table).columns]
            assert set(table.get("paper") or {}) <= {"GIS"}, name
        else:
            cols = [c.key for c in kind_columns(table["kind"], table, pd.DataFrame({"column": ["sts", "classification"]}))]
            for objective_map in (table.get("paper") or {}).values():
                shown = {*table.get("objectives", []), *(r["objective"] for r in table.get("rows", []))}
                assert set(objective_map) <= {"pretrained", *shown}, name
        for ref in refs:
            # a number in one of the table's own columns, not just an entry that exists
            _, values, _ = paper_reference(ref, columns=cols)
            assert values and all(isinstance(v, float) for v in values.values()), (name, ref)
            n += 1
    assert n >= 55
    # AnglE Table 4's experiment is still being built, and the papers print no number for three of their own
    # studies (aoe-acl2024.txt l.182, angle-arxiv-a.txt l.134, angle-arxiv-b.txt l.333); every other table
    # shows the paper's numbers
    assert without <= {"angle_table4_llm", "study_weights", "study_tau", "study_batch"}, without
    _, values, stds = paper_reference("acl2024_table2/AoE", columns=["stsb", "gis", "avg"])
    assert values == {"stsb": 86.28, "gis": 70.59, "avg": 78.44} and stds == {"stsb": 0.19, "gis": 0.35}


PAPERS = Path(__file__).resolve().parents[2] / "shared" / "papers"
STS_HEADERS_AVG = ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "avg"]

# (reference, paper file, the line's first characters or None, the entry's columns in printed order, decimals)
TEXT_CHECKS = [
    *[(f"angle_arxiv_table2_nontransfer/{row}", f, row if f != "angle-arxiv-b.txt" else row.replace("AnglE", "Angle"), ["MRPC", "STS-B", "QQP", "QNLI", "GIS", "avg"], 2)
      for row in ("SimCSE-BERT", "SBERT", "AnglE-RAN", "AnglE-BERT") for f in ("angle-arxiv-a.txt", "angle-arxiv-b.txt")],
    *[(f"angle_arxiv_table3_ablation/{section}/{row}", f, printed if f != "angle-arxiv-b.txt" else printed.replace("AnglE", "Angle"), ["STS-B"], 2)
      for section, row, printed in (
          ("objective", "AnglE-BERT-all", "AnglE-BERT-all"), ("objective", "without ibn", "- w/o ibn"), ("objective", "without angle", "- w/o angle"),
          ("objective", "only cosine", "only cosine"), ("objective", "only ibn", "only ibn"), ("objective", "only angle", "only angle"),
          ("pooling", "cls", "cls"), ("pooling", "cls-last-avg", "cls-last-avg"), ("pooling", "last-avg", "last-avg"),
          ("pooling", "last-max", "last-max"), ("pooling", "first-last-avg", "first-last-avg"))
      for f in ("angle-arxiv-a.txt", "angle-arxiv-b.txt", "angle-arxiv-c.txt")],
    *[(f"angle_arxiv_table4_llm/{group}/{row}", f, row if f != "angle-arxiv-b.txt" else row.replace("AnglE", "Angle"), ["STS-B"], 2)
      for group, row in (("unsupervised", "SimCSE-BERT"), ("unsupervised", "ConSERT-BERT"), ("unsupervised", "DiffCSE-BERT"),
                         ("llm_supervised", "AnglE-BERT + ChatGPT"), ("llm_supervised", "AnglE-BERT + LLaMA"),
                         ("llm_supervised", "AnglE-BERT + ChatGLM"), ("llm_supervised", "AnglE-BERT + Ensemble"))
      for f in ("angle-arxiv-a.txt", "angle-arxiv-b.txt", "angle-arxiv-c.txt")],
    *[(f"angle_arxiv_transfer_sts_versions/arxiv_a_and_c/{row}", f, None, STS_HEADERS_AVG, 2)
      for row in ("LLaMA2-7B ⋆", "SimCSE-LLaMA2-7B ⋆", "AnglE-LLaMA2-7B") for f in ("angle-arxiv-a.txt", "angle-arxiv-c.txt")],
    *[(f"angle_arxiv_transfer_sts_versions/arxiv_b/{row}", "angle-arxiv-b.txt", None, STS_HEADERS_AVG, 2)
      for row in ("LLaMA-2 7B -avg ⋆", "LLaMA-2 7B -max ⋆", "LLaMA-2 7B -last ⋆", "SLLaMA-2 7B ⋆", "SimCSE-LLaMA-2 7B ⋆", "AnglE-LLaMA-2-7B")],
    *[(f"angle_arxiv_transfer_tasks/{row}", f, None, ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "avg"], 2)
      for row in ("Avg. BERT †", "BERT-CLS †", "IS-BERT ‡", "DiffCSE-RoBERTa ♢", "AnglE-LLaMA") for f in ("angle-arxiv-a.txt", "angle-arxiv-c.txt")],
    *[(f"angle_arxiv_flickr30k/{row}", f, None, ["strict_accuracy"], 1)
      for row in ("AnglE", "SimCSE (supervised)", "SBERT") for f in ("angle-arxiv-a.txt", "angle-arxiv-b.txt", "angle-arxiv-c.txt")],
    *[(f"acl2024_training_time/{row}", "aoe-acl2024.txt", None, ["sec_per_epoch"], 2)
      for row in ("SBERT-BERTbase", "SimCSE-BERTbase", "AoE-BERTbase", "SBERT-LLaMA7B", "SimCSE-LLaMA7B", "AoE-LLaMA7B")],
    ("reproduction_report/table1/AoE-BERT (reproduction)", "reproduction-report-zh.txt", "| **AoE (Ours)**", STS_HEADERS_AVG, 2),
    ("reproduction_report/table2/AoE-BERT (reproduction)", "reproduction-report-zh.txt", "| **AoE (Ours)**", ["STS-B", "GIS"], 2),
    ("reproduction_report/table3/AoE-BERT (reproduction, MTEB classifiers)", "reproduction-report-zh.txt", "| **AoE (Ours)**",
     ["MR", "CR", "SUBJ", "SST2", "avg_4_tasks"], 1),
]


def _entry_rows(key: str) -> list[tuple[str, list[str]]]:
    """Every row reference of a paper_numbers.yaml entry with its printed columns, in the entry's order."""
    from importlib import resources

    import yaml

    entry = yaml.load(resources.files("aoe.resources").joinpath("paper_numbers.yaml").read_text(), Loader=YAML_LOADER)[key]
    rows = entry.get("rows") or entry.get("groups")
    nested = "groups" in entry or any(isinstance(next(iter(v.values()), None), dict) for v in rows.values())
    refs = [f"{key}/{g}/{r}" for g, rs in rows.items() for r in rs] if nested else [f"{key}/{r}" for r in rows]
    out = []
    for ref in refs:
        values = paper_reference(ref, columns=entry["columns"])[1]
        out.append((ref, [c for c in entry["columns"] if c in values]))
    return out


# whole tables, row by row (a row's numbers are distinctive enough to find its line without its label)
TEXT_CHECKS += [
    *[(ref, "aoe-acl2024.txt", None, cols, 2)
      for key in ("acl2024_table1", "acl2024_table2", "acl2024_table3", "acl2024_table5_nli") for ref, cols in _entry_rows(key)],
    *[(ref, "angle-arxiv-a.txt", None, cols, 2) for ref, cols in _entry_rows("angle_arxiv_transfer_tasks")],
    # the repo image's rows without LLaMA are the same in all three text versions (its LLaMA row is not)
    *[(ref, f, None, cols, 2) for ref, cols in _entry_rows("arxiv_transfer_sts_table") if "LLaMA" not in ref
      for f in ("angle-arxiv-a.txt", "angle-arxiv-b.txt", "angle-arxiv-c.txt")],
]


def _printed_in_order(line: str, numbers: list[str]) -> bool:
    pos = 0
    for n in numbers:
        # a whole number of the text (5.2 not inside 65.24 or 5.25), or one of -a's back-to-back repeats
        m = re.compile(rf"(?<![\d.]){re.escape(n)}(?:(?!\d)|(?={re.escape(n)}))").search(line, pos)
        if m is None:
            return False
        pos = m.end()
    return True


@pytest.mark.parametrize("ref,name,prefix,columns,decimals", TEXT_CHECKS, ids=lambda v: v if isinstance(v, str) else None)
def test_paper_numbers_are_printed_in_the_papers_text(ref, name, prefix, columns, decimals):
    """Each checked entry's numbers appear, in its columns' order, on one line of the paper's text copy
    (shared/papers beside the repository; skipped where it is absent)."""
    path = PAPERS / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    _, values, _ = paper_reference(ref, columns=columns)
    assert set(values) == set(columns), ref
    numbers = [f"{values[c]:.{paper_digits(values[c], decimals)}f}" for c in columns]
    lines = [line for line in path.read_text().splitlines() if prefix is None or line.strip().startswith(prefix)]
    assert any(_printed_in_order(line, numbers) for line in lines), (ref, name, numbers)


@pytest.mark.parametrize("name,labels", [
    ("aoe-acl2024.txt", ("#Pos", "#Neg", "Total")),
    ("angle-arxiv-b.txt", ("#Positive", "#Negative", "Total")),
])
def test_gis_numbers_are_printed_in_the_papers_text(name, labels):
    """Table 7 is printed split by split across a line per count; the long-text shares are prose."""
    path = PAPERS / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    splits = ("train", "valid", "test")
    rows = {s: paper_reference(f"acl2024_table7_gis/{s}", columns=["positive", "negative", "total", "long_share"])[1] for s in splits}
    lines = [line.replace(",", "") for line in path.read_text().splitlines()]
    for col, label in zip(("positive", "negative", "total"), labels):
        numbers = [f"{rows[s][col]:.0f}" for s in splits]
        assert any(line.startswith(label) and _printed_in_order(line, numbers) for line in lines), (col, numbers)
    shares = [f"{rows[s]['long_share']:.2f}%" for s in splits]
    assert any(_printed_in_order(line, shares) for line in lines), shares
