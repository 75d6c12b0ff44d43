"""Issue 70 §1: an edit of the code that computes what a training trains shows.

The fingerprint (aoe.training.fingerprint) ignores comments, docstrings and layout and sees any other edit; it
is part of a run's identity (a forced rerun of an edited objective trains, never restores the old weights) and of
the model's record; planning names the models of other code with the command that retrains them
(aoe.plan.code_changes). The Snakemake side, on the CI tree: tests/test_pipeline_e2e.py.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from aoe.training.fingerprint import OUTSIDE_THE_FINGERPRINT, PACKAGE_ROOT, TRAINING_CODE, code_fingerprint, training_code_files
from tests.workflow_utils import REPO

ANGLE = "aoe/losses/angle.py"


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of the package's training code, to edit."""
    for rel in training_code_files(REPO):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} has no {old!r}"
    path.write_text(text.replace(old, new, 1))


def test_comments_docstrings_and_layout_keep_the_fingerprint(package):
    before = code_fingerprint(package)
    assert before == code_fingerprint(REPO) and set(before["modules"]) == set(training_code_files(REPO))
    angle = package / ANGLE
    source = angle.read_text()
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "angle_loss")
    doc = ast.get_docstring(fn, clean=False)
    assert doc
    _edit(angle, doc, "A reworded docstring.")
    angle.write_text("# a new comment\n\n\n" + angle.read_text().replace("\n\n", "\n\n\n# between\n", 1) + "\n# the end\n")
    assert code_fingerprint(package) == before


def test_an_edited_loss_changes_the_fingerprint_of_its_module_only(package):
    before = code_fingerprint(package)
    _edit(package / ANGLE, "def angle_loss(", "def _unused():\n    return 0\n\n\ndef angle_loss(")
    after = code_fingerprint(package)
    assert after["sha256"] != before["sha256"]
    assert [m for m in after["modules"] if after["modules"][m] != before["modules"][m]] == [ANGLE]
    # a new module in the losses folder is part of it without a change to the list
    (package / "aoe/losses/new_loss.py").write_text("def f(x):\n    return x\n")
    assert "aoe/losses/new_loss.py" in code_fingerprint(package)["modules"]


