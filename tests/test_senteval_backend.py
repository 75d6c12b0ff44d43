"""evaluation.backend: senteval runs SimCSE's SentEval itself through our encoder.

SentEval is not on PyPI and CI has no GitHub, so the live tests run only where the
``senteval`` package is importable (the conda env envs/senteval.yaml, or SimCSE's
SentEval/ folder on PYTHONPATH); they then compare it with the built-in protocol on
the same model. The conversion of SentEval's result dictionaries is tested everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import pearsonr, spearmanr

from aoe.config.hparams import YAML_LOADER
from aoe.data.transfer import read_transfer
from aoe.evaluate import senteval_backend as se
from aoe.evaluate import transfer
from aoe.evaluate.sts import TASKS
from tests.senteval_reference import SENTEVAL_SYNTHETIC, encoder, write_synthetic_senteval
from tests.workflow_utils import MIRROR, REPO, needs_mirror


def _schema_modes() -> list[str]:
    schema = yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)
    return schema["properties"]["evaluation"]["properties"]["transfer"]["properties"]["mode"]["enum"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", _schema_modes())
def test_params_reproduce_sentevals_recorded_numbers(tmp_path, one_thread, mode):
    # The truth is SentEval's own output under SimCSE evaluation.py's settings (tests/senteval_reference.py),
    # not a copy of MODES: TREC's numbers change with every one of kfold, usepytorch and classifier settings.
    root = write_synthetic_senteval(tmp_path / "downstream")
    params = se.senteval_params(tmp_path, mode)
    assert Path(params["task_path"]) / "downstream" == root  # SentEval reads task_path + '/downstream/<task>'
    data = read_transfer(root, "TREC", expected_rows=None, published=False)
    sentences = list(dict.fromkeys(transfer._task_sentences(data)))
    row = {s: i for i, s in enumerate(sentences)}
    embedded = transfer._deduplicated_embeddings(data, encoder()(sentences), row)
    result = transfer._run_task(data, embedded, transfer.ClassifierParams.from_mapping(params), 1111)
    assert {k: result[k] for k in ("devacc", "acc")} == SENTEVAL_SYNTHETIC[(mode, "pytorch")]["TREC"]


def test_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown SentEval mode 'dev'"):
        se.senteval_params(tmp_path, "dev")


def test_pinned_fork_is_the_one_the_env_installs():
    env = yaml.load((REPO / "envs" / "senteval.yaml").read_text(), Loader=YAML_LOADER)
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert [r for r in pip if r.startswith("senteval")] == [se.SIMCSE_SENTEVAL]


def _sts_raw(rng):
    """SentEval's result shapes: STS12-16 with per-dataset entries and 'all'; STS-B/SICK-R per split."""
    raw, expected = {}, {}
    for task in TASKS:
        sys_, gold = rng.random(50), rng.random(50)
        if task in ("STSB", "SICKR"):
            raw[task] = {
                split: {"pearson": pearsonr(sys_, gold), "spearman": spearmanr(sys_, gold), "nsamples": 50}
                for split in ("train", "dev", "test")
            }
        else:
            raw[task] = {
                "a": {"pearson": pearsonr(sys_[:20], gold[:20]), "spearman": spearmanr(sys_[:20], gold[:20]), "nsamples": 20},
                "b": {"pearson": pearsonr(sys_[20:], gold[20:]), "spearman": spearmanr(sys_[20:], gold[20:]), "nsamples": 30},
                "all": {
                    "pearson": {"all": pearsonr(sys_, gold)[0], "mean": 0.0, "wmean": 0.0},
                    "spearman": {"all": spearmanr(sys_, gold)[0], "mean": 0.0, "wmean": 0.0},
                },
            }
        expected[task] = 100 * spearmanr(sys_, gold)[0]
    return raw, expected


def test_sts_results_are_read_as_simcse_reads_them():
    raw, expected = _sts_raw(np.random.default_rng(0))
    out = se.sts_from_senteval(raw, list(TASKS))
    for task in TASKS:
        assert out["tasks"][task]["spearman"] == pytest.approx(expected[task]), task
        assert out["tasks"][task]["n"] == 50
    assert out["avg"] == pytest.approx(np.mean([expected[t] for t in TASKS]))
    # a task left out is an explicit null, and so is the average
    partial = se.sts_from_senteval(raw, ["STSB"])
    assert partial["tasks"]["STS12"] is None and partial["avg"] is None


def test_transfer_results_keep_acc_devacc_and_f1():
    raw = {
        "MR": {"devacc": 80.0, "acc": 79.5, "ndev": 10662, "ntest": 10662},
        "MRPC": {"devacc": 74.0, "acc": 73.1, "f1": 81.2, "ndev": 4076, "ntest": 1725},
    }
    out = se.transfer_from_senteval(raw, ["MR", "MRPC"])
    assert out["tasks"]["MR"] == {"acc": 79.5, "devacc": 80.0, "ndev": 10662, "ntest": 10662}
    assert out["tasks"]["MRPC"]["f1"] == 81.2 and out["tasks"]["CR"] is None and out["avg"] is None


def test_missing_senteval_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(se, "senteval_available", lambda: False)
    with pytest.raises(ModuleNotFoundError, match="envs/senteval.yaml"):
        se.run_senteval(lambda texts: np.zeros((len(texts), 4)), ["STSB"], tmp_path)


@pytest.mark.skipif(not se.senteval_available(), reason="SimCSE's SentEval is not importable (envs/senteval.yaml)")
@needs_mirror
@pytest.mark.slow
def test_senteval_backend_equals_builtin_on_the_same_model(tmp_path, tiny_bert):
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.prepare import prepare_sts_table
    from aoe.evaluate.run import run_sts_evaluation

    downstream = resolve_downstream_root(MIRROR)
    tables, manifests = [], []
    for dataset in ("stsb", "sickr"):
        tables.append(tmp_path / f"{dataset}.parquet")
        manifests.append(tmp_path / f"{dataset}.manifest.json")
        prepare_sts_table(dataset, "test", str(downstream), tables[-1], manifests[-1])
    kwargs = dict(tables=tables, manifests=manifests, pooling="cls", batch_size=64, max_length=128, tasks=["STSB", "SICKR"])
    builtin = run_sts_evaluation(tiny_bert, out=tmp_path / "builtin.json", **kwargs)
    real = run_sts_evaluation(tiny_bert, out=tmp_path / "senteval.json", backend="senteval", downstream=downstream, **kwargs)
    assert json.loads((tmp_path / "senteval.json").read_text())["protocol"]["backend"] == "senteval"
    for task in ("STSB", "SICKR"):
        # same texts, same model; SentEval embeds in its own batches (last float bits differ)
        assert real["tasks"][task]["spearman"] == pytest.approx(builtin["tasks"][task]["spearman"], abs=0.05), task
