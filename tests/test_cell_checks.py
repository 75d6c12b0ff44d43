"""aoe.plan.cell_checks: each trained cell's resolved recipe refused at planning time, not inside its training job:
a trained start, a batch size the train set cannot hold or the processes cannot split, a pooling the backend cannot
score (every check's own case: tests/test_check.py)."""

from __future__ import annotations

import pytest
import yaml

from aoe.config.errors import ConfigError
from aoe.plan.check import load_config
from tests.workflow_utils import REPO, building, planning_error


@pytest.mark.parametrize(
    "override, start",
    [
        ({"trainsets": {"gis": {"train": {"init": {"trainset": "nli", "objective": "anglee"}}}}},
         "trainsets.gis.train.init.objective: unknown objective 'anglee'"),
        # QLoRA adapters train on the quantized base: a full model as the start cannot be loaded into it
        ({"backbones": {"llama-2-7b": {"train_overrides": {"init": {"trainset": "stsb"}}}}},
         "backbones.llama-2-7b.train_overrides.init: cell llama-2-7b/aoe/nli/seed42 fine-tunes with 'qlora'"),
        # nli/angle_arxiv would start from stsb/aoe, which starts from nli/angle_arxiv
        ({"trainsets": {"nli": {"objective_train": {"angle_arxiv": {"init": {"trainset": "stsb", "objective": "aoe"}}}}}},
         "trainsets.stsb.train.init: the starts form a cycle: bert-base-uncased/angle_arxiv/nli/seed42 starts from "
         "bert-base-uncased/aoe/stsb/seed42 starts from bert-base-uncased/angle_arxiv/nli/seed42"),
        ({"trainsets": {"stsb_llm": {"train": {"init": {"objective": "aoe"}}}}},
         "trainsets.stsb_llm.train.init: 'trainset' is a required property"),
    ],
)
def test_a_trained_start_is_checked_at_planning_time(tmp_path, override, start):
    message = planning_error(tmp_path, override)
    assert message.startswith(start), message


def test_senteval_backend_refuses_a_cell_trained_with_a_padded_pooling(tmp_path):
    """Its STS evaluation must batch as the official eval did (aoe.evaluate.run.scoring_pooling), which SimCSE's
    SentEval does not; the message names the key that gave the cell its pooling."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({
        "evaluation": {"backend": "senteval"},
        "trainsets": {"nli": {"objective_train": {"angle_arxiv": {"eval_pooling": None}}}},
        **building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released")),
    }))
    with pytest.raises(ConfigError, match=r"^objectives\.angle_pool_avg\.pooling: 'avg_padded' \(cell bert-base-uncased/angle_pool_avg/stsb/seed42's"):
        load_config(REPO, [tmp_path / "override.yaml"])


# accumulation steps and processes, only once the job runs: after Snakemake has deleted the
# cell's previous model. The same checks run when the workflow is planned.


def _ci_error(tmp_path, override: dict) -> str:
    """load_config on the CI preset and ``override`` (override.yaml): the one-line error."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_a_batch_larger_than_the_train_set_is_refused_at_planning_time(tmp_path):
    message = _ci_error(tmp_path, {"trainsets": {"stsb": {"train": {"batch_size": 6000}}}})
    assert message == (
        f"trainsets.stsb.train.batch_size: 6000 (in {tmp_path / 'override.yaml'}) is more than the 5749 rows of "
        "stsb train (its published size), the most train set 'stsb' can hold: cell minilm-l6/aoe/stsb/seed1 "
        "would have no batch to train on; set it to at most 5749"
    )


def test_the_batch_check_names_the_key_that_set_the_batch(tmp_path):
    # a backbone's train_overrides wins over the train set's key: it is the one to change
    message = _ci_error(tmp_path, {"backbones": {"minilm-l6": {"train_overrides": {"batch_size": 5750}}}})
    assert message.startswith(f"backbones.minilm-l6.train_overrides.batch_size: 5750 (in {tmp_path / 'override.yaml'}) "
                              "is more than the 5749 rows of stsb train"), message


def test_a_batch_of_the_whole_train_set_passes(tmp_path):
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"trainsets": {"stsb": {"train": {"batch_size": 5749}}}}))
    load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])


