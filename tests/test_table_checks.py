"""aoe.plan.table_checks: a table's rows refused at planning time, one line naming the key: evaluation-only poolings
where a table has none, a preset's backbones beside config.yaml's rows; and config.yaml's own such rows pass
(every check's own case: tests/test_check.py)."""

from __future__ import annotations

import pytest
import yaml

from aoe.config.errors import ConfigError
from aoe.plan.check import load_config
from tests.workflow_utils import REPO, building


_ANGLE_BERT = {"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-base-nli-v1"}


def test_a_released_row_of_an_sts_table_takes_an_evaluation_only_pooling(tmp_path):
    """config.yaml's table released scores AnglE-BERT's 82.37 row under 0.1.1's padded cls_avg (the official
    eval.py's), its masked cls_avg in a variant row; any released checkpoint's STS row may take one."""
    config = load_config(REPO, [])
    rows = [r for r in config["tables"]["released"]["rows"] if r["trainset"] == "angle-bert-base-nli-v1"]
    # the candidate evaluations of 82.37 / 82.43 (issue 69): CLS, 0.1.1's padded cls_avg in batches of 32 and 2, 0.4.6's
    assert [r.get("eval_pooling") for r in rows] == ["cls_avg_padded", None, "cls", "cls_avg_padded-bs32", "cls_avg_padded-bs2",
                                                     "cls_avg_batchsum"]
    # a SentEval batch size is named only for an arithmetic that depends on the batch
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"tables": {"released": {"rows": [{**_ANGLE_BERT, "eval_pooling": "cls_avg-bs16"}]}}}))
    with pytest.raises(ConfigError, match="cls_avg-bs16"):
        load_config(REPO, [tmp_path / "override.yaml"])
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"tables": {"released": {"kind": "stsb", "rows": [
        {**_ANGLE_BERT, "eval_pooling": "avg_padded-bs8"},
        {"backbone": "llama-2-7b", "objective": "released", "trainset": "angle-llama-7b-nli-v2", "eval_pooling": "last_position"}]}}}))
    config = load_config(REPO, [tmp_path / "override.yaml"])
    assert [r["eval_pooling"] for r in config["tables"]["released"]["rows"]] == ["avg_padded-bs8", "last_position"]


def test_a_transfer_row_takes_an_evaluation_only_pooling(tmp_path):
    """Issue 36: config.yaml scores AnglE-BERT's transfer tasks as its STS (the cell's cls_avg_padded, the official
    eval.py's), its training CLS a variant row; AoE-BERT's Table 3 row has the official NLI eval's cls_avg beside it.
    Any trained or released row of a transfer table may take one (rule evaluate_transfer_eval_pooling)."""
    config = load_config(REPO, [])
    pools = {t: [(r["objective"], r.get("eval_pooling")) for r in config["tables"][t]["rows"] if r["backbone"] == "bert-base-uncased"]
             for t in ("angle_transfer_tasks", "table3_transfer")}
    assert pools["angle_transfer_tasks"] == [("pretrained", None), ("angle_arxiv", None), ("angle_arxiv", "cls")]
    assert ("aoe", None) in pools["table3_transfer"] and ("aoe", "cls_avg_batchsum") in pools["table3_transfer"]
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"tables": {"released_transfer": {"rows": [
        {**_ANGLE_BERT, "eval_pooling": "cls_avg_padded"}, _ANGLE_BERT]}}}))
    config = load_config(REPO, [tmp_path / "override.yaml"])
    assert [r.get("eval_pooling") for r in config["tables"]["released_transfer"]["rows"]] == ["cls_avg_padded", None]
    # SimCSE's SentEval (backend senteval) batches the transfer tasks as the official copy: a transfer row may keep one
    # the cells trained with a padded pooling are scored with it on STS too: masked here, as the backend needs
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({
        "evaluation": {"backend": "senteval"},
        "trainsets": {"nli": {"objective_train": {"angle_arxiv": {"eval_pooling": None}}}},
        "objectives": {"angle_pool_cls_avg": {"pooling": "cls_avg"}, "angle_pool_avg": {"pooling": "avg"},
                       "angle_pool_max": {"pooling": "max"}, "aoe_pool_max": {"pooling": "max"},
                       "aoe_pool_cls_avg": {"pooling": "cls_avg"}},
        **building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released")),
    }))
    load_config(REPO, [tmp_path / "override.yaml"])