def _aoe_imports(path: Path) -> set[str]:
    """The aoe modules a file imports, at its top or inside a function, as file paths."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for name in names:
            if name.split(".")[0] != "aoe":
                continue
            for candidate in (name.replace(".", "/") + ".py", name.replace(".", "/") + "/__init__.py"):
                if (REPO / candidate).is_file():
                    out.add(candidate)
            if isinstance(node, ast.ImportFrom):  # from aoe.training import checkpoints: a module by its name
                out |= {f"{name.replace('.', '/')}/{a.name}.py" for a in node.names if (REPO / name.replace(".", "/") / f"{a.name}.py").is_file()}
    return out


def test_every_module_the_training_runs_is_in_the_fingerprint_or_named_outside_it():
    """A module the step comes to import is classified: in TRAINING_CODE, or OUTSIDE_THE_FINGERPRINT with why."""
    inside = set(training_code_files(REPO))
    seen, todo, unclassified = set(), ["aoe/training/train.py"], []
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if module.endswith("__init__.py") and module not in inside:
            continue  # a part's __init__ only says what it may import (aoe/losses/__init__.py is in: it re-exports)
        if module not in inside and module not in OUTSIDE_THE_FINGERPRINT:
            unclassified.append(module)
        if module in inside:  # what the fingerprinted code imports is classified too
            todo += sorted(_aoe_imports(REPO / module))
    assert not unclassified, f"add to TRAINING_CODE or OUTSIDE_THE_FINGERPRINT (aoe/training/fingerprint.py): {unclassified}"
    assert all((REPO / m).is_file() for m in OUTSIDE_THE_FINGERPRINT), "a module named outside the fingerprint is gone"
    assert all((REPO / e).exists() for e in TRAINING_CODE) and PACKAGE_ROOT == REPO


def test_the_fingerprint_costs_little_at_planning():
    import time

    code_fingerprint()
    start = time.perf_counter()
    code_fingerprint()  # the Snakefile's second reading in a process (a cache hit)
    assert time.perf_counter() - start < 0.05


# ---- planning names the models of other code, and the command -----------------------------------------------


def _model(root: Path, cell_path: str, code: dict | None) -> Path:
    folder = root / "results/cpu-demo/models" / cell_path
    folder.mkdir(parents=True)
    (folder / "aoe_config.json").write_text(json.dumps({"pooling": "cls", **({"code": code} if code is not None else {})}))
    return folder


def test_planning_names_the_models_of_other_code_and_the_command(tmp_path):
    from aoe.config.cells import Cell
    from aoe.plan.code_changes import code_change_message, models_of_other_code

    config = {"results": "results/cpu-demo"}
    now = code_fingerprint()
    old = {**now["modules"], ANGLE: "0" * 16}
    cells = [Cell("minilm-l6", "aoe", "stsb", s) for s in (1, 2, 3, 4)]
    _model(tmp_path, cells[0].path, {"sha256": "f" * 16, "modules": old})
    _model(tmp_path, cells[1].path, {**now, "git_commit": "abc+dirty"})  # the tree's code: not named
    _model(tmp_path, cells[2].path, None)  # trained before the fingerprint was recorded
    changes = models_of_other_code(config, cells, tmp_path)  # cells[3]: not trained yet
    assert [(c.folder, c.modules) for c in changes] == [
        ("results/cpu-demo/models/minilm-l6/aoe/stsb/seed1", (ANGLE,)),
        ("results/cpu-demo/models/minilm-l6/aoe/stsb/seed3", ()),
    ]
    said = code_change_message(changes, ["presets/cpu-demo.yaml"])
    assert f"1 trained model(s) were trained by other code than this tree's ({ANGLE} changed" in said
    assert "1 trained model(s) record no code fingerprint" in said
    assert ("snakemake --forcerun results/cpu-demo/models/minilm-l6/aoe/stsb/seed1 results/cpu-demo/models/minilm-l6/aoe/stsb/seed3 "
            "--configfile presets/cpu-demo.yaml") in said
    assert models_of_other_code(config, cells[1:2], tmp_path) == []


def test_past_ten_models_the_command_forces_every_training(tmp_path):
    from aoe.config.cells import Cell
    from aoe.plan.code_changes import code_change_message, models_of_other_code

    cells = [Cell("bert", "aoe", "nli", s) for s in range(12)]
    for cell in cells:
        _model(tmp_path, cell.path, {"sha256": "f" * 16, "modules": {ANGLE: "0"}})
    said = code_change_message(models_of_other_code({"results": "results/cpu-demo"}, cells, tmp_path), [])
    assert "(12 in all)" in said and "snakemake --forcerun train_model," in said


# ---- the run's identity and record ------------------------------------------------------------------------


def test_an_identity_of_older_code_names_each_module_not_one_long_dict():
    from aoe.training.checkpoints import identity_changes

    old = {"train": {"seed": 1}}
    new = {"train": {"seed": 1}, "code": {ANGLE: "ab", "aoe/training/train.py": "cd"}}
    assert identity_changes(old, new) == [f"code.{ANGLE}: not recorded", "code.aoe/training/train.py: not recorded"]


def test_versions_and_the_report_say_the_same_commit_and_dirty_state(tmp_path):
    import subprocess

    from aoe.publish.report import git_commit as report_commit
    from aoe.util.provenance import git_commit, library_versions

    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)
    run("init", "-q")
    (repo / "f.py").write_text("x = 1\n")
    run("add", "f.py")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_commit(repo) == report_commit(repo) == head
    (repo / "untracked.txt").write_text("results are not code\n")
    assert git_commit(repo) == head
    (repo / "f.py").write_text("x = 2\n")
    assert git_commit(repo) == report_commit(repo) == head + "+dirty"
    assert git_commit(tmp_path / "nothing") is None and report_commit(tmp_path / "nothing") == "unknown"
    assert library_versions()["git_commit"] == git_commit()