def _nli_dev_run(batch_size: int) -> dict:
    return {
        # the CI preset's run (its tables read it) and one on SNLI dev
        "runs": [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]},
                 {"backbone": "minilm-l6", "trainset": "snli_dev", "objectives": ["aoe"], "seeds": [1]}],
        "trainsets": {"snli_dev": {"dataset": "snli", "split": "dev", "score_range": [0, 1],
                                   "train": {"batch_size": batch_size}}},
    }


def test_the_train_set_size_is_an_upper_bound_of_its_examples(tmp_path):
    """SNLI dev has 9842 labelled rows; its pairs table drops the neutral ones, so fewer examples than
    that are certain only above 9842: a batch between the two is left to the training job."""
    message = _ci_error(tmp_path, _nli_dev_run(9843))
    assert message.startswith(f"trainsets.snli_dev.train.batch_size: 9843 (in {tmp_path / 'override.yaml'}) is more "
                              "than the 9842 rows of snli dev (its published size)"), message
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(_nli_dev_run(9000)))
    load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])


def test_a_train_set_of_unknown_size_is_not_checked(tmp_path):
    # AllNLI's size is known only once it is downloaded; the job checks it
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"trainsets": {"nli": {"train": {"batch_size": 10_000_000}}}}))
    load_config(REPO, [tmp_path / "override.yaml"])


def test_a_trained_start_is_checked_too(tmp_path):
    """A cell's trained start (trainsets.<t>.train.init) is trained though no run lists it: its batch is checked."""
    override = {
        "runs": [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]},  # the CI preset's
                 {"backbone": "bert-base-uncased", "trainset": "stsb", "objectives": ["aoe"], "seeds": [42]}],
        "trainsets": {"stsb": {"train": {"init": {"trainset": "snli_dev"}}},
                      "snli_dev": {"dataset": "snli", "split": "dev", "score_range": [0, 1], "train": {"batch_size": 20000}}},
    }
    message = _ci_error(tmp_path, override)
    assert message.startswith("trainsets.snli_dev.train.batch_size: 20000 (in "), message
    assert "cell bert-base-uncased/aoe/snli_dev/seed42" in message
    override["trainsets"]["snli_dev"]["train"]["batch_size"] = 64
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])


@pytest.mark.parametrize(
    "override, start",
    [
        ({"trainsets": {"stsb": {"train": {"batch_size": 30, "gradient_accumulation_steps": 4}}}},
         "trainsets.stsb.train.batch_size: 30 (in {override}) must split into gradient_accumulation_steps "
         "(4: trainsets.stsb.train.gradient_accumulation_steps, in {override}) micro-batches each divisible by the "
         "number of processes (1: backbones.minilm-l6.resources.gpus, in config.yaml) of cell minilm-l6/aoe/stsb/seed1; "
         "set it to a multiple of 4"),
        # the processes are the backbone's GPUs (the rule launches one process per GPU)
        ({"backbones": {"minilm-l6": {"resources": {"gpus": 3}}}},
         "trainsets.stsb.train.batch_size: 32 (in config.yaml) must split into gradient_accumulation_steps "
         "(1: trainsets.stsb.train.gradient_accumulation_steps, unset: the default of "
         "aoe.config.hparams.TrainSettings.gradient_accumulation_steps) micro-batches each divisible by "
         "the number of processes (3: backbones.minilm-l6.resources.gpus, in {override}) of cell "
         "minilm-l6/aoe/stsb/seed1; set it to a multiple of 3"),
    ],
)
def test_a_batch_that_does_not_split_over_accumulation_and_processes_is_refused(tmp_path, override, start):
    message = _ci_error(tmp_path, override)
    assert message == start.format(override=tmp_path / "override.yaml"), message


def test_the_paper_grid_splits_its_llm_batches_over_four_gpus(tmp_path):
    """llama-2-7b trains on 4 GPUs (config.yaml): 640 pairs split, 642 do not."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"backbones": {"llama-2-7b": {"train_overrides": {"batch_size": 642}}}}))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(
        f"backbones.llama-2-7b.train_overrides.batch_size: 642 (in {tmp_path / 'override.yaml'}) must split into "
        "gradient_accumulation_steps (1: backbones.llama-2-7b.train_overrides.gradient_accumulation_steps, in config.yaml) "
        "micro-batches each divisible by the number of processes (4: backbones.llama-2-7b.resources.gpus, in config.yaml)"
    ), str(err.value)