@pytest.mark.parametrize(
    "override, start",
    [
        # the in-domain, MTEB, NLI probe ... evaluations have no evaluation-only variant, a released row's neither
        ({"tables": {"released_mteb": {"rows": [{"backbone": "bert-large-uncased", "objective": "released", "trainset": "uae-large-v1",
                                                  "eval_pooling": "cls_avg_padded"}]}}},
         "tables.released_mteb.rows[0].eval_pooling: an evaluation-only pooling is a variant of an STS or transfer evaluation "
         "(rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling); table kind 'mteb' has none: drop the key or move "
         "the row to a table of kind sts7, stsb, ablation or transfer"),
        ({"tables": {"nli_probe_rows": {"kind": "nli_probe", "trainset": "nli",
                                         "rows": [{"backbone": "bert-base-uncased", "objective": "aoe", "eval_pooling": "cls_avg"}]}},
          **building("nli_probe_rows")},
         "tables.nli_probe_rows.rows[0].eval_pooling: an evaluation-only pooling is a variant of an STS or transfer evaluation"),
        # a transfer table's pretrained row: a pretrained variant, as on STS
        ({"tables": {"table3_transfer": {"rows": [{"backbone": "bert-base-uncased", "objective": "pretrained", "eval_pooling": "cls_avg_padded"}]}}},
         "tables.table3_transfer.rows[0].eval_pooling: a backbone as downloaded has no evaluation-only pooling"),
        # a transfer row of a released checkpoint under its own pooling: its transfer.json
        ({"tables": {"released_transfer": {"rows": [{**_ANGLE_BERT, "eval_pooling": "cls_avg"}]}}},
         "tables.released_transfer.rows[0].eval_pooling: 'cls_avg' is checkpoint 'angle-bert-base-nli-v1''s own pooling"),
        # SimCSE's SentEval orders STS12-16 otherwise than AnglE's copy: no batch-dependent pooling on STS there,
        # neither a row's nor a cell's (config.yaml's AnglE-BERT NLI cell scores its STS under cls_avg_padded; so does
        # the released AnglE-BERT's row set against ACL's 82.43)
        ({"evaluation": {"backend": "senteval"}},
         "tables.table1_sts.rows[5].eval_pooling: 'cls_avg_padded' depends on the batch, and evaluation.backend senteval "
         "(SimCSE's SentEval) batches STS12-16 in another order than the official copy (aoe.evaluate.senteval_batches); "
         "set evaluation.backend builtin or drop the key"),
        ({"evaluation": {"backend": "senteval"}, **building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released"))},
         "trainsets.nli.objective_train.angle_arxiv.eval_pooling: 'cls_avg_padded' (cell bert-base-uncased/angle_arxiv/nli/seed42"),
        # the backbone as downloaded embeds another way through a pretrained variant
        ({"tables": {"released": {"rows": [{"backbone": "bert-base-uncased", "objective": "pretrained", "eval_pooling": "cls_avg_padded"}]}}},
         "tables.released.rows[0].eval_pooling: a backbone as downloaded has no evaluation-only pooling; give it another "
         "pooling as a pretrained variant (evaluation.pretrained_variants"),
        # the checkpoint's own pooling is its sts.json, the row without the key
        ({"tables": {"released": {"rows": [{**_ANGLE_BERT, "eval_pooling": "cls_avg"}]}}},
         "tables.released.rows[0].eval_pooling: 'cls_avg' is checkpoint 'angle-bert-base-nli-v1''s own pooling "
         "(released.checkpoints.angle-bert-base-nli-v1.pooling)"),
        # the released row's own checks still run
        ({"tables": {"released": {"rows": [{"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-nli",
                                             "eval_pooling": "cls_avg_padded"}]}}},
         "tables.released.rows[0]: 'angle-bert-nli' is not a checkpoint of released.checkpoints"),
    ],
)
def test_an_evaluation_only_pooling_elsewhere_is_refused_at_planning_time(tmp_path, override, start):
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    message = str(err.value)
    assert message.startswith(start) and "\n" not in message, message


def test_a_preset_giving_backbones_to_a_table_of_rows_is_refused(tmp_path):
    """Snakemake merges a preset's table into config.yaml's key by key: backbones/objectives given to
    table1_sts (rows in config.yaml) would silently lose to those rows; the check names the table."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(
        {"tables": {"table1_sts": {"backbones": ["minilm-l6"], "objectives": ["aoe"]}}}))
    with pytest.raises(ConfigError, match=r"^tables\.table1_sts: has both rows and backbones/objectives .*must give rows$"):
        load_config(REPO, [tmp_path / "override.yaml"])
