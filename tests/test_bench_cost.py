"""bench/cluster_cost.py reads the config a run would (presets merged over config.yaml) and costs one target."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.workflow_utils import REPO


def _cost(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    out_json = tmp_path / f"cost{len(list(tmp_path.iterdir()))}.json"
    out = subprocess.run([sys.executable, "bench/cluster_cost.py", *args, "--out", str(out_json)], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return out, json.loads(out_json.read_text()) if out_json.is_file() else None


@pytest.mark.slow
def test_cost_of_a_target_and_of_a_preset(tmp_path):
    # table2 of the paper grid trains BERT-base on STS-B and GIS: 5 objectives x 5 runs x 2 sets (SimCSE, SBERT, AoE
    # at the arXiv in-domain recipe, the STS-B example's and the reproduction report's), and the NLI AnglE model of
    # each seed the STS-B example starts from
    out, record = _cost(tmp_path, "table2")
    assert out.returncode == 0, out.stdout[-3000:]
    assert record["targets"] == ["table2"]
    assert {b: v["trainings"] for b, v in record["per_backbone"].items()} == {"bert-base-uncased": 55}
    # the preset alone has no objectives: it is merged over config.yaml as snakemake does (was a KeyError)
    out, record = _cost(tmp_path, "--configfile", "presets/cpu-demo.yaml")
    assert out.returncode == 0, out.stdout[-3000:]
    assert set(record["per_backbone"]) == {"minilm-l6"} and record["per_backbone"]["minilm-l6"]["trainings"] == 2
    out, _ = _cost(tmp_path, "--configfile", "presets/nope.yaml")
    assert out.returncode == 1 and out.stdout.splitlines()[0].startswith("bench/cluster_cost.py: config: ") \
        and "presets/nope.yaml: no such config file" in out.stdout
