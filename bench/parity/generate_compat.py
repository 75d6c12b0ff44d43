"""LLM-supervised generation under two transformers: the pipeline's and the 4.33 of envs/chatglm.yaml.

    .venv/bin/python bench/parity/generate_compat.py --other-python /path/to/venv-4.33/bin/python

ChatGLM-6B's remote code needs transformers 4.33 (envs/chatglm.yaml), where generation stops a
batch only as a whole, ``torch_dtype`` is still the keyword and fast tokenizers hand generate
token_type_ids; aoe.llm_supervised.generate handles each. This runs the same generations
(tests/tiny_generators.py: a tiny random LLaMA, and the same weights as a remote-code model
registered only as AutoModel, as THUDM/chatglm-6b is) under this interpreter and under
``--other-python``, seeded sampling and greedy, with the prompts' real stopping rule and with a
three-word rule that stops rows at different steps, and compares every record (text, kind,
completion, finish, new_tokens). Prints a table, writes ``bench/parity/results/generate_compat.json``
(committed), exits 1 on any difference. About a minute on 2 cores; no data, no network.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
from _common import REPO, print_table, write_json  # noqa: E402

KEYS = ("text", "kind", "completion", "finish", "new_tokens")


def worker() -> dict:
    """Every generation of this interpreter's transformers, as JSON-able records."""
    import torch
    import transformers

    import aoe.llm_supervised.generate as gen
    from aoe.llm_supervised.prompts import PAPER_PROMPTS
    from tests.tiny_generators import TEXTS, build_remote_code_lm, build_tiny_lm

    torch.set_num_threads(1)
    real_rule = gen.completed_items
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = {"llama": build_tiny_lm(Path(tmp) / "llama"), "remote_code": build_remote_code_lm(Path(tmp) / "remote")}
        for rule_name, rule in (("paper", real_rule), ("three_words", lambda text, size: len(text.split()) >= 3)):
            gen.completed_items = rule
            for model_name, model_dir in models.items():
                for decoding, extra in (("sampled", {}), ("greedy", {"do_sample": False})):
                    settings = gen.GenerationSettings(
                        seed=1, temperature=1.0, top_p=0.9, batch_size=4, max_new_tokens=24, length_ratio=1.0, **extra
                    )
                    records, summary = gen.generate_all(TEXTS, model_dir, PAPER_PROMPTS, 1, settings, None, device="cpu", progress=False)
                    runs[f"{model_name}/{decoding}/{rule_name}"] = {
                        "model_class": summary["model_class"].rsplit(".", 1)[-1],
                        "records": [[r[k] for k in KEYS] for r in records],
                    }
        gen.completed_items = real_rule
    return {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "per_row_stopping": gen._transformers_at_least("4.39"),
        "runs": runs,
    }


def _digest(records: list) -> str:
    return hashlib.sha256(json.dumps(records, ensure_ascii=False).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other-python", required=False, help="an interpreter with another transformers (envs/chatglm.yaml's 4.33)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "generate_compat.json"))
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker()))
        return 0
    envs = {"this": worker()}
    if args.other_python:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        out = subprocess.run([args.other_python, __file__, "--worker"], cwd=REPO, env=env, capture_output=True, text=True, check=True)
        envs["other"] = json.loads(out.stdout.strip().splitlines()[-1])
    rows, differences = [], 0
    for run in envs["this"]["runs"]:
        row = [run]
        digests = []
        for side in envs.values():
            recs = side["runs"][run]["records"]
            digests.append(_digest(recs))
            row += [side["runs"][run]["model_class"], sum(r[3] == "stop" for r in recs), _digest(recs)]
        equal = len(set(digests)) == 1
        differences += not equal
        rows.append(row + ["yes" if equal else "NO"])
    header = ["run"]
    for side in envs.values():
        header += [f"class ({side['transformers']})", "stopped", "digest"]
    print_table("Generation records under each transformers (10 records per run)", header + ["equal"], rows)
    record = {
        "environments": {k: {kk: v[kk] for kk in ("transformers", "torch", "per_row_stopping")} for k, v in envs.items()},
        "runs": {run: {side: envs[side]["runs"][run] for side in envs} for run in envs["this"]["runs"]},
        "runs_compared": len(rows),
        "differences": differences,
    }
    path = write_json("generate_compat", record, args.out)
    print(f"wrote {path}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
